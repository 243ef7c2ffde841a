"""JSON Schema columns: the Spark type of a registered JSON Schema, records decoded as JSON, and
struct values encoded as JSON that validates against the writer's schema.

Type mapping: an object with `properties` → struct (its properties, in order), an object with
only an `additionalProperties` schema → map<string, _>, string → string (`format: date-time` →
timestamp, `format: date` → date), integer → long, number → double, boolean → boolean, array →
array of its `items`; `["null", T]` and `oneOf`/`anyOf` of null and one type → T. Kafka
Connect's annotations narrow a type, as Confluent's JSON Schema converter writes them:
`connect.type` int8/int16/int32 → int, float32 → float, bytes (a base64 string) → binary, and
the title `org.apache.kafka.connect.data.Decimal` (scale and `connect.decimal.precision` in
`connect.parameters`) → decimal. Anything else (an object without properties, a union of several
types) → string holding the value as JSON text. `$ref`s to `#/definitions/...` or
`#/$defs/...` are followed. A record's properties the reader's schema does not have are
dropped; properties it lacks are null.

Writes (`encoder`) turn a struct value into JSON by its Spark type (a null field is left out,
as Spark's `to_json` does; timestamps are RFC 3339 text in UTC, binary base64, decimals exact
numbers) and validate it against the writer's schema before it is framed. `json_schema` is the
schema registered from a Spark type: the mapping above read backwards, non-nullable fields
`required`.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
from collections.abc import Callable
from typing import Any

import jsonschema
from pyspark.sql.types import (ArrayType, BinaryType, BooleanType, DataType, DateType,
                               DecimalType, DoubleType, FloatType, IntegerType, LongType,
                               MapType, StringType, StructField, StructType, TimestampType)

from logbroker.spark.errors import FieldMismatch, OptionError

DECIMAL_TITLE = "org.apache.kafka.connect.data.Decimal"
_SIMPLE: dict[str, DataType] = {"string": StringType(), "integer": LongType(),
                                "number": DoubleType(), "boolean": BooleanType()}
_CONNECT: dict[str, DataType] = {"int32": IntegerType(), "int8": IntegerType(),
                                 "int16": IntegerType(), "float32": FloatType(),
                                 "bytes": BinaryType()}
_FORMATS: dict[str, DataType] = {"date-time": TimestampType(), "date": DateType()}


def parse(text: str) -> dict:
    return json.loads(text)


def spark_type(schema: dict) -> StructType:
    data_type = _type(schema, schema, 0)
    if not isinstance(data_type, StructType):
        raise OptionError("a JSON Schema column must be an object with 'properties'")
    return data_type


def _type(node: Any, root: dict, depth: int) -> DataType:
    if depth > 32 or not isinstance(node, dict):
        return StringType()
    if "$ref" in node:
        return _type(_local_ref(node["$ref"], root), root, depth + 1)
    for key in ("oneOf", "anyOf"):
        if key in node:
            branches = [b for b in node[key] if not (isinstance(b, dict) and b.get("type") == "null")]
            return _type(branches[0], root, depth + 1) if len(branches) == 1 else StringType()
    kind = node.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        kind = kinds[0] if len(kinds) == 1 else None
    if kind == "object" or (kind is None and "properties" in node):
        properties = node.get("properties")
        values = node.get("additionalProperties")
        if not properties and isinstance(values, dict):
            return MapType(StringType(), _type(values, root, depth + 1))
        if not properties:
            return StringType()
        return StructType([StructField(name, _type(sub, root, depth + 1))
                           for name, sub in properties.items()])
    if kind == "array":
        return ArrayType(_type(node.get("items", {}), root, depth + 1))
    if kind == "number" and node.get("title") == DECIMAL_TITLE:
        parameters = node.get("connect.parameters", {})
        return DecimalType(int(parameters.get("connect.decimal.precision", 38)),
                           int(parameters.get("scale", 0)))
    if kind in ("integer", "number", "string") and node.get("connect.type") in _CONNECT:
        return _CONNECT[node["connect.type"]]
    if kind == "string" and node.get("format") in _FORMATS:
        return _FORMATS[node["format"]]
    return _SIMPLE.get(kind, StringType())


def _local_ref(ref: str, root: dict) -> Any:
    if not ref.startswith("#/"):
        return {}
    node: Any = root
    for part in ref[2:].split("/"):
        node = node.get(part, {}) if isinstance(node, dict) else {}
    return node


def decoder(data_type: StructType) -> Callable[[bytes], Any]:
    """Decodes JSON text and shapes it to `data_type` (string fields of non-string JSON values
    hold their JSON text)."""
    parse_float = decimal.Decimal if _has_decimal(data_type) else float

    def decode(body: bytes) -> Any:
        return _shape(json.loads(body, parse_float=parse_float), data_type)

    return decode


def _shape(value: Any, data_type: DataType) -> Any:
    if value is None:
        return None
    if isinstance(data_type, StructType):
        if not isinstance(value, dict):
            raise ValueError(f"expected a JSON object, got {type(value).__name__}")
        return {f.name: _shape(value.get(f.name), f.dataType) for f in data_type.fields}
    if isinstance(data_type, MapType):
        if not isinstance(value, dict):
            raise ValueError(f"expected a JSON object, got {type(value).__name__}")
        return {k: _shape(v, data_type.valueType) for k, v in value.items()}
    if isinstance(data_type, ArrayType):
        if not isinstance(value, list):
            raise ValueError(f"expected a JSON array, got {type(value).__name__}")
        return [_shape(v, data_type.elementType) for v in value]
    if isinstance(data_type, StringType) and not isinstance(value, str):
        return json.dumps(value)
    if isinstance(data_type, TimestampType):
        return datetime.datetime.fromisoformat(value)
    if isinstance(data_type, DateType):
        return datetime.date.fromisoformat(value)
    if isinstance(data_type, BinaryType):
        return base64.b64decode(value, validate=True)
    if isinstance(data_type, DoubleType | FloatType) and isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(data_type, DecimalType) and isinstance(value, int | float):
        return decimal.Decimal(value)
    return value


def _has_decimal(data_type: DataType) -> bool:
    return any(isinstance(t, DecimalType) for t in _walk(data_type))


def _walk(data_type: DataType):
    yield data_type
    if isinstance(data_type, StructType):
        for f in data_type.fields:
            yield from _walk(f.dataType)
    elif isinstance(data_type, ArrayType):
        yield from _walk(data_type.elementType)
    elif isinstance(data_type, MapType):
        yield from _walk(data_type.valueType)


def json_schema(data_type: StructType) -> dict:
    """The JSON Schema (draft 7) a Spark struct is written with."""
    return {"$schema": "http://json-schema.org/draft-07/schema#", **_schema_of(data_type, "")}


def _schema_of(data_type: DataType, name: str) -> dict:
    if isinstance(data_type, StructType):
        required = [f.name for f in data_type.fields if not f.nullable]
        node: dict[str, Any] = {"type": "object", "properties": {
            f.name: _schema_of(f.dataType, f.name) for f in data_type.fields}}
        return {**node, "required": required} if required else node
    if isinstance(data_type, ArrayType):
        return {"type": "array", "items": _nullable(_schema_of(data_type.elementType, name),
                                                   data_type.containsNull)}
    if isinstance(data_type, MapType):
        if not isinstance(data_type.keyType, StringType):
            raise OptionError(f"field {name}: a JSON object's keys are strings, not "
                              f"{data_type.keyType.simpleString()}")
        return {"type": "object", "additionalProperties": _nullable(
            _schema_of(data_type.valueType, name), data_type.valueContainsNull)}
    if isinstance(data_type, DecimalType):
        return {"type": "number", "title": DECIMAL_TITLE, "connect.parameters": {
            "scale": str(data_type.scale), "connect.decimal.precision": str(data_type.precision)}}
    for kinds, schema in ((_SIMPLE, "type"), (_CONNECT, "connect.type"), (_FORMATS, "format")):
        for key, spark in kinds.items():
            if data_type == spark:
                return _annotated(schema, key)
    raise OptionError(f"field {name}: {data_type.simpleString()} has no JSON Schema type")


def _annotated(which: str, key: str) -> dict:
    if which == "type":
        return {"type": key}
    if which == "format":
        return {"type": "string", "format": key}
    return {"type": {"bytes": "string", "float32": "number"}.get(key, "integer"),
            "connect.type": key}


def _nullable(schema: dict, nullable: bool) -> dict:
    return {"oneOf": [{"type": "null"}, schema]} if nullable else schema


def encoder(data_type: StructType, validator: Any) -> Callable[[dict], bytes]:
    """Encodes a struct value as JSON text, first validated with `validator` (jsonschema's, of
    the writer schema); raises FieldMismatch naming the first field that does not validate."""
    decimals = _has_decimal(data_type)

    def encode(value: dict) -> bytes:
        document = _to_json(value, data_type)
        error = jsonschema.exceptions.best_match(validator.iter_errors(document))
        if error is not None:
            path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
            raise FieldMismatch(path.lstrip("."), f"does not validate against the JSON Schema: "
                                                  f"{error.message}")
        text = _dumps(document) if decimals else json.dumps(document, separators=(",", ":"))
        return text.encode()

    return encode


def _to_json(value: Any, data_type: DataType) -> Any:
    if value is None:
        return None
    if isinstance(data_type, StructType):
        return {f.name: _to_json(value[f.name], f.dataType) for f in data_type.fields
                if value.get(f.name) is not None}
    if isinstance(data_type, MapType):
        pairs = value.items() if isinstance(value, dict) else value
        return {k: _to_json(v, data_type.valueType) for k, v in pairs}
    if isinstance(data_type, ArrayType):
        return [_to_json(v, data_type.elementType) for v in value]
    if isinstance(data_type, TimestampType):
        utc = value.astimezone(datetime.UTC) if value.tzinfo else value
        return utc.replace(tzinfo=None).isoformat() + "Z"
    if isinstance(data_type, DateType):
        return value.isoformat()
    if isinstance(data_type, BinaryType):
        return base64.b64encode(value).decode()
    return value


def _dumps(value: Any) -> str:
    """json.dumps, with decimals written as the exact numbers they are."""
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(k)}:{_dumps(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_dumps(v) for v in value) + "]"
    return json.dumps(value)
