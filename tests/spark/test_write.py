"""Batch and streaming writes: every row produced once, with key, headers, topic and partition."""

from __future__ import annotations

import pytest
from pyspark.sql import Row
from pyspark.sql.types import ArrayType, BinaryType, StringType, StructField, StructType
from spark_kafka import consume_all, create_topic, new_topic_name, produce

HEADERS = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))


def test_batch_write_then_consumer_read_returns_every_row_once(spark, bootstrap):
    topic = new_topic_name()
    create_topic(bootstrap, topic, 3)
    schema = StructType([StructField("key", StringType()), StructField("value", StringType()),
                         StructField("headers", HEADERS)])
    rows = [(f"k{i % 7}" if i % 5 else None, f"value-{i}",
             [("i", str(i).encode())] if i % 3 == 0 else None) for i in range(500)]
    df = spark.createDataFrame(rows, schema).repartition(4)
    (df.write.format("logbroker").option("kafka.bootstrap.servers", bootstrap)
     .option("topic", topic).mode("append").save())

    got = consume_all(bootstrap, topic, 3)
    assert sorted(r["value"] for r in got) == sorted(f"value-{i}".encode() for i in range(500))
    by_value = {r["value"]: r for r in got}
    for key, value, headers in rows:
        record = by_value[value.encode()]
        assert record["key"] == (key.encode() if key is not None else None)
        assert record["headers"] == ([(h[0], h[1]) for h in headers] if headers else None)


def test_topic_and_partition_columns_route_rows(spark, bootstrap):
    first, second = new_topic_name(), new_topic_name()
    create_topic(bootstrap, first, 2)
    create_topic(bootstrap, second, 1)
    rows = [Row(topic=first if i % 2 else second, partition=(i % 4) // 2 if i % 2 else 0,
                value=bytes([i])) for i in range(40)]
    spark.createDataFrame(rows).selectExpr("topic", "CAST(partition AS INT) AS partition",
                                           "value").write.format("logbroker") \
        .option("kafka.bootstrap.servers", bootstrap).mode("append").save()
    got_first = consume_all(bootstrap, first, 2)
    got_second = consume_all(bootstrap, second, 1)
    assert sorted(r["value"][0] for r in got_first) == [i for i in range(40) if i % 2]
    assert all(r["partition"] == (r["value"][0] % 4) // 2 for r in got_first)
    assert sorted(r["value"][0] for r in got_second) == [i for i in range(40) if i % 2 == 0]


def test_write_without_topic_is_refused(spark, bootstrap):
    df = spark.createDataFrame([("x",)], "value string")
    with pytest.raises(Exception, match="'topic'"):
        df.write.format("logbroker").option("kafka.bootstrap.servers", bootstrap) \
            .mode("append").save()


def test_streaming_copy_between_topics_writes_every_record_once(spark, bootstrap, tmp_path):
    source, target = new_topic_name(), new_topic_name()
    create_topic(bootstrap, source, 2)
    create_topic(bootstrap, target, 2)
    produce(bootstrap, source, [{"key": str(i).encode(), "value": f"v{i}".encode(),
                                 "partition": i % 2} for i in range(200)])
    query = (spark.readStream.format("logbroker").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", source).option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", "80").load()
             .selectExpr("key", "upper(CAST(value AS STRING)) AS value")
             .writeStream.format("logbroker").option("kafka.bootstrap.servers", bootstrap)
             .option("topic", target).option("checkpointLocation", str(tmp_path / "cp"))
             .trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert query.exception() is None
    got = consume_all(bootstrap, target, 2)
    assert sorted(r["value"] for r in got) == sorted(f"V{i}".encode() for i in range(200))
