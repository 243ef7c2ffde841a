"""Spark read/write rows/s through the logbroker source and sink vs plain confluent-kafka, 1 KiB records.

    python bench/bench_spark.py [N] [--master local[2] | --master standalone]

`standalone` starts a Spark standalone Master and a 2-core Worker from pyspark's jars
(logbroker.spark.local_cluster). Prints: the plain producer and consumer (one process, so one
core), the Spark batch read (rows/s and rows/s per Spark core), the batch write, and the
streaming sink with exactlyOnce=true and exactlyOnce=false (readStream → writeStream under
availableNow, same micro-batches).
"""
import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ["PYSPARK_PYTHON"] = sys.executable
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.sql import SparkSession

from logbroker.spark import LogbrokerDataSource
from logbroker.spark.local_cluster import StandaloneCluster
from logbroker.testing import BrokerProcess

parser = argparse.ArgumentParser()
parser.add_argument("n", type=int, nargs="?", default=200_000)
parser.add_argument("--master", default="local[2]")
parser.add_argument("--per-trigger", type=int, default=50_000)
args = parser.parse_args()
N, P, CORES = args.n, 2, 2
payload = os.urandom(1024)
work = Path(tempfile.mkdtemp())

cluster = None
master = args.master
if master == "standalone":
    cluster = StandaloneCluster(work / "spark", cores=CORES).start()
    master = cluster.master_url
try:
    with BrokerProcess(work / "broker") as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        for topic in ("bench", "bench-out", "eos-out", "alo-out", "eos-out-1", "alo-out-1"):
            admin.create_topics([NewTopic(topic, P, 1)])[topic].result()
        t = time.perf_counter()
        p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "enable.idempotence": True,
                      "linger.ms": 5})
        for i in range(N):
            while True:
                try:
                    p.produce("bench", value=payload, partition=i % P)
                    break
                except BufferError:
                    p.poll(0.01)
        p.flush()
        print(f"plain producer: {N / (time.perf_counter() - t):,.0f} rows/s")
        t = time.perf_counter()
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "x", "enable.auto.commit": False,
                      "enable.partition.eof": True})
        c.assign([TopicPartition("bench", i, 0) for i in range(P)])
        n = eof = nbytes = 0
        while eof < P:
            for m in c.consume(10000, 0.5):
                if m.error():
                    eof += 1
                else:
                    n += 1
                    nbytes += len(m.value())
        c.close()
        s = time.perf_counter() - t
        print(f"plain consumer (1 process, 1 core): {n / s:,.0f} rows/s {nbytes / s / 1e6:.0f} MB/s")

        spark = (SparkSession.builder.master(master).config("spark.ui.enabled", "false")
                 .config("spark.sql.shuffle.partitions", "2").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        spark.dataSource.register(LogbrokerDataSource)
        df = (spark.read.format("logbroker").option("kafka.bootstrap.servers", b.bootstrap)
              .option("subscribe", "bench").load())
        df.selectExpr("sum(length(value))").collect()  # warm up workers
        for _ in range(2):
            t = time.perf_counter()
            total = df.selectExpr("count(*) c", "sum(length(value)) b").collect()[0]
            s = time.perf_counter() - t
            print(f"spark read {args.master}: {total.c / s:,.0f} rows/s, "
                  f"{total.c / s / CORES:,.0f} rows/s per core, {total.b / s / 1e6:.0f} MB/s "
                  f"({total.c} rows, {s:.1f} s)")
        t = time.perf_counter()
        (df.select("value").write.format("logbroker").option("kafka.bootstrap.servers", b.bootstrap)
         .option("topic", "bench-out").mode("append").save())
        s = time.perf_counter() - t
        print(f"spark batch write {args.master}: {N / s:,.0f} rows/s ({s:.1f} s)")

        def stream(topic: str, exactly_once: str) -> float:
            t = time.perf_counter()
            (spark.readStream.format("logbroker").option("kafka.bootstrap.servers", b.bootstrap)
             .option("subscribe", "bench").option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", str(args.per_trigger)).load()
             .select("value").writeStream.format("logbroker")
             .option("kafka.bootstrap.servers", b.bootstrap).option("topic", topic)
             .option("exactlyOnce", exactly_once)
             .option("checkpointLocation", str(work / f"checkpoint-{topic}"))
             .trigger(availableNow=True).start().awaitTermination())
            return N / (time.perf_counter() - t)

        # Alternate, twice each, so drift in the machine's load hits both alike.
        rates = {"true": [], "false": []}
        for round_ in range(2):
            for mode in ("false", "true"):
                rates[mode].append(stream(f"{'eos' if mode == 'true' else 'alo'}-out-{round_}"
                                          if round_ else f"{'eos' if mode == 'true' else 'alo'}-out",
                                          mode))
        for mode, label in (("false", "at-least-once"), ("true", "exactly-once")):
            print(f"spark stream sink {args.master} {label}: "
                  + " / ".join(f"{r:,.0f}" for r in rates[mode]) + " rows/s")
        print(f"exactly-once / at-least-once: {sum(rates['true']) / sum(rates['false']):.2f}")
        spark.stop()
finally:
    if cluster is not None:
        cluster.stop()
