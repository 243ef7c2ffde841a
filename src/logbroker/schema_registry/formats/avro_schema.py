"""Avro schemas as Confluent's registry keeps them (its AvroSchema).

A schema's references are parsed first, into the same space of names, so the schema can use
their named types; the stored (canonical) string writes those types by name. Defaults are
checked as for a schema being registered (`new`); a schema read back from storage is not
checked again (Confluent's validateAsNew), so a history written before defaults were checked
still loads. fastavro, what confluent-kafka's Avro serializers parse schemas with, must accept
a new schema too, so nothing is stored that a client cannot use.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import cached_property

import fastavro
from fastavro.schema import SchemaParseException, UnknownType

from logbroker.schema_registry.formats.avro_compat import incompatibilities
from logbroker.schema_registry.formats.avro_defaults import check_defaults
from logbroker.schema_registry.formats.avro_json import java_string, normalized_string
from logbroker.schema_registry.formats.avro_types import AvroParser, AvroType, Named
from logbroker.schema_registry.formats.model import (
    CanonicalEquality,
    InvalidSchemaError,
    ResolvedReference,
    same_type_references,
)


class AvroSchema(CanonicalEquality):
    """A parsed Avro schema. Raises InvalidSchemaError from the constructor."""

    schema_type = "AVRO"

    def __init__(
        self, text: str, references: Sequence[ResolvedReference] = (), *, new: bool = True
    ) -> None:
        self.references = tuple(references)
        self._new = new
        parser = AvroParser()
        self._referenced: set[str] = set()
        fastavro_names: dict[str, object] = {}
        for ref in same_type_references(self.schema_type, references):
            top = parser.parse_text(ref.schema)
            self._referenced.add(top.fullname if isinstance(top, Named) else top.type)
            if new:
                _fastavro_check(ref.schema, fastavro_names)
        self.root: AvroType = parser.parse_text(text)
        if new:
            check_defaults(self.root)
            _fastavro_check(text, fastavro_names)

    @cached_property
    def _canonical(self) -> str:
        return java_string(self.root, self._referenced)

    def canonical(self) -> str:
        return self._canonical

    def normalized(self) -> AvroSchema:
        return AvroSchema(
            normalized_string(self.root, self._referenced), self.references, new=self._new
        )

    def formatted(self, fmt: str) -> str:
        """`resolved` writes the referenced types in full where first used; any other format
        (Confluent ignores ones it does not know) is the canonical string."""
        if fmt == "resolved":
            return java_string(self.root, set())
        return self.canonical()

    def read_differences(self, writer: CanonicalEquality) -> list[str]:
        assert isinstance(writer, AvroSchema)
        return [found.describe() for found in incompatibilities(self.root, writer.root)]


def _fastavro_check(text: str, named_schemas: dict[str, object]) -> None:
    try:
        fastavro.parse_schema(json.loads(text), named_schemas=named_schemas)
    except (SchemaParseException, UnknownType, ValueError, TypeError, KeyError) as error:
        raise InvalidSchemaError(f"Invalid schema: {error}") from None
