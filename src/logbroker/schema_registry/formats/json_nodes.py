"""JSON Schemas as the compatibility rules see them: a node (a schema and the resolver of its
`$ref`s) and its kind, the everit schema class Confluent's rules dispatch on: object, array,
string, number (integer included), boolean, null, enum, const, not, combined, empty, false.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

_OBJECT_WORDS = ("properties", "required", "additionalProperties", "patternProperties",
                 "minProperties", "maxProperties", "dependencies", "propertyNames")
_ARRAY_WORDS = ("items", "additionalItems", "minItems", "maxItems", "uniqueItems", "contains",
                "prefixItems")
_STRING_WORDS = ("minLength", "maxLength", "pattern", "format")
_NUMBER_WORDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
_COMBINATORS = ("allOf", "anyOf", "oneOf")


@dataclass(frozen=True)
class SchemaNode:
    """A schema with the resolver its `$ref`s are looked up with."""

    contents: Any
    resolver: Any

    def resolved(self) -> SchemaNode:
        node = self
        for _ in range(64):  # a chain of $refs longer than this is a loop
            if not (isinstance(node.contents, dict) and isinstance(node.contents.get("$ref"), str)):
                return node
            found = node.resolver.lookup(node.contents["$ref"])
            node = SchemaNode(found.contents, found.resolver)
        return node

    def child(self, contents: Any) -> SchemaNode:
        return SchemaNode(contents, self.resolver)

    def get(self, key: str) -> Any:
        return self.contents.get(key) if isinstance(self.contents, dict) else None


def kind(node: SchemaNode) -> str:
    schema = node.contents
    if schema is True:
        return "EMPTY"
    if schema is False:
        return "FALSE"
    types = schema.get("type")
    if isinstance(types, list) and len(types) > 1 or any(c in schema for c in _COMBINATORS):
        return "COMBINED"
    if isinstance(types, list):
        types = types[0] if types else None
    for word, found in (("enum", "ENUM"), ("const", "CONST"), ("not", "NOT")):
        if word in schema:
            return found
    if types is not None:
        return "NUMBER" if types == "integer" else str(types).upper()
    for words, found in ((_OBJECT_WORDS, "OBJECT"), (_ARRAY_WORDS, "ARRAY"),
                         (_STRING_WORDS, "STRING"), (_NUMBER_WORDS, "NUMBER")):
        if any(word in schema for word in words):
            return found
    return "EMPTY"


def branches(node: SchemaNode) -> tuple[str, list[SchemaNode]]:
    """A combination's criterion and branches: a list of types is anyOf one schema per type;
    a combinator beside other keywords is allOf those keywords and the combinator."""
    schema = node.contents
    combinators = [c for c in _COMBINATORS if c in schema]
    rest = {k: v for k, v in schema.items() if k not in _COMBINATORS and k != "type"}
    types = schema.get("type")
    if isinstance(types, list) and len(types) > 1 and not combinators:
        return "anyOf", [node.child({**rest, "type": t}) for t in types]
    others = {k: v for k, v in schema.items() if k not in combinators}
    if len(combinators) == 1 and not _constraining(others):
        return combinators[0], [node.child(b) for b in schema[combinators[0]]]
    parts = [node.child({c: schema[c]}) for c in combinators]
    return "allOf", ([node.child(others)] if _constraining(others) else []) + parts


def _constraining(schema: dict) -> bool:
    ignored = {"$schema", "$id", "id", "title", "description", "default", "examples", "$defs",
               "definitions", "$comment"}
    return any(key not in ignored for key in schema)
