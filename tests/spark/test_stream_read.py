"""Streaming reads: checkpointed offsets, availableNow, maxOffsetsPerTrigger, new partitions."""

from __future__ import annotations

import json

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions
from spark_kafka import create_topic, delete_records_before, new_topic_name, produce


def records(start: int, count: int, partitions: int) -> list[dict]:
    return [{"key": str(i).encode(), "value": f"event-{i}".encode(), "partition": i % partitions}
            for i in range(start, start + count)]


def run_available_now(spark, bootstrap: str, topic: str, sink, checkpoint, **options):
    reader = (spark.readStream.format("logbroker").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest"))
    for key, value in options.items():
        reader = reader.option(key, value)
    query = (reader.load().selectExpr("CAST(value AS STRING) AS value", "partition", "offset")
             .writeStream.format("parquet").option("path", str(sink))
             .option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert not query.isActive
    assert query.exception() is None
    return query


def test_available_now_resumes_from_checkpoint_exactly(spark, bootstrap, tmp_path):
    topic = new_topic_name()
    create_topic(bootstrap, topic, 3)
    sink, checkpoint = tmp_path / "sink", tmp_path / "checkpoint"
    produce(bootstrap, topic, records(0, 120, 3))
    run_available_now(spark, bootstrap, topic, sink, checkpoint)
    assert spark.read.parquet(str(sink)).count() == 120

    produce(bootstrap, topic, records(120, 45, 3))
    run_available_now(spark, bootstrap, topic, sink, checkpoint)
    values = [r["value"] for r in spark.read.parquet(str(sink)).collect()]
    assert len(values) == 165
    assert sorted(values) == sorted(f"event-{i}" for i in range(165))

    # The checkpoint holds Spark Kafka's offset JSON with string partition keys.
    latest = max((p for p in (checkpoint / "offsets").iterdir() if p.name.isdigit()),
                 key=lambda p: int(p.name))
    offsets = json.loads(latest.read_text().splitlines()[-1])
    assert offsets == {topic: {"0": 55, "1": 55, "2": 55}}


def test_max_offsets_per_trigger_caps_each_micro_batch(spark, bootstrap, tmp_path):
    topic = new_topic_name()
    create_topic(bootstrap, topic, 2)
    produce(bootstrap, topic, records(0, 100, 2))
    query = run_available_now(spark, bootstrap, topic, tmp_path / "sink", tmp_path / "cp",
                              maxOffsetsPerTrigger="30")
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sizes == [30, 30, 30, 10]
    assert spark.read.parquet(str(tmp_path / "sink")).count() == 100


def test_new_partitions_are_read_from_their_start(spark, bootstrap, tmp_path):
    topic = new_topic_name()
    create_topic(bootstrap, topic, 1)
    sink, checkpoint = tmp_path / "sink", tmp_path / "cp"
    produce(bootstrap, topic, records(0, 10, 1))
    run_available_now(spark, bootstrap, topic, sink, checkpoint)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_partitions([NewPartitions(topic, 3)]).values():
        future.result(30)
    produce(bootstrap, topic, records(10, 30, 3))
    run_available_now(spark, bootstrap, topic, sink, checkpoint)
    rows = spark.read.parquet(str(sink)).collect()
    assert len(rows) == 40
    assert {r["partition"] for r in rows} == {0, 1, 2}


def test_starting_offsets_latest_skips_existing_records(spark, bootstrap, tmp_path):
    topic = new_topic_name()
    create_topic(bootstrap, topic, 2)
    produce(bootstrap, topic, records(0, 20, 2))
    sink, checkpoint = tmp_path / "sink", tmp_path / "cp"
    run_available_now(spark, bootstrap, topic, sink, checkpoint, startingOffsets="latest")
    produce(bootstrap, topic, records(20, 6, 2))
    run_available_now(spark, bootstrap, topic, sink, checkpoint, startingOffsets="latest")
    values = sorted(r["value"] for r in spark.read.parquet(str(sink)).collect())
    assert values == sorted(f"event-{i}" for i in range(20, 26))


def test_ending_offsets_are_refused_for_streaming(spark, bootstrap, tmp_path):
    query = (spark.readStream.format("logbroker").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", "x").option("endingOffsets", "latest").load()
             .writeStream.format("parquet").option("path", str(tmp_path / "sink"))
             .option("checkpointLocation", str(tmp_path / "cp")).start())
    try:
        with pytest.raises(Exception, match="batch queries only"):
            query.awaitTermination(60)
    finally:
        query.stop()


def test_deleted_offsets_fail_the_query_unless_fail_on_data_loss_is_false(spark, bootstrap,
                                                                          tmp_path):
    topic = new_topic_name()
    create_topic(bootstrap, topic, 1)
    sink, checkpoint = tmp_path / "sink", tmp_path / "cp"
    produce(bootstrap, topic, records(0, 10, 1))
    run_available_now(spark, bootstrap, topic, sink, checkpoint)
    produce(bootstrap, topic, records(10, 20, 1))
    delete_records_before(bootstrap, topic, 0, 15)

    reader = (spark.readStream.format("logbroker").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic))
    failing = (reader.load().selectExpr("CAST(value AS STRING) AS value", "partition", "offset")
               .writeStream.format("parquet").option("path", str(sink))
               .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    with pytest.raises(Exception, match="failOnDataLoss"):
        failing.awaitTermination(60)
    failing.stop()

    run_available_now(spark, bootstrap, topic, sink, checkpoint, failOnDataLoss="false")
    offsets = sorted(r["offset"] for r in spark.read.parquet(str(sink)).collect())
    assert offsets == list(range(10)) + list(range(15, 30))


def test_a_failed_micro_batch_is_replayed_with_the_same_offsets(spark, bootstrap, tmp_path):
    topic = new_topic_name()
    create_topic(bootstrap, topic, 2)
    produce(bootstrap, topic, records(0, 90, 2))
    out, failed_once = tmp_path / "out", tmp_path / "failed-once"

    def write(batch_df, batch_id):
        batch_df.write.mode("overwrite").parquet(str(out / f"batch_id={batch_id}"))
        if batch_id == 1 and not failed_once.exists():
            failed_once.touch()
            raise RuntimeError("injected failure after writing batch 1")

    def start():
        return (spark.readStream.format("logbroker").option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", topic).option("startingOffsets", "earliest")
                .option("maxOffsetsPerTrigger", "40").load()
                .selectExpr("CAST(value AS STRING) AS value", "partition", "offset")
                .writeStream.foreachBatch(write)
                .option("checkpointLocation", str(tmp_path / "cp"))
                .trigger(availableNow=True).start())

    query = start()
    with pytest.raises(Exception, match="injected failure"):
        query.awaitTermination(120)
    query = start()
    query.awaitTermination(120)
    assert query.exception() is None
    rows = spark.read.parquet(str(out)).collect()
    assert sorted(r["value"] for r in rows) == sorted(f"event-{i}" for i in range(90))
    per_batch = {}
    for r in rows:
        per_batch[r["batch_id"]] = per_batch.get(r["batch_id"], 0) + 1
    assert per_batch == {0: 40, 1: 40, 2: 10}
