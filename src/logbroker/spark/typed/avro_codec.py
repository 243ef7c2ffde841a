"""Avro columns: Spark types from Avro schemas (as Spark's `from_avro` maps them), Avro schemas
from Spark types (as `to_avro` derives them), and record decoding with schema resolution.

Type mapping, Avro → Spark: record → struct, int → int, long → long, float, double, boolean,
string and enum → string, bytes and fixed → binary, array → array, map → map<string, _>,
["null", T] → T (nullable); logical types date → date, timestamp-millis/-micros → timestamp,
decimal → decimal(p, s). A union of several non-null types is refused (no Spark type holds it
without losing which branch a value took).
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from typing import Any

import fastavro
import fastavro.validation
from pyspark.sql.types import (ArrayType, BinaryType, BooleanType, DataType, DateType,
                               DecimalType, DoubleType, FloatType, IntegerType, LongType, MapType,
                               StringType, StructField, StructType, TimestampNTZType,
                               TimestampType)

from logbroker.spark.errors import FieldMismatch, OptionError

_PRIMITIVES: dict[str, DataType] = {
    "int": IntegerType(), "long": LongType(), "float": FloatType(), "double": DoubleType(),
    "boolean": BooleanType(), "string": StringType(), "bytes": BinaryType(),
}
_LOGICAL: dict[str, DataType] = {
    "date": DateType(), "timestamp-millis": TimestampType(), "timestamp-micros": TimestampType(),
    "local-timestamp-millis": TimestampNTZType(), "local-timestamp-micros": TimestampNTZType(),
}


def spark_type(schema: Any, named: dict) -> DataType:
    """The Spark type of a parsed Avro schema; records must be the top level of a column."""
    return _spark_type(schema, named, ())


def _spark_type(schema: Any, named: dict, seen: tuple[str, ...]) -> DataType:
    if isinstance(schema, str):
        if schema in _PRIMITIVES:
            return _PRIMITIVES[schema]
        if schema in seen:
            raise OptionError(f"Avro type {schema!r} is recursive: Spark has no type for it")
        if schema in named:
            return _spark_type(named[schema], named, seen)
        raise OptionError(f"Avro type {schema!r} has no Spark type")
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        if len(branches) != 1:
            raise OptionError(f"an Avro union of {len(branches)} non-null types has no Spark type")
        return _spark_type(branches[0], named, seen)
    kind = schema["type"]
    logical = schema.get("logicalType")
    if logical in _LOGICAL:
        return _LOGICAL[logical]
    if logical == "decimal":
        return DecimalType(schema["precision"], schema.get("scale", 0))
    if kind == "record":
        inner = (*seen, schema["name"])
        return StructType([StructField(f["name"], _spark_type(f["type"], named, inner),
                                       nullable=_nullable(f["type"]))
                           for f in schema["fields"]])
    if kind == "array":
        items = schema["items"]
        return ArrayType(_spark_type(items, named, seen), containsNull=_nullable(items))
    if kind == "map":
        values = schema["values"]
        return MapType(StringType(), _spark_type(values, named, seen),
                       valueContainsNull=_nullable(values))
    if kind == "enum":
        return StringType()
    if kind == "fixed":
        return BinaryType()
    return _spark_type(kind, named, seen)


def _nullable(schema: Any) -> bool:
    return schema == "null" or (isinstance(schema, list) and "null" in schema)


def avro_schema(data_type: StructType, name: str = "topLevelRecord") -> dict:
    """The Avro record schema a Spark struct is written with; nullable fields are
    ["null", T] with default null, so a reader schema can add them later."""
    return _record(data_type, name)


def _record(data_type: StructType, name: str) -> dict:
    fields = []
    for f in data_type.fields:
        field: dict[str, Any] = {"name": f.name, "type": _avro_type(f.dataType, f.name)}
        if f.nullable:
            field["type"] = ["null", field["type"]]
            field["default"] = None
        fields.append(field)
    return {"type": "record", "name": name, "fields": fields}


def _avro_type(data_type: DataType, name: str) -> Any:
    simple = {IntegerType: "int", LongType: "long", FloatType: "float", DoubleType: "double",
              BooleanType: "boolean", StringType: "string", BinaryType: "bytes"}
    for spark_class, avro in simple.items():
        if isinstance(data_type, spark_class):
            return avro
    if isinstance(data_type, TimestampType):
        return {"type": "long", "logicalType": "timestamp-micros"}
    if isinstance(data_type, TimestampNTZType):
        return {"type": "long", "logicalType": "local-timestamp-micros"}
    if isinstance(data_type, DateType):
        return {"type": "int", "logicalType": "date"}
    if isinstance(data_type, DecimalType):
        return {"type": "bytes", "logicalType": "decimal", "precision": data_type.precision,
                "scale": data_type.scale}
    if isinstance(data_type, StructType):
        return _record(data_type, name)
    if isinstance(data_type, ArrayType):
        items = _avro_type(data_type.elementType, name)
        return {"type": "array", "items": ["null", items] if data_type.containsNull else items}
    if isinstance(data_type, MapType) and isinstance(data_type.keyType, StringType):
        values = _avro_type(data_type.valueType, name)
        return {"type": "map",
                "values": ["null", values] if data_type.valueContainsNull else values}
    raise OptionError(f"column type {data_type.simpleString()} has no Avro type")


def unknown_fields(data_type: DataType, schema: Any, named: dict, path: str = "") -> list[str]:
    """The paths of struct fields (nested ones too) that `schema` has no field for: Avro would
    leave their values out unwritten. Fields whose types differ are found per row instead."""
    schema = _matching(schema, named, data_type)
    if isinstance(data_type, StructType) and schema is not None:
        fields = {f["name"]: f["type"] for f in schema["fields"]}
        missing = []
        for f in data_type.fields:
            where = f"{path}.{f.name}" if path else f.name
            if f.name not in fields:
                missing.append(where)
            else:
                missing += unknown_fields(f.dataType, fields[f.name], named, where)
        return missing
    if isinstance(data_type, ArrayType) and schema is not None:
        return unknown_fields(data_type.elementType, schema["items"], named, f"{path}[]")
    if isinstance(data_type, MapType) and schema is not None:
        return unknown_fields(data_type.valueType, schema["values"], named, f"{path}[]")
    return []


def _matching(schema: Any, named: dict, data_type: DataType) -> dict | None:
    """The record, array or map schema (named types looked up, the union branch picked) that
    holds a Spark struct, array or map; None when there is none."""
    wanted = {StructType: "record", ArrayType: "array", MapType: "map"}.get(type(data_type))
    if isinstance(schema, str):
        return _matching(named[schema], named, data_type) if schema in named else None
    if isinstance(schema, list):
        return next((m for b in schema if (m := _matching(b, named, data_type)) is not None), None)
    return schema if isinstance(schema, dict) and schema.get("type") == wanted else None


def decoder(writer: Any, reader: Any | None) -> Callable[[bytes], Any]:
    """Decodes an Avro body written with `writer`, resolved to `reader` (None: the same)."""
    reader_schema = reader if reader is not None and reader is not writer else None

    def decode(body: bytes) -> Any:
        return fastavro.schemaless_reader(io.BytesIO(body), writer, reader_schema)

    return decode


def encoder(schema: Any) -> Callable[[Any], bytes]:
    """Encodes a value with `schema`; raises FieldMismatch (from fastavro's validation, on the
    failing value only) naming the field that does not fit."""

    def encode(value: Any) -> bytes:
        out = io.BytesIO()
        try:
            fastavro.schemaless_writer(out, schema, value)
        except (ValueError, TypeError, KeyError, AttributeError, OverflowError) as e:
            raise _mismatch(schema, value, e) from None
        return out.getvalue()

    return encode


def _mismatch(schema: Any, value: Any, error: Exception) -> FieldMismatch:
    try:
        fastavro.validation.validate(value, schema, raise_errors=True)
    except fastavro.validation.ValidationError as found:
        # fastavro names a field "<its record's full name>.<field>"; inside a union the
        # deepest (longest) is the one that says what is wrong.
        deepest = max(found.errors, key=lambda e: len(e.field or ""))
        field = deepest.field or ""
        return FieldMismatch(field.rsplit(".", 1)[-1], f"{deepest.datum!r} is not a valid "
                                                       f"{json.dumps(deepest.schema)} ({field})")
    return FieldMismatch("", f"{type(error).__name__}: {error}")
