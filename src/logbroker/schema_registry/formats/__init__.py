"""Schema formats of the registry: Avro, Protobuf and JSON Schema, each parsed into a
ParsedSchema with Confluent's canonical string, and their compatibility rules.

`parse_schema` is the one entry: it picks the format by Confluent's schema type name.
"""

from __future__ import annotations

from collections.abc import Sequence

from logbroker.schema_registry.formats.avro_schema import AvroSchema
from logbroker.schema_registry.formats.compatibility import (
    COMPATIBILITY_LEVELS,
    check_compatibility,
)
from logbroker.schema_registry.formats.json_schema import JsonSchema
from logbroker.schema_registry.formats.model import (
    InvalidSchemaError,
    ParsedSchema,
    Reference,
    ResolvedReference,
    UnknownSchemaTypeError,
)
from logbroker.schema_registry.formats.protobuf_schema import ProtobufSchema

SCHEMA_TYPES = ("AVRO", "PROTOBUF", "JSON")

__all__ = [
    "COMPATIBILITY_LEVELS",
    "SCHEMA_TYPES",
    "InvalidSchemaError",
    "ParsedSchema",
    "Reference",
    "ResolvedReference",
    "UnknownSchemaTypeError",
    "check_compatibility",
    "parse_schema",
]


def parse_schema(
    schema_type: str,
    schema: str,
    references: Sequence[ResolvedReference] = (),
    *,
    new: bool = True,
) -> ParsedSchema:
    """Raises UnknownSchemaTypeError for a type not in SCHEMA_TYPES, InvalidSchemaError for a
    schema its format rejects (the message says why). `new=False` is for a schema read back
    from storage: checked as Confluent checks a stored one (Avro defaults are not rechecked)."""
    parser = _PARSERS.get(schema_type)
    if parser is None:
        raise UnknownSchemaTypeError(f"Unknown schema type: {schema_type}")
    try:
        return parser(schema, references, new=new)
    except RecursionError:
        raise InvalidSchemaError("Invalid schema: nested too deeply") from None


_PARSERS = {"AVRO": AvroSchema, "PROTOBUF": ProtobufSchema, "JSON": JsonSchema}
