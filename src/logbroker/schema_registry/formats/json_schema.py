"""JSON Schemas as Confluent's registry keeps them (its JsonSchema).

The draft is the one `$schema` names (draft 4, 6, 7, 2019-09 or 2020-12, what Confluent's
serializers produce), draft 7 when none is named, and the schema must be valid under that
draft's metaschema (jsonschema's check). Each reference is a registered schema known by its
name as a `$ref` URL (Confluent's JSON serializer uses the referenced file name), resolved
against the schema's `$id` when it has one, as Confluent registers them; every `$ref` in the
schema and its references must resolve, within the document or to a reference.

The canonical string is the JSON as given, compacted (Jackson's writing, keys in the order
given, fractions kept as the decimals they were written as); the normalized form also sorts
every object's keys.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import urljoin

import jsonschema
import referencing.jsonschema
from referencing import Registry, Resource
from referencing.exceptions import Unresolvable

from logbroker.schema_registry.formats.jackson import json_text, load_json
from logbroker.schema_registry.formats.json_compat import SchemaNode, differences
from logbroker.schema_registry.formats.model import (
    CanonicalEquality,
    InvalidSchemaError,
    ResolvedReference,
    same_type_references,
)

ROOT_URI = ""


class JsonSchema(CanonicalEquality):
    """A parsed JSON Schema. Raises InvalidSchemaError from the constructor."""

    schema_type = "JSON"

    def __init__(
        self, text: str, references: Sequence[ResolvedReference] = (), *, new: bool = True
    ) -> None:
        """`new` is Avro's: these formats check a stored schema as they check a new one."""
        self.references = tuple(references)
        self.document = _load(text)
        base = _schema_id(self.document)
        resources = []
        for ref in same_type_references(self.schema_type, references):
            resource = _resource(_load(ref.schema))
            resources.append((ref.name, resource))
            if base and urljoin(base, ref.name) != ref.name:
                resources.append((urljoin(base, ref.name), resource))
        registry: Registry = Registry().with_resources(
            resources + [(ROOT_URI, _resource(self.document))]
        )
        self._registry = registry
        self.root = SchemaNode(self.document, registry.resolver(base_uri=ROOT_URI))
        _check_refs(self.root)
        for name, resource in resources:
            _check_refs(SchemaNode(resource.contents, registry.resolver(base_uri=name)))

    def canonical(self) -> str:
        return json_text(self.document)

    def validator(self) -> jsonschema.protocols.Validator:
        """jsonschema's validator of the schema's draft, its references resolvable."""
        kind = jsonschema.validators.validator_for(self.document, default=jsonschema.Draft7Validator)
        return kind(self.document, registry=self._registry)

    def normalized(self) -> JsonSchema:
        return JsonSchema(json_text(_sorted(self.document)), self.references)

    def formatted(self, fmt: str) -> str:
        return self.canonical()

    def read_differences(self, writer: CanonicalEquality) -> list[str]:
        assert isinstance(writer, JsonSchema)
        return [found.describe() for found in differences(writer.root, self.root)]


def _load(text: str) -> Any:
    document = load_json(text, decimals=True)
    if not isinstance(document, (dict, bool)):
        raise InvalidSchemaError("Invalid schema: a JSON Schema is an object or a boolean")
    validator = jsonschema.validators.validator_for(document, default=jsonschema.Draft7Validator)
    try:
        validator.check_schema(document)
    except jsonschema.SchemaError as error:
        where = "/".join(str(p) for p in error.path)
        raise InvalidSchemaError(f"Invalid schema: {error.message}" + (f" at /{where}" if where else "")) from None
    return document


def _schema_id(document: Any) -> str:
    if not isinstance(document, dict):
        return ""
    found = document.get("$id", document.get("id"))
    return found if isinstance(found, str) else ""


def _resource(document: Any) -> Resource:
    return referencing.jsonschema.specification_with(
        document.get("$schema", "") if isinstance(document, dict) else "",
        default=referencing.jsonschema.DRAFT7,
    ).create_resource(document)


def _check_refs(node: SchemaNode) -> None:
    for value, resolver in _refs(node.contents, node.resolver):
        try:
            resolver.lookup(value)
        except Unresolvable:
            raise InvalidSchemaError(f"Invalid schema: $ref '{value}' cannot be resolved") from None


def _refs(contents: Any, resolver) -> Iterator[tuple[str, Any]]:
    if isinstance(contents, dict):
        if isinstance(contents.get("$id"), str):
            resolver = resolver.in_subresource(_resource(contents))
        for key, value in contents.items():
            if key == "$ref" and isinstance(value, str):
                yield value, resolver
            elif key not in ("enum", "const", "default", "examples"):
                yield from _refs(value, resolver)
    elif isinstance(contents, list):
        for item in contents:
            yield from _refs(item, resolver)


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _sorted(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_sorted(item) for item in value]
    return value
