"""Spark's decode rate of registry-framed Avro values, per core, against fastavro alone on the
same records in the same run.

    python bench/bench_schema_decode.py [N] [--master local[1]]

Starts a broker serving the schema registry, registers a 10-field Avro schema, produces N
records framed as confluent-kafka's AvroSerializer frames them, then measures:

- fastavro alone: `schemaless_reader` over the N bodies (consumed from the topic first), in
  this process: one core;
- Spark typed read (valueFormat=avro): rows/s of a query that touches every decoded field,
  divided by the Spark cores (local[1] by default: one task slot, one Python worker);
- Spark binary read (no valueFormat) of the same query shape, for what fetching alone costs;
- the read tasks' decoding step alone, in this process (one core): framed values in Arrow
  batches of 10,000 → typed Arrow struct columns, as a read task does it after fetching.

Each Spark query runs once to warm up (JVM, Python worker, caches) and is then timed best of 3;
fastavro alone is timed best of 3 both before and after the Spark queries (its best counts).
"""
import argparse
import gc
import io
import json
import os
import struct
import sys
import tempfile
import time
from pathlib import Path

os.environ["PYSPARK_PYTHON"] = sys.executable
import fastavro
import pyarrow as pa
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from pyspark.sql import SparkSession

from logbroker.spark import LogbrokerDataSource
from logbroker.testing import SCHEMA_REGISTRY_OVERRIDES, BrokerProcess

SCHEMA = {"type": "record", "name": "Event", "namespace": "bench", "fields": [
    {"name": "id", "type": "long"}, {"name": "user", "type": "string"},
    {"name": "email", "type": ["null", "string"], "default": None},
    {"name": "age", "type": "int"}, {"name": "score", "type": "double"},
    {"name": "active", "type": "boolean"},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "created", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "country", "type": "string"}, {"name": "city", "type": "string"}]}

parser = argparse.ArgumentParser()
parser.add_argument("n", type=int, nargs="?", default=200_000)
parser.add_argument("--master", default="local[1]")
args = parser.parse_args()
N = args.n
cores = int(args.master[len("local["):-1]) if args.master.startswith("local[") else 1
work = Path(tempfile.mkdtemp())


def best_of(runs: int, fn) -> float:
    fn()  # warm-up
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


with BrokerProcess(work / "broker", overrides=SCHEMA_REGISTRY_OVERRIDES) as broker:
    url = broker.schema_registry_url()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("events", 1, 1)])["events"].result()
    schema_id = SchemaRegistryClient({"url": url}).register_schema(
        "events-value", Schema(json.dumps(SCHEMA), "AVRO"))
    parsed = fastavro.parse_schema(SCHEMA)
    header = b"\x00" + struct.pack(">I", schema_id)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(N):
        out = io.BytesIO()
        fastavro.schemaless_writer(out, parsed, {
            "id": i, "user": f"user-{i}", "email": None if i % 4 == 0 else f"u{i}@example.com",
            "age": i % 90, "score": i / 7, "active": i % 2 == 0, "tags": ["a", "b"][: i % 3],
            "created": 1_700_000_000_000 + i, "country": "NZ", "city": "Wellington"})
        while True:
            try:
                producer.produce("events", header + out.getvalue())
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush()

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "bench",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition("events", 0, 0)])
    framed = []
    while len(framed) < N:
        framed.extend(m.value() for m in consumer.consume(10_000, 1.0) if m.error() is None)
    consumer.close()
    bodies = [value[5:] for value in framed]

    def fastavro_alone():
        reader = fastavro.schemaless_reader
        for body in bodies:
            reader(io.BytesIO(body), parsed, None)

    from logbroker.spark.arrow import arrow_schema, kafka_schema
    from logbroker.spark.options import parse_typed_source_options
    from logbroker.spark.typed.decoding import decoded, typed_schema

    typed_options = parse_typed_source_options({"subscribe": "events", "valueFormat": "avro",
                                                "schema.registry.url": url})
    raw_schema = arrow_schema(False)
    batches = []
    for at in range(0, N, 10_000):
        chunk = framed[at:at + 10_000]
        n = len(chunk)
        batches.append(pa.RecordBatch.from_arrays([
            pa.array([None] * n, pa.binary()), pa.array(chunk, pa.binary()),
            pa.array(["events"] * n), pa.array([0] * n, pa.int32()),
            pa.array(range(at, at + n), pa.int64()),
            pa.array([0] * n, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
            pa.array([0] * n, pa.int32())], schema=raw_schema))
    spark_schema = typed_schema(kafka_schema(include_headers=False), typed_options)

    def decode_step():
        for _ in decoded(typed_options, spark_schema, iter(batches)):
            pass

    # The records held for the in-process runs would otherwise make every cyclic GC pass walk
    # them, slowing those runs several-fold against a Spark worker that holds one batch.
    gc.freeze()
    fastavro_before_s = best_of(3, fastavro_alone)
    step_s = best_of(3, decode_step)

    spark = (SparkSession.builder.master(args.master).appName("bench-schema-decode")
             .config("spark.ui.enabled", "false").config("spark.sql.session.timeZone", "UTC")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(LogbrokerDataSource)

    def read(**options):
        reader = (spark.read.format("logbroker").option("kafka.bootstrap.servers", broker.bootstrap)
                  .option("subscribe", "events").option("minPartitions", str(cores)))
        for name, value in options.items():
            reader = reader.option(name, value)
        return reader.load()

    def typed_query():
        # A new DataFrame each run: collecting the same one twice reuses its shuffle output
        # (the scan stage would be skipped and nothing decoded).
        return read(valueFormat="avro", **{"schema.registry.url": url}).selectExpr(
            "sum(value.id)", "sum(length(value.user))", "count(value.email)", "sum(value.age)",
            "sum(value.score)", "count_if(value.active)", "sum(size(value.tags))",
            "max(value.created)", "count(value.country)", "count(value.city)").collect()

    typed_s = best_of(3, typed_query)
    binary_s = best_of(3, lambda: read().selectExpr("sum(length(value))").collect())
    assert typed_query()[0][0] == N * (N - 1) // 2
    spark.stop()
    # Timed again after Spark: the machine may be shared, so fastavro gets its best moment.
    fastavro_s = min(fastavro_before_s, best_of(3, fastavro_alone))

fastavro_rate = N / fastavro_s
typed_rate = N / typed_s / cores
print(f"records: {N:,} Avro values of {sum(map(len, bodies)) / N:.0f} bytes (+5 framing), "
      f"master {args.master}")
print(f"fastavro alone (1 core):       {fastavro_rate:>12,.0f} records/s")
print(f"decoding step alone (1 core): {N / step_s:>12,.0f} records/s "
      f"({N / step_s / fastavro_rate:.0%} of fastavro alone)")
print(f"Spark typed read, per core:    {typed_rate:>12,.0f} records/s "
      f"({typed_rate / fastavro_rate:.0%} of fastavro alone)")
print(f"Spark binary read, per core:   {N / binary_s / cores:>12,.0f} records/s (no decoding)")
print(f"load average at the end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
