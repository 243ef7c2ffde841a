"""A Spark driver program for the exactly-once tests: copy one topic into another with a stream.

    python stream_copy_job.py --bootstrap H:P --input T --output U --checkpoint DIR
                              [--master local[2]] [--max-offsets 300] [--fail-dir DIR]

Runs `readStream.format("logbroker")` → `writeStream.format("logbroker")` under
`trigger(availableNow=True)` and exits 0 when the input is copied. The tests kill it with
SIGKILL and run it again on the same checkpoint. With `--fail-dir`, a Python UDF in the query
raises in the first attempt of every task that reaches a record whose number ends in
one of the comma-separated `--fail-suffix` (once per such record: a marker file in DIR remembers it), so tasks fail in the middle of their write and
Spark retries them (`spark.task.maxFailures`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--max-offsets", type=int, default=300)
    parser.add_argument("--fail-dir")
    parser.add_argument("--fail-suffix", default="37")
    parser.add_argument("--exactly-once", default=None)
    parser.add_argument("--remote", help="a Spark Connect URL instead of --master")
    parser.add_argument("--report", action="store_true",
                        help="then batch-read the output (read_committed) and print JSON: rows, "
                        "distinct values, and where the executors import logbroker from")
    args = parser.parse_args()

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from logbroker.spark import LogbrokerDataSource

    if args.remote:
        builder = SparkSession.builder.remote(args.remote)
    else:
        builder = (SparkSession.builder.master(args.master)
                   .config("spark.ui.enabled", "false")
                   .config("spark.sql.shuffle.partitions", "2")
                   .config("spark.task.maxFailures", "4")
                   .config("spark.sql.execution.arrow.maxRecordsPerBatch", "50"))
    spark = builder.appName("stream-copy").getOrCreate()
    if not args.remote:
        spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(LogbrokerDataSource)

    df = (spark.readStream.format("logbroker")
          .option("kafka.bootstrap.servers", args.bootstrap)
          .option("subscribe", args.input)
          .option("startingOffsets", "earliest")
          .option("maxOffsetsPerTrigger", str(args.max_offsets))
          .load())
    value = F.col("value")
    if args.fail_dir:
        fail_dir = args.fail_dir
        suffixes = tuple(s.encode() for s in args.fail_suffix.split(","))

        @F.udf("binary")
        def fail_once(v: bytes) -> bytes:
            from pyspark import TaskContext

            if v.endswith(suffixes) and TaskContext.get().attemptNumber() == 0:
                marker = os.path.join(fail_dir, v.decode())
                if not os.path.exists(marker):
                    open(marker, "w").close()
                    raise RuntimeError(f"injected failure at {v!r}")
            return v

        value = fail_once(value)
    writer = (df.select("key", value.alias("value")).writeStream.format("logbroker")
              .option("kafka.bootstrap.servers", args.bootstrap)
              .option("topic", args.output)
              .option("checkpointLocation", args.checkpoint))
    if args.exactly_once is not None:
        writer = writer.option("exactlyOnce", args.exactly_once)
    query = writer.trigger(availableNow=True).start()
    query.awaitTermination()
    if args.report:
        report(spark, args)
    spark.stop()
    return 0


def report(spark, args) -> None:
    from pyspark.sql import functions as F

    @F.udf("string")
    def logbroker_file(_) -> str:
        import logbroker

        return logbroker.__file__

    out = (spark.read.format("logbroker").option("kafka.bootstrap.servers", args.bootstrap)
           .option("subscribe", args.output).option("kafka.isolation.level", "read_committed")
           .load())
    row = out.agg(F.count("*").alias("rows"), F.countDistinct("value").alias("distinct"),
                  F.max(logbroker_file("value")).alias("file")).collect()[0]
    print(json.dumps({"rows": row["rows"], "distinct": row["distinct"], "file": row["file"]}))


if __name__ == "__main__":
    sys.exit(main())
