"""The Structured Streaming job: clickstream topic → windowed counts → result topic + Parquet.

    events (JSON in `value`) → parse → watermark on event_time (2 min)
      → drop the end-of-stream marker → 1-minute tumbling windows per event type:
        events and revenue_cents (of purchases) — exact integers, so the results can be checked
        exactly against a plain Python recount
      → foreachBatch: Parquet under <output>/windows/batch_id=<id> (overwritten on replay, so a
        replayed micro-batch never duplicates rows) and JSON records to the result topic.

Append mode emits a window once the watermark has passed its end, so every window appears once,
final. The watermark is computed before the marker is filtered out, so the marker still advances
it (the filter reads event_time so that the optimizer cannot push it below the watermark).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

WATERMARK_DELAY = "2 minutes"
WINDOW = "1 minute"
EVENT_SCHEMA = ("event_id LONG, user_id STRING, session_id STRING, event_type STRING, "
                "product_id STRING, category STRING, price_cents LONG, event_time STRING")


@dataclass(frozen=True, kw_only=True)
class JobConfig:
    bootstrap_servers: str
    source_topic: str
    result_topic: str
    output_dir: Path
    max_offsets_per_trigger: int = 5000


def windowed_counts(spark, config: JobConfig):
    """The streaming DataFrame of final per-window, per-event-type counts."""
    from pyspark.sql import functions as F

    raw = (spark.readStream.format("logbroker")
           .option("kafka.bootstrap.servers", config.bootstrap_servers)
           .option("subscribe", config.source_topic)
           .option("startingOffsets", "earliest")
           .option("maxOffsetsPerTrigger", str(config.max_offsets_per_trigger))
           .load())
    events = (raw.select(F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e"))
              .select("e.*")
              .withColumn("event_time", F.to_timestamp("event_time"))
              .withWatermark("event_time", WATERMARK_DELAY)
              # Spark pushes a filter below the watermark unless it reads the event-time
              # column; this one must stay above it, or the marker would never move it.
              .where(F.when(F.col("event_time").isNotNull(), F.col("event_type"))
                     != "end_of_stream"))
    return (events.groupBy(F.window("event_time", WINDOW).alias("window"), "event_type")
            .agg(F.count("*").alias("events"),
                 F.sum(F.when(F.col("event_type") == "purchase", F.col("price_cents"))
                       .otherwise(F.lit(0))).alias("revenue_cents"))
            .select(F.col("window.start").alias("window_start"),
                    F.col("window.end").alias("window_end"), "event_type", "events",
                    "revenue_cents"))


def start(spark, config: JobConfig):
    """Start the query under trigger(availableNow=True); returns the StreamingQuery."""
    from pyspark.sql import functions as F

    windows_dir = config.output_dir / "windows"

    def write_batch(batch_df, batch_id: int) -> None:
        batch_df = batch_df.persist()
        try:
            if batch_df.isEmpty():
                return
            batch_df.write.mode("overwrite").parquet(str(windows_dir / f"batch_id={batch_id}"))
            (batch_df.select(F.col("event_type").alias("key"),
                             F.to_json(F.struct(*batch_df.columns)).alias("value"))
             .write.format("logbroker")
             .option("kafka.bootstrap.servers", config.bootstrap_servers)
             .option("topic", config.result_topic).mode("append").save())
        finally:
            batch_df.unpersist()

    return (windowed_counts(spark, config).writeStream.outputMode("append")
            .foreachBatch(write_batch)
            .option("checkpointLocation", str(config.output_dir / "checkpoint"))
            .trigger(availableNow=True)
            .queryName("clickstream_windows")
            .start())
