"""The values every schema format shares: references, errors and the ParsedSchema protocol.

A schema arrives as text plus the references the registry has already resolved (recursively,
each with its own text and references); a format turns that into a ParsedSchema whose
`canonical()` string is what the registry stores and compares. Two ParsedSchemas are equal
exactly when their schema types, canonical strings and references are equal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


class InvalidSchemaError(ValueError):
    """The schema text is not a valid schema of its type; the message says what is wrong."""


class UnknownSchemaTypeError(ValueError):
    """A schema type other than AVRO, PROTOBUF or JSON."""


@dataclass(frozen=True)
class Reference:
    """A schema's reference as registered: `name` is how the schema refers to it
    (an Avro full name, a .proto import path, a JSON Schema `$ref` URL)."""

    name: str
    subject: str
    version: int


@dataclass(frozen=True)
class ResolvedReference:
    """A reference with the registered schema it points to, and that schema's own references."""

    name: str
    subject: str
    version: int
    schema_type: str
    schema: str
    references: tuple[ResolvedReference, ...] = ()


def flatten_references(references: Sequence[ResolvedReference]) -> list[ResolvedReference]:
    """Every reference reachable from `references`, each once (by name), dependencies before
    the references that need them: the order Confluent resolves them in."""
    seen: dict[str, ResolvedReference] = {}

    def visit(refs: Sequence[ResolvedReference]) -> None:
        for ref in refs:
            if ref.name not in seen:
                visit(ref.references)
                seen.setdefault(ref.name, ref)

    visit(references)
    return list(seen.values())


def same_type_references(
    schema_type: str, references: Sequence[ResolvedReference]
) -> list[ResolvedReference]:
    """flatten_references, refusing a reference to a schema of another type."""
    flat = flatten_references(references)
    for ref in flat:
        if ref.schema_type != schema_type:
            raise InvalidSchemaError(
                f"Invalid schema: reference {ref.name!r} is a {ref.schema_type} schema"
            )
    return flat


class ParsedSchema(Protocol):
    schema_type: str
    references: tuple[ResolvedReference, ...]

    def canonical(self) -> str: ...

    def normalized(self) -> ParsedSchema: ...

    def formatted(self, fmt: str) -> str: ...

    def read_differences(self, writer: ParsedSchema) -> list[str]:
        """What stops this schema, as reader, from reading data written with `writer`: each
        message with two `%s` for the reader's and the writer's role ("new"/"old")."""
        ...


class CanonicalEquality:
    """Mixin: equality and hash by schema type, canonical string and references."""

    schema_type: str
    references: tuple[ResolvedReference, ...]

    def canonical(self) -> str:
        raise NotImplementedError

    def _identity(self) -> tuple[str, str, tuple[ResolvedReference, ...]]:
        return (self.schema_type, self.canonical(), self.references)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CanonicalEquality):
            return NotImplemented
        return self._identity() == other._identity()

    def __hash__(self) -> int:
        return hash(self._identity())

    def __repr__(self) -> str:
        return f"<{self.schema_type} schema {self.canonical()[:80]!r}>"
