"""Avro field defaults checked as Java's Schema.Parser checks them (`setValidateDefaults(true)`,
what Confluent's registry applies to a schema being registered).

A default is JSON: a string for string, bytes, enum and fixed; an integer that fits for int and
long; any number for float and double (Java also takes "NaN"/"Infinity" text there); the first
branch's form for a union; and for a record an object whose every field is valid, a missing one
taking that field's own default.
"""

from __future__ import annotations

from typing import Any

from logbroker.schema_registry.formats.avro_types import AvroType, Container, Named
from logbroker.schema_registry.formats.jackson import json_text
from logbroker.schema_registry.formats.model import InvalidSchemaError

_INT_RANGE = range(-(2**31), 2**31)
_LONG_RANGE = range(-(2**63), 2**63)
_TEXT_NUMBERS = ("NaN", "Infinity", "-Infinity", "+Infinity")


def check_defaults(schema: AvroType, seen: set[int] | None = None) -> None:
    """Raises InvalidSchemaError naming the first field whose default does not fit its type."""
    seen = set() if seen is None else seen
    if id(schema) in seen:
        return
    seen.add(id(schema))
    if isinstance(schema, Container):
        for child in schema.branches if schema.type == "union" else [schema.element]:
            if child is not None:
                check_defaults(child, seen)
    if isinstance(schema, Named):
        for field in schema.fields:
            check_defaults(field.schema, seen)
            if field.has_default and not is_valid_default(field.schema, field.default):
                raise InvalidSchemaError(
                    f"Invalid default for field {field.name}: {json_text(field.default)} "
                    f"not a {_describe(field.schema)}"
                )


def is_valid_default(schema: AvroType, value: Any) -> bool:
    kind = schema.type
    if kind in ("string", "bytes", "enum", "fixed"):
        return isinstance(value, str)
    if kind in ("int", "long"):
        integral = isinstance(value, int) and not isinstance(value, bool)
        return integral and value in (_INT_RANGE if kind == "int" else _LONG_RANGE)
    if kind in ("float", "double"):
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        return number or value in _TEXT_NUMBERS
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "null":
        return value is None
    if isinstance(schema, Container):
        if kind == "union":
            return bool(schema.branches) and is_valid_default(schema.branches[0], value)
        assert schema.element is not None
        if kind == "array":
            return isinstance(value, list) and all(
                is_valid_default(schema.element, v) for v in value
            )
        return isinstance(value, dict) and all(
            is_valid_default(schema.element, v) for v in value.values()
        )
    if isinstance(schema, Named) and isinstance(value, dict):
        for field in schema.fields:
            if field.name in value:
                if not is_valid_default(field.schema, value[field.name]):
                    return False
            elif not field.has_default or not is_valid_default(field.schema, field.default):
                return False
        return True
    return False


def _describe(schema: AvroType) -> str:
    if isinstance(schema, Named):
        return f"{schema.type} {schema.fullname}"
    if isinstance(schema, Container) and schema.type == "union":
        return "union " + "|".join(_describe(b) for b in schema.branches)
    return schema.type
