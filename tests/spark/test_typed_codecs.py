"""The typed codecs on their own (no Spark session, no broker): a struct value encoded with the
schema derived from its Spark type decodes to the same value and type, in Protobuf and JSON;
values and types that do not fit are refused naming the field."""

from __future__ import annotations

import datetime
import decimal
import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql.types import (ArrayType, BinaryType, BooleanType, DateType, DecimalType,
                               DoubleType, FloatType, IntegerType, LongType, MapType, ShortType,
                               StringType, StructField, StructType, TimestampType)

from logbroker.schema_registry import wire
from logbroker.schema_registry.formats.json_schema import JsonSchema
from logbroker.spark.errors import FieldMismatch, OptionError
from logbroker.spark.typed import avro_codec, json_codec, protobuf_codec

ADDRESS = StructType([StructField("city", StringType()), StructField("zip", IntegerType())])
COMMON = [StructField("id", LongType(), False), StructField("n", IntegerType()),
          StructField("name", StringType()), StructField("ratio", FloatType()),
          StructField("score", DoubleType()), StructField("ok", BooleanType()),
          StructField("raw", BinaryType()), StructField("seen", TimestampType()),
          StructField("tags", ArrayType(StringType())),
          StructField("attrs", MapType(StringType(), LongType())),
          StructField("addr", ADDRESS), StructField("lines", ArrayType(ADDRESS))]
PROTOBUF_TYPE = StructType(COMMON)
JSON_TYPE = StructType([*COMMON, StructField("day", DateType()),
                        StructField("price", DecimalType(12, 3))])
VALUE = {"id": 7, "n": -3, "name": "ü", "ratio": 0.5, "score": 1e-9, "ok": False, "raw": b"\x00\xff",
         "seen": datetime.datetime(2026, 3, 4, 5, 6, 7, 890123, tzinfo=datetime.UTC),
         "tags": ["a", "b"], "attrs": {"k": 2**40}, "addr": {"city": "Oslo", "zip": None},
         "lines": [{"city": "x", "zip": 1}]}
NULLS = {**{f.name: None for f in COMMON}, "id": 1}


def protobuf_codecs(data_type: StructType):
    message = wire.message_by_name(wire.protobuf_file(
        protobuf_codec.proto_schema(data_type, "TopLevelRecord"), ()), None)
    return message, protobuf_codec.encoder(message), protobuf_codec.decoder(message)


def json_codecs(data_type: StructType, schema: dict | None = None):
    schema = schema or json_codec.json_schema(data_type)
    validator = JsonSchema(json.dumps(schema)).validator()
    return (json_codec.spark_type(schema), json_codec.encoder(data_type, validator),
            json_codec.decoder(json_codec.spark_type(schema)))


@pytest.mark.parametrize("value", [VALUE, NULLS], ids=["values", "nulls"])
def test_protobuf_round_trips_the_value_and_the_type(value):
    message, encode, decode = protobuf_codecs(PROTOBUF_TYPE)
    # simpleString leaves nullability out: a reader's fields are all nullable.
    assert protobuf_codec.spark_type(message).simpleString() == PROTOBUF_TYPE.simpleString()
    expected = {**value, "tags": value["tags"] or [], "attrs": value["attrs"] or {},
                "lines": value["lines"] or []}  # Protobuf has no null list or map
    assert decode(encode(value)) == expected


@pytest.mark.parametrize("value", [
    {**VALUE, "day": datetime.date(2024, 2, 29), "price": decimal.Decimal("123456789.012")},
    {**NULLS, "day": None, "price": None}], ids=["values", "nulls"])
def test_json_round_trips_the_value_and_the_type(value):
    reader_type, encode, decode = json_codecs(JSON_TYPE)
    assert reader_type.simpleString() == JSON_TYPE.simpleString()
    assert decode(encode(value)) == value


@given(st.decimals(min_value=-10**8, max_value=10**8, places=3, allow_nan=False),
       st.text(), st.integers(min_value=-2**63, max_value=2**63 - 1))
def test_json_keeps_decimals_text_and_longs_exact(price, name, big):
    data_type = StructType([StructField("price", DecimalType(12, 3)),
                            StructField("name", StringType()), StructField("big", LongType())])
    _, encode, decode = json_codecs(data_type)
    value = {"price": price, "name": name, "big": big}
    assert decode(encode(value)) == value


def test_protobuf_refuses_what_it_cannot_hold_naming_the_field():
    _, encode, _ = protobuf_codecs(PROTOBUF_TYPE)
    cases = [({**VALUE, "tags": ["a", None]}, "tags[1]", "list element"),
             ({**VALUE, "attrs": {"k": None}}, "attrs['k']", "map value"),
             ({**VALUE, "extra": 1}, "extra", "has no such field"),
             ({**VALUE, "addr": {"city": 5}}, "addr.city", "5 does not fit the Protobuf string field"),
             ({**VALUE, "n": 2**40}, "n", "out of range")]
    for value, path, why in cases:
        with pytest.raises(FieldMismatch) as found:
            encode(value)
        assert (found.value.path, why in found.value.why) == (path, True), found.value


def test_protobuf_without_presence_refuses_a_null():
    user = 'syntax = "proto3";\nmessage User { string name = 1; }\n'
    encode = protobuf_codec.encoder(wire.message_by_name(wire.protobuf_file(user, ()), None))
    with pytest.raises(FieldMismatch, match="name: null, but the Protobuf field has no presence"):
        encode({"name": None})


def test_json_validation_names_the_field_that_breaks_the_schema():
    schema = {"type": "object", "properties": {
        "lines": {"type": "array", "items": {"type": "object", "properties": {
            "qty": {"type": "integer", "minimum": 1}}}}}}
    data_type = StructType([StructField("lines", ArrayType(StructType([
        StructField("qty", LongType())])))])
    _, encode, _ = json_codecs(data_type, schema)
    assert encode({"lines": [{"qty": 1}]}) == b'{"lines":[{"qty":1}]}'
    with pytest.raises(FieldMismatch) as found:
        encode({"lines": [{"qty": 1}, {"qty": 0}]})
    assert found.value.path == "lines[1].qty"
    assert "0 is less than the minimum of 1" in found.value.why


@pytest.mark.parametrize("derive, data_type, message", [
    (protobuf_codec.proto_schema, DecimalType(5, 2), "decimal(5,2) has no Protobuf type"),
    (protobuf_codec.proto_schema, ArrayType(ArrayType(LongType())), "array<bigint> cannot be a list element"),
    (protobuf_codec.proto_schema, MapType(DoubleType(), LongType()), "a Protobuf map key cannot be double"),
    (json_codec.json_schema, MapType(LongType(), LongType()), "a JSON object's keys are strings, not bigint"),
    (json_codec.json_schema, ShortType(), "smallint has no JSON Schema type"),
])
def test_types_without_a_mapping_are_refused_when_the_schema_is_derived(derive, data_type, message):
    struct = StructType([StructField("f", data_type)])
    with pytest.raises(OptionError, match=re.escape(f"field f: {message}")):
        derive(struct, "M") if derive is protobuf_codec.proto_schema else derive(struct)


ADDR_AVRO = {"type": "record", "name": "Addr", "fields": [{"name": "city", "type": "string"}]}
USER_AVRO = {"type": "record", "name": "User", "namespace": "example", "fields": [
    {"name": "name", "type": "string"}, {"name": "addr", "type": ["null", ADDR_AVRO]},
    {"name": "prev", "type": {"type": "array", "items": "example.Addr"}},
    {"name": "byCity", "type": {"type": "map", "values": "example.Addr"}}]}
WITH_ZIP = StructType([StructField("city", StringType()), StructField("zip", IntegerType())])
WIDER = StructType([StructField("name", StringType()), StructField("extra", LongType()),
                    StructField("addr", WITH_ZIP), StructField("prev", ArrayType(WITH_ZIP)),
                    StructField("byCity", MapType(StringType(), WITH_ZIP))])
UNKNOWN = ["extra", "addr.zip", "prev[].zip", "byCity[].zip"]


def test_column_fields_the_writer_schema_lacks_are_found_in_avro():
    parsed, named = wire.avro_schema(json.dumps(USER_AVRO))
    assert avro_codec.unknown_fields(WIDER, parsed, named) == UNKNOWN
    narrower = StructType([f for f in WIDER.fields if f.name != "extra"])
    assert avro_codec.unknown_fields(StructType([StructField("name", StringType())]), parsed,
                                     named) == []
    assert avro_codec.unknown_fields(narrower, parsed, named) == UNKNOWN[1:]


def test_column_fields_the_writer_message_lacks_are_found_in_protobuf():
    city = StructType([StructField("city", StringType())])
    user = StructType([StructField("name", StringType()), StructField("addr", city),
                       StructField("prev", ArrayType(city)),
                       StructField("byCity", MapType(StringType(), city))])
    message = wire.message_by_name(wire.protobuf_file(
        protobuf_codec.proto_schema(user, "User"), ()), None)
    assert protobuf_codec.unknown_fields(WIDER, message) == UNKNOWN
    assert protobuf_codec.unknown_fields(user, message) == []
