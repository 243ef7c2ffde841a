"""Typed writes in Protobuf and JSON Schema: struct columns encoded in Confluent's framing
against a real broker serving the schema registry, read back by confluent-kafka's
ProtobufDeserializer / JSONDeserializer and by Spark; rows that do not fit their schema fail
the write, for every format, naming the field."""

from __future__ import annotations

import datetime
import decimal
import json

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import message_factory
from spark_kafka import consume_all, create_topic, new_topic_name
from test_registry_messages import protobuf_user_class
from test_typed_columns import USER_V1, typed_read

from logbroker.schema_registry import wire

UTC = datetime.UTC
# Two messages: writing User (the second) frames its records with message indexes [1].
AUDIT_AND_USER = """syntax = "proto3";
package example;
import "google/protobuf/timestamp.proto";

message Audit { string who = 1; }

message User {
  string name = 1;
  int32 age = 2;
  google.protobuf.Timestamp seen = 3;
  repeated string tags = 4;
}
"""
# Rich rows: nulls, binary, timestamps, maps, nested structs and arrays of structs.
RICH = ("named_struct('id', id, 'score', IF(id % 7 = 0, NULL, id * 0.125D), "
        "'raw', IF(id % 5 = 0, NULL, CAST(concat('r', id) AS BINARY)), "
        "'seen', IF(id % 4 = 0, NULL, timestamp_micros(1767225600000000 + id * 1001)), "
        "'attrs', map('a', id, 'b', id * 2), "
        "'addr', IF(id % 3 = 0, NULL, named_struct('city', concat('c', id), 'zip', CAST(id AS INT))), "
        "'items', array(named_struct('sku', 's', 'qty', CAST(id AS INT))){extra}) AS value")


def write(df, broker, topic: str, **options) -> None:
    writer = (df.write.format("logbroker").option("kafka.bootstrap.servers", broker.bootstrap)
              .option("topic", topic).option("schema.registry.url", broker.registry_url))
    for name, value in options.items():
        writer = writer.option(name, value)
    writer.mode("append").save()


def by_key(broker, topic: str) -> dict[int, bytes]:
    return {int(r["key"]): r["value"] for r in consume_all(broker.bootstrap, topic, 1)}


def spark_values(df) -> list[dict]:
    return sorted((r.asDict(recursive=True) for r in df.select("value.*").collect()),
                  key=lambda v: v["id"])


def test_protobuf_write_with_the_subjects_latest_reads_with_confluents_deserializer(
        spark, registry_broker):
    topic = new_topic_name()
    create_topic(registry_broker.bootstrap, topic, 1)
    registry = SchemaRegistryClient({"url": registry_broker.registry_url})
    schema_id = registry.register_schema(f"{topic}-value", Schema(AUDIT_AND_USER, "PROTOBUF"))
    df = spark.range(200).selectExpr(
        "CAST(id AS STRING) AS key",
        "named_struct('name', concat('p', id), 'age', CAST(id AS INT), "
        "'seen', timestamp_micros(1767225600000000 + id), "
        "'tags', array_repeat('t', CAST(id % 3 AS INT))) AS value")
    write(df, registry_broker, topic, valueFormat="protobuf", valueMessageName="User")

    records = by_key(registry_broker, topic)
    assert len(records) == 200
    # Magic byte, schema id, message indexes [1] (zigzag count 1, index 1), then the message.
    assert {v[:7] for v in records.values()} == {b"\x00" + schema_id.to_bytes(4, "big") + b"\x02\x02"}
    # A client of its own, as a consumer has (the registering one caches the schema's text).
    deserializer = ProtobufDeserializer(protobuf_user_class(), {"use.deprecated.format": False},
                                        SchemaRegistryClient({"url": registry_broker.registry_url}))
    context = SerializationContext(topic, MessageField.VALUE)
    for i, value in records.items():
        message = deserializer(value, context)
        assert (message.name, message.age, list(message.tags)) == (f"p{i}", i, ["t"] * (i % 3))
        assert message.seen.ToDatetime(tzinfo=UTC) == datetime.datetime(2026, 1, 1, tzinfo=UTC) \
            + datetime.timedelta(microseconds=i)

    got = typed_read(spark, registry_broker, topic, valueFormat="protobuf", valueMessageName="User")
    assert got.select("value.*").exceptAll(df.select("value.*")).count() == 0
    assert df.select("value.*").exceptAll(got.select("value.*")).count() == 0


def test_protobuf_auto_registered_schema_round_trips_nulls_maps_and_nested(spark, registry_broker):
    topic = new_topic_name()
    create_topic(registry_broker.bootstrap, topic, 1)
    df = spark.range(300).selectExpr("CAST(id AS STRING) AS key", RICH.format(extra=""))
    write(df, registry_broker, topic, valueFormat="protobuf", valueSchemaAutoRegister="true")

    registry = SchemaRegistryClient({"url": registry_broker.registry_url})
    registered = registry.get_latest_version(f"{topic}-value")
    assert registered.schema.schema_type == "PROTOBUF"
    assert "message TopLevelRecord {" in registered.schema.schema_str
    got = typed_read(spark, registry_broker, topic, valueFormat="protobuf")
    assert got.schema["value"].dataType.simpleString() == (
        "struct<id:bigint,score:double,raw:binary,seen:timestamp,attrs:map<string,bigint>,"
        "addr:struct<city:string,zip:int>,items:array<struct<sku:string,qty:int>>>")
    assert spark_values(got) == spark_values(df)

    message = wire.message_by_name(wire.protobuf_file(registered.schema.schema_str, ()), None)
    deserializer = ProtobufDeserializer(message_factory.GetMessageClass(message),
                                        {"use.deprecated.format": False}, registry)
    context = SerializationContext(topic, MessageField.VALUE)
    records = by_key(registry_broker, topic)
    eleven = deserializer(records[11], context)
    assert (eleven.id, eleven.score, eleven.raw, dict(eleven.attrs)) == (
        11, 1.375, b"r11", {"a": 11, "b": 22})
    assert eleven.seen.ToDatetime(tzinfo=UTC) == datetime.datetime(2026, 1, 1, 0, 0, 0, 11011,
                                                                   tzinfo=UTC)
    assert (eleven.addr.city, eleven.addr.zip) == ("c11", 11)
    assert [(item.sku, item.qty) for item in eleven.items] == [("s", 11)]
    zero = deserializer(records[0], context)
    assert [f for f in ("score", "raw", "seen", "addr") if zero.HasField(f)] == []


def test_avro_auto_registered_schema_round_trips_maps_and_nested(spark, registry_broker):
    topic = new_topic_name()
    create_topic(registry_broker.bootstrap, topic, 1)
    df = spark.range(300).selectExpr("CAST(id AS STRING) AS key", RICH.format(extra=""))
    write(df, registry_broker, topic, valueFormat="avro", valueSchemaAutoRegister="true")

    assert spark_values(typed_read(spark, registry_broker, topic, valueFormat="avro")) == \
        spark_values(df)
    deserializer = AvroDeserializer(SchemaRegistryClient({"url": registry_broker.registry_url}))
    eleven = deserializer(by_key(registry_broker, topic)[11],
                          SerializationContext(topic, MessageField.VALUE))
    assert (eleven["attrs"], eleven["addr"], eleven["raw"]) == (
        {"a": 11, "b": 22}, {"city": "c11", "zip": 11}, b"r11")


def test_json_write_with_the_subjects_latest_reads_with_confluents_deserializer(
        spark, registry_broker):
    topic = new_topic_name()
    create_topic(registry_broker.bootstrap, topic, 1)
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Order",
              "type": "object", "required": ["id", "item"],
              "properties": {"id": {"type": "integer"}, "item": {"type": "string"},
                             "price": {"type": "number"},
                             "lines": {"type": "array", "items": {"type": "integer"}}}}
    registry = SchemaRegistryClient({"url": registry_broker.registry_url})
    schema_id = registry.register_schema(f"{topic}-value", Schema(json.dumps(schema), "JSON"))
    df = spark.range(100).selectExpr(
        "CAST(id AS STRING) AS key",
        "named_struct('id', id, 'item', concat('i', id), 'price', IF(id % 2 = 0, NULL, id * 1.5D), "
        "'lines', sequence(0, id % 3)) AS value")
    write(df, registry_broker, topic, valueFormat="json")

    records = by_key(registry_broker, topic)
    assert {v[:5] for v in records.values()} == {b"\x00" + schema_id.to_bytes(4, "big")}
    deserializer = JSONDeserializer(None, schema_registry_client=registry)
    context = SerializationContext(topic, MessageField.VALUE)
    for i, value in records.items():
        expected = {"id": i, "item": f"i{i}", "lines": list(range(i % 3 + 1))}
        assert deserializer(value, context) == (expected if i % 2 == 0 else {**expected, "price": i * 1.5})
    got = typed_read(spark, registry_broker, topic, valueFormat="json")
    assert got.select("value.*").exceptAll(df.select("value.*")).count() == 0
    assert df.select("value.*").exceptAll(got.select("value.*")).count() == 0


def test_json_auto_registered_schema_round_trips_decimals_dates_and_maps(spark, registry_broker):
    topic = new_topic_name()
    create_topic(registry_broker.bootstrap, topic, 1)
    extra = (", 'price', CAST(id * 100 + 0.01 AS DECIMAL(12, 2)), 'day', date_add('2024-02-28', "
             "CAST(id AS INT)), 'small', CAST(id AS INT), 'ratio', CAST(id / 4 AS FLOAT)")
    df = spark.range(300).selectExpr("CAST(id AS STRING) AS key", RICH.format(extra=extra))
    write(df, registry_broker, topic, valueFormat="json", valueSchemaAutoRegister="true")

    got = typed_read(spark, registry_broker, topic, valueFormat="json")
    assert got.schema["value"].dataType.simpleString() == (
        "struct<id:bigint,score:double,raw:binary,seen:timestamp,attrs:map<string,bigint>,"
        "addr:struct<city:string,zip:int>,items:array<struct<sku:string,qty:int>>,"
        "price:decimal(12,2),day:date,small:int,ratio:float>")
    assert spark_values(got) == spark_values(df)

    registry = SchemaRegistryClient({"url": registry_broker.registry_url})
    assert registry.get_latest_version(f"{topic}-value").schema.schema_type == "JSON"
    deserializer = JSONDeserializer(None, schema_registry_client=registry)
    records = by_key(registry_broker, topic)
    context = SerializationContext(topic, MessageField.VALUE)
    assert deserializer(records[11], context) == {
        "id": 11, "score": 1.375, "raw": "cjEx", "seen": "2026-01-01T00:00:00.011011Z",
        "attrs": {"a": 11, "b": 22}, "addr": {"city": "c11", "zip": 11},
        "items": [{"sku": "s", "qty": 11}], "price": 1100.01, "day": "2024-03-10", "small": 11,
        "ratio": 2.75}
    # Nulls are left out, as Spark's to_json leaves them; decimals are exact JSON numbers.
    assert deserializer(records[0], context) == {
        "id": 0, "attrs": {"a": 0, "b": 0}, "items": [{"sku": "s", "qty": 0}], "price": 0.01,
        "day": "2024-02-28", "small": 0, "ratio": 0.0}
    assert b'"price":1100.01,' in records[11]
    assert spark_values(got)[11]["price"] == decimal.Decimal("1100.01")


@pytest.mark.parametrize("fmt, schema, bad_value, why", [
    ("avro", Schema(json.dumps(USER_V1), "AVRO"),
     "named_struct('name', IF(id = 3, NULL, 'x'), 'age', CAST(id AS INT))",
     r"value\.name does not fit avro schema id \d+ .*None is not a valid \"string\""),
    ("protobuf", Schema(AUDIT_AND_USER, "PROTOBUF"),
     "named_struct('name', IF(id = 3, NULL, 'x'), 'age', CAST(id AS INT))",
     r"value\.name does not fit protobuf schema id \d+ .*null, but the Protobuf field has no presence"),
    ("json", Schema(json.dumps({"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 3}, "age": {"type": "integer"}}}), "JSON"),
     "named_struct('name', IF(id = 3, 'toolong', 'x'), 'age', CAST(id AS INT))",
     r"value\.name does not fit json schema id \d+ .*'toolong' is too long"),
])
def test_a_row_that_does_not_fit_its_schema_fails_the_write_naming_the_field(
        spark, registry_broker, fmt, schema, bad_value, why):
    topic = new_topic_name()
    create_topic(registry_broker.bootstrap, topic, 1)
    registry = SchemaRegistryClient({"url": registry_broker.registry_url})
    registry.register_schema(f"{topic}-value", schema)
    df = spark.range(5).coalesce(1).selectExpr(f"{bad_value} AS value")
    with pytest.raises(Exception, match=why):
        write(df, registry_broker, topic, valueFormat=fmt, valueMessageName="User")
    assert consume_all(registry_broker.bootstrap, topic, 1) == []


@pytest.mark.parametrize("fmt, schema", [("avro", Schema(json.dumps(USER_V1), "AVRO")),
                                         ("protobuf", Schema(AUDIT_AND_USER, "PROTOBUF"))])
def test_a_column_field_the_schema_lacks_is_refused_before_any_row_is_written(
        spark, registry_broker, fmt, schema):
    topic = new_topic_name()
    create_topic(registry_broker.bootstrap, topic, 1)
    schema_id = SchemaRegistryClient({"url": registry_broker.registry_url}).register_schema(
        f"{topic}-value", schema)
    df = spark.range(5).selectExpr("named_struct('name', 'x', 'age', CAST(id AS INT), "
                                   "'email', 'x@y') AS value")
    with pytest.raises(Exception, match=f"value: {fmt} schema id {schema_id} .* has no field for "
                                        r"value\.email; its values would not be written"):
        write(df, registry_broker, topic, valueFormat=fmt, valueMessageName="User")
    assert consume_all(registry_broker.bootstrap, topic, 1) == []


@pytest.mark.parametrize("fmt", ["protobuf", "json"])
def test_a_given_schema_version_frames_the_records_with_that_versions_id(
        spark, registry_broker, fmt):
    topic = new_topic_name()
    create_topic(registry_broker.bootstrap, topic, 1)
    registry = SchemaRegistryClient({"url": registry_broker.registry_url})
    if fmt == "protobuf":
        v1 = Schema('syntax = "proto3";\nmessage Item { string name = 1; }\n', "PROTOBUF")
        v2 = Schema('syntax = "proto3";\nmessage Item { string name = 1; int64 n = 2; }\n',
                    "PROTOBUF")
    else:
        v1 = Schema(json.dumps({"type": "object", "properties": {"name": {"type": "string"}}}),
                    "JSON")
        v2 = Schema(json.dumps({"title": "Item", "type": "object",
                                "properties": {"name": {"type": "string"}}}), "JSON")
    first = registry.register_schema(f"{topic}-value", v1)
    second = registry.register_schema(f"{topic}-value", v2)
    df = spark.range(3).selectExpr("CAST(id AS STRING) AS key",
                                   "named_struct('name', concat('n', id)) AS value")
    write(df, registry_broker, topic, valueFormat=fmt, valueSchemaVersion="1")
    write(df, registry_broker, topic, valueFormat=fmt)
    ids = [int.from_bytes(r["value"][1:5], "big")
           for r in consume_all(registry_broker.bootstrap, topic, 1)]
    assert ids == [first] * 3 + [second] * 3
