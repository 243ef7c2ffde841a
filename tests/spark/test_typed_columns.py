"""Typed columns: registry-framed Avro, Protobuf and JSON values decoded into struct columns, and
struct columns written framed (more Protobuf and JSON writes: test_typed_writes.py), against a
real broker serving the schema registry (over its REST API) and confluent-kafka's serializers
and deserializers as the other side."""

from __future__ import annotations

import datetime
import json

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from pyspark.sql.types import (ArrayType, DoubleType, LongType, StringType, StructField,
                               StructType, TimestampType)
from spark_kafka import consume_all, create_topic, new_topic_name, produce

ROWS = 100_000
USER_V1 = {"type": "record", "name": "User", "namespace": "example",
           "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"}]}
USER_V2 = {**USER_V1, "fields": USER_V1["fields"] + [
    {"name": "email", "type": "string", "default": "unknown"}]}


def typed_read(spark, broker, topic: str, **options):
    reader = (spark.read.format("logbroker").option("kafka.bootstrap.servers", broker.bootstrap)
              .option("subscribe", topic).option("schema.registry.url", broker.registry_url))
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def produce_serialized(broker, topic: str, serializer, values: list) -> None:
    context = SerializationContext(topic, MessageField.VALUE)
    produce(broker.bootstrap, topic, [{"value": serializer(v, context)} for v in values])


def test_avro_write_then_read_round_trips_every_row(spark, registry_broker):
    topic = new_topic_name()
    create_topic(registry_broker.bootstrap, topic, 2)
    schema = StructType([
        StructField("id", LongType(), False), StructField("name", StringType()),
        StructField("score", DoubleType()), StructField("tags", ArrayType(StringType())),
        StructField("seen", TimestampType())])
    df = spark.range(ROWS).selectExpr(
        "id", "IF(id % 10 = 0, NULL, concat('user-', id)) AS name", "id / 4.0 AS score",
        "array(CAST(id % 3 AS STRING), 'x') AS tags",
        "timestamp_millis(1700000000000 + id) AS seen").selectExpr(
        "CAST(id AS STRING) AS key", f"CAST(struct(*) AS {schema.simpleString()}) AS value")
    (df.write.format("logbroker").option("kafka.bootstrap.servers", registry_broker.bootstrap)
     .option("topic", topic).option("schema.registry.url", registry_broker.registry_url)
     .option("valueFormat", "avro").option("valueSchemaAutoRegister", "true")
     .mode("append").save())

    got = typed_read(spark, registry_broker, topic, valueFormat="avro")
    assert got.schema["value"].dataType.fieldNames() == ["id", "name", "score", "tags", "seen"]
    assert got.count() == ROWS
    assert got.select("value.*").exceptAll(df.select("value.*")).count() == 0
    assert df.select("value.*").exceptAll(got.select("value.*")).count() == 0
    # The bytes are what confluent-kafka's AvroDeserializer reads.
    registry = SchemaRegistryClient({"url": registry_broker.registry_url})
    deserializer = AvroDeserializer(registry)
    [record] = [r for r in consume_all(registry_broker.bootstrap, topic, 2) if r["key"] == b"7"]
    decoded = deserializer(record["value"], SerializationContext(topic, MessageField.VALUE))
    assert decoded == {"id": 7, "name": "user-7", "score": 1.75, "tags": ["1", "x"],
                       "seen": datetime.datetime(2023, 11, 14, 22, 13, 20, 7000,
                                                 tzinfo=datetime.UTC)}
    assert registry.get_latest_version(f"{topic}-value").schema.schema_type == "AVRO"


def test_records_of_an_older_schema_read_with_the_readers_defaults(spark, registry_broker):
    topic = new_topic_name()
    create_topic(registry_broker.bootstrap, topic, 1)
    registry = SchemaRegistryClient({"url": registry_broker.registry_url})
    v1 = AvroSerializer(registry, json.dumps(USER_V1))
    produce_serialized(registry_broker, topic, v1, [{"name": f"old-{i}", "age": i} for i in range(5)])
    v2 = AvroSerializer(registry, json.dumps(USER_V2))
    produce_serialized(registry_broker, topic, v2,
                       [{"name": f"new-{i}", "age": i, "email": f"n{i}@x"} for i in range(5)])
    assert len(registry.get_versions(f"{topic}-value")) == 2

    rows = typed_read(spark, registry_broker, topic, valueFormat="avro") \
        .orderBy("offset").select("value.*").collect()
    assert [r.asDict() for r in rows] == (
        [{"name": f"old-{i}", "age": i, "email": "unknown"} for i in range(5)]
        + [{"name": f"new-{i}", "age": i, "email": f"n{i}@x"} for i in range(5)])
    # Pinned to version 1, the v2 records lose the field v1 does not have.
    old = typed_read(spark, registry_broker, topic, valueFormat="avro", valueSchemaVersion="1")
    assert old.schema["value"].dataType.fieldNames() == ["name", "age"]
    assert [r.asDict() for r in old.orderBy("offset").select("value.*").collect()][5:] == [
        {"name": f"new-{i}", "age": i} for i in range(5)]


def test_corrupt_and_unknown_id_records_are_null_in_permissive_and_fail_failfast(
        spark, registry_broker):
    topic = new_topic_name()
    create_topic(registry_broker.bootstrap, topic, 1)
    registry = SchemaRegistryClient({"url": registry_broker.registry_url})
    serializer = AvroSerializer(registry, json.dumps(USER_V1))
    produce_serialized(registry_broker, topic, serializer, [{"name": "a", "age": 1}])
    produce(registry_broker.bootstrap, topic, [
        {"value": b"not framed"},                              # offset 1: no magic byte
        {"value": b"\x00\x00\x0f\x42\x3f" + b"\x02a\x02"},     # offset 2: id 999999 unknown
        {"value": b"\x00" + serializer({"name": "b", "age": 2},
                                       SerializationContext(topic, MessageField.VALUE))[1:5]
         + b"\xff\xff"},                                       # offset 3: truncated body
        {"value": None},                                       # offset 4: a tombstone
    ])
    produce_serialized(registry_broker, topic, serializer, [{"name": "c", "age": 3}])

    rows = typed_read(spark, registry_broker, topic, valueFormat="avro", mode="PERMISSIVE") \
        .orderBy("offset").collect()
    assert [(r.offset, r.value.asDict() if r.value else None) for r in rows] == [
        (0, {"name": "a", "age": 1}), (1, None), (2, None), (3, None), (4, None),
        (5, {"name": "c", "age": 3})]
    with pytest.raises(Exception, match=f"{topic}-0 at offset 1 not framed"):
        typed_read(spark, registry_broker, topic, valueFormat="avro", mode="FAILFAST").collect()
    with pytest.raises(Exception, match="at offset 2 schema id 999999 is not in the registry"):
        typed_read(spark, registry_broker, topic, valueFormat="avro", mode="FAILFAST",
                   startingOffsets=json.dumps({topic: {"0": 2}})).collect()


def test_protobuf_values_read_as_structs(spark, registry_broker):
    from test_registry_messages import protobuf_user_class

    topic = new_topic_name()
    create_topic(registry_broker.bootstrap, topic, 1)
    registry = SchemaRegistryClient({"url": registry_broker.registry_url})
    user = protobuf_user_class()
    serializer = ProtobufSerializer(user, registry, {"use.deprecated.format": False})
    seen = datetime.datetime(2026, 1, 2, 3, 4, 5, 600000, tzinfo=datetime.UTC)
    messages = []
    for i in range(3):
        message = user(name=f"p{i}", age=i, tags=["a", "b"][:i])
        message.seen.FromDatetime(seen)
        messages.append(message)
    produce_serialized(registry_broker, topic, serializer, messages)

    df = typed_read(spark, registry_broker, topic, valueFormat="protobuf")
    assert df.schema["value"].dataType.simpleString() == \
        "struct<name:string,age:int,seen:timestamp,tags:array<string>>"
    assert [r.asDict() for r in df.orderBy("offset").select("value.*").collect()] == [
        {"name": f"p{i}", "age": i, "seen": seen.replace(tzinfo=None), "tags": ["a", "b"][:i]}
        for i in range(3)]


def test_json_values_read_as_structs(spark, registry_broker):
    topic = new_topic_name()
    create_topic(registry_broker.bootstrap, topic, 1)
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Order",
              "type": "object",
              "properties": {"id": {"type": "integer"}, "item": {"type": "string"},
                             "price": {"type": "number"},
                             "extra": {"type": "object"}}}
    registry = SchemaRegistryClient({"url": registry_broker.registry_url})
    serializer = JSONSerializer(json.dumps(schema), registry)
    produce_serialized(registry_broker, topic, serializer, [
        {"id": 1, "item": "pen", "price": 1.5, "extra": {"gift": True}}, {"id": 2, "item": "ink"}])

    df = typed_read(spark, registry_broker, topic, valueFormat="json")
    assert df.schema["value"].dataType.simpleString() == \
        "struct<id:bigint,item:string,price:double,extra:string>"
    assert [r.asDict() for r in df.orderBy("offset").select("value.*").collect()] == [
        {"id": 1, "item": "pen", "price": 1.5, "extra": '{"gift": true}'},
        {"id": 2, "item": "ink", "price": None, "extra": None}]


def test_typed_options_without_a_registry_url_are_refused(spark, registry_broker):
    with pytest.raises(Exception, match="schema.registry.url"):
        (spark.read.format("logbroker").option("kafka.bootstrap.servers", registry_broker.bootstrap)
         .option("subscribe", "t").option("valueFormat", "avro").load())


@pytest.mark.parametrize("sink_format", ["avro", "protobuf"])
def test_streaming_typed_copy_is_exactly_once_and_decodes(spark, registry_broker, tmp_path,
                                                          sink_format):
    """A typed stream → a typed exactly-once sink: the transactional path writes the framed
    bytes; a read_committed reader sees each record once, decoded."""
    source, target = new_topic_name(), new_topic_name()
    create_topic(registry_broker.bootstrap, source, 2)
    create_topic(registry_broker.bootstrap, target, 2)
    registry = SchemaRegistryClient({"url": registry_broker.registry_url})
    produce_serialized(registry_broker, source, AvroSerializer(registry, json.dumps(USER_V1)),
                       [{"name": f"u{i}", "age": i} for i in range(300)])
    query = (spark.readStream.format("logbroker")
             .option("kafka.bootstrap.servers", registry_broker.bootstrap)
             .option("subscribe", source).option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", "120")
             .option("schema.registry.url", registry_broker.registry_url)
             .option("valueFormat", "avro").load()
             .selectExpr("named_struct('name', upper(value.name), 'doubled', value.age * 2) AS value")
             .writeStream.format("logbroker")
             .option("kafka.bootstrap.servers", registry_broker.bootstrap)
             .option("topic", target).option("exactlyOnce", "true")
             .option("schema.registry.url", registry_broker.registry_url)
             .option("valueFormat", sink_format).option("valueSchemaAutoRegister", "true")
             .option("checkpointLocation", str(tmp_path / "cp"))
             .trigger(availableNow=True).start())
    query.awaitTermination(180)
    assert query.exception() is None
    committed = consume_all(registry_broker.bootstrap, target, 2)
    assert len(committed) == 300
    rows = typed_read(spark, registry_broker, target, valueFormat=sink_format,
                      **{"kafka.isolation.level": "read_committed"}).select("value.*").collect()
    assert sorted((r.name, r.doubled) for r in rows) == sorted((f"U{i}", 2 * i) for i in range(300))


@pytest.mark.parametrize("fmt", ["avro", "protobuf", "json"])
def test_typed_keys_and_values_together(spark, registry_broker, fmt):
    topic = new_topic_name()
    create_topic(registry_broker.bootstrap, topic, 1)
    df = spark.range(50).selectExpr("named_struct('id', id) AS key",
                                    "named_struct('square', id * id, 'even', id % 2 = 0) AS value")
    (df.write.format("logbroker").option("kafka.bootstrap.servers", registry_broker.bootstrap)
     .option("topic", topic).option("schema.registry.url", registry_broker.registry_url)
     .option("keyFormat", fmt).option("keySchemaAutoRegister", "true")
     .option("valueFormat", fmt).option("valueSchemaAutoRegister", "true")
     .mode("append").save())
    got = typed_read(spark, registry_broker, topic, keyFormat=fmt, valueFormat=fmt)
    assert got.schema["key"].dataType.simpleString() == "struct<id:bigint>"
    assert sorted((r.key.id, r.value.square, r.value.even) for r in got.collect()) == [
        (i, i * i, i % 2 == 0) for i in range(50)]
    registry = SchemaRegistryClient({"url": registry_broker.registry_url})
    assert set(registry.get_subjects()) >= {f"{topic}-key", f"{topic}-value"}
