"""TEMPORARY STUB of the formats package (replaced by the sr-formats branch; delete before merge)."""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

SCHEMA_TYPES = ("AVRO", "PROTOBUF", "JSON")
COMPATIBILITY_LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE",
                        "FULL", "FULL_TRANSITIVE")


class InvalidSchemaError(ValueError):
    pass


class UnknownSchemaTypeError(ValueError):
    pass


@dataclass(frozen=True)
class Reference:
    name: str
    subject: str
    version: int


@dataclass(frozen=True)
class ResolvedReference:
    name: str
    subject: str
    version: int
    schema_type: str
    schema: str
    references: tuple = ()


@dataclass(frozen=True)
class _Parsed:
    schema_type: str
    text: str
    references: tuple = ()

    def canonical(self) -> str:
        return self.text

    def normalized(self):
        return self

    def formatted(self, fmt: str) -> str:
        return self.text


def parse_schema(schema_type: str, schema: str, references: Sequence[ResolvedReference] = ()):
    if schema_type not in SCHEMA_TYPES:
        raise UnknownSchemaTypeError(f"Unknown schema type {schema_type}")
    if schema_type == "PROTOBUF":
        if "syntax" not in schema and "message" not in schema:
            raise InvalidSchemaError("Invalid schema")
        return _Parsed(schema_type, schema, tuple(references))
    try:
        value = json.loads(schema)
    except ValueError as exc:
        raise InvalidSchemaError(f"Invalid schema {schema}: {exc}") from None
    if schema_type == "AVRO" and isinstance(value, dict) and "type" not in value:
        raise InvalidSchemaError(f"No type: {schema}")
    return _Parsed(schema_type, json.dumps(value, separators=(",", ":")), tuple(references))


def check_compatibility(level: str, new, previous) -> list[str]:
    if level == "NONE" or not previous:
        return []
    checked = previous if level.endswith("TRANSITIVE") else previous[-1:]
    messages = []
    for old in checked:
        if "INCOMPATIBLE" in new.canonical():
            messages.append("{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'stub'}")
    return messages
