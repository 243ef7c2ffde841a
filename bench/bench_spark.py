"""Spark read/write rows/s through the logbroker source vs plain confluent-kafka, 1 KiB records."""
import os, sys, time, tempfile
from pathlib import Path
os.environ["PYSPARK_PYTHON"] = sys.executable
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from logbroker.testing import BrokerProcess
from pyspark.sql import SparkSession
from logbroker.spark import LogbrokerDataSource

N = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
P = 2
payload = os.urandom(1024)
with BrokerProcess(Path(tempfile.mkdtemp())) as b:
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic("bench", P, 1)])["bench"].result()
    t = time.perf_counter()
    p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
    for i in range(N):
        while True:
            try: p.produce("bench", value=payload, partition=i % P); break
            except BufferError: p.poll(0.01)
    p.flush()
    prod_s = time.perf_counter() - t
    print(f"plain producer: {N/prod_s:,.0f} rows/s")
    t = time.perf_counter()
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "x", "enable.auto.commit": False, "enable.partition.eof": True})
    c.assign([TopicPartition("bench", i, 0) for i in range(P)])
    n = eof = 0; nbytes = 0
    while eof < P:
        for m in c.consume(10000, 0.5):
            if m.error(): eof += 1
            else: n += 1; nbytes += len(m.value())
    c.close()
    cons_s = time.perf_counter() - t
    print(f"plain consumer (1 process): {n/cons_s:,.0f} rows/s {nbytes/cons_s/1e6:.0f} MB/s")
    spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(LogbrokerDataSource)
    df = spark.read.format("logbroker").option("kafka.bootstrap.servers", b.bootstrap).option("subscribe", "bench").load()
    df.selectExpr("sum(length(value))").collect()  # warm up workers
    for _ in range(2):
        t = time.perf_counter()
        total = df.selectExpr("count(*) c", "sum(length(value)) b").collect()[0]
        s = time.perf_counter() - t
        print(f"spark read local[2]: {total.c/s:,.0f} rows/s {total.b/s/1e6:.0f} MB/s ({total.c} rows, {s:.1f} s)")
    admin.create_topics([NewTopic("bench-out", P, 1)])["bench-out"].result()
    t = time.perf_counter()
    df.select("value").write.format("logbroker").option("kafka.bootstrap.servers", b.bootstrap).option("topic", "bench-out").mode("append").save()
    s = time.perf_counter() - t
    print(f"spark write local[2]: {N/s:,.0f} rows/s ({s:.1f} s)")
    spark.stop()
