"""JSON Schema columns: the Spark type of a registered JSON Schema, and records decoded as JSON.

Type mapping: an object with `properties` → struct (its properties, in order), string → string
(also with a `format`), integer → long, number → double, boolean → boolean, array → array of
its `items`; `["null", T]` and `oneOf`/`anyOf` of null and one type → T. Anything else (an
object without properties, a union of several types) → string holding the value as JSON text.
`$ref`s to `#/definitions/...` or `#/$defs/...` are followed. A record's properties the reader's
schema does not have are dropped; properties it lacks are null.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pyspark.sql.types import (ArrayType, BooleanType, DataType, DoubleType, LongType,
                               StringType, StructField, StructType)

from logbroker.spark.errors import OptionError

_SIMPLE: dict[str, DataType] = {"string": StringType(), "integer": LongType(),
                                "number": DoubleType(), "boolean": BooleanType()}


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
        if not properties:
            return StringType()
        return StructType([StructField(name, _type(sub, root, depth + 1))
                           for name, sub in properties.items()])
    if kind == "array":
        return ArrayType(_type(node.get("items", {}), root, depth + 1))
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

    def decode(body: bytes) -> Any:
        return _shape(json.loads(body), data_type)

    return decode


def _shape(value: Any, data_type: DataType) -> Any:
    if value is None:
        return None
    if isinstance(data_type, StructType):
        if not isinstance(value, dict):
            raise ValueError(f"expected a JSON object, got {type(value).__name__}")
        return {f.name: _shape(value.get(f.name), f.dataType) for f in data_type.fields}
    if isinstance(data_type, ArrayType):
        if not isinstance(value, list):
            raise ValueError(f"expected a JSON array, got {type(value).__name__}")
        return [_shape(v, data_type.elementType) for v in value]
    if isinstance(data_type, StringType) and not isinstance(value, str):
        return json.dumps(value)
    return value
