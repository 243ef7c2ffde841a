"""Avro schemas printed as Confluent's registry prints them.

`java_string` is Java Avro's `Schema.toString(referencedSchemas, false)`, the string Confluent
stores for a registered Avro schema: compact JSON, each object's keys in Java's fixed order
(type, name, namespace, doc, then the type's own attributes, properties as written, aliases), a
named type written in full where it first appears and by name after that, and a referenced
type (the top-level type of each reference) always by name. A namespace is written only where
it differs from the enclosing one.

`normalized_string` is Confluent's `AvroSchemaUtils.toNormalizedString`, adapted from Avro's
parsing canonical form: names written full, properties sorted by key (a valid logical type's
attributes first), aliases full and sorted, an empty doc of a named type dropped. Registering
with `normalize=true` stores that string parsed again and printed by `java_string`.
"""

from __future__ import annotations

from typing import Any

from logbroker.schema_registry.formats.avro_types import (
    PRIMITIVES,
    AvroType,
    Container,
    Field,
    Named,
    qualify,
)
from logbroker.schema_registry.formats.jackson import json_text

_LOGICAL_TYPES = {
    "decimal": ("bytes", "fixed"),
    "uuid": ("string", "fixed"),
    "date": ("int",),
    "time-millis": ("int",),
    "time-micros": ("long",),
    "timestamp-millis": ("long",),
    "timestamp-micros": ("long",),
    "timestamp-nanos": ("long",),
    "local-timestamp-millis": ("long",),
    "local-timestamp-micros": ("long",),
    "local-timestamp-nanos": ("long",),
    "duration": ("fixed",),
}


def qualified(named: Named, namespace: str | None) -> str:
    """Java's Name.getQualified: the short name when it resolves in `namespace` unambiguously."""
    if named.namespace is not None and named.namespace == namespace and named.name not in PRIMITIVES:
        return named.name
    return named.fullname


def java_string(schema: AvroType, referenced: set[str]) -> str:
    return _JavaWriter(set(referenced)).write(schema, None)


class _JavaWriter:
    def __init__(self, known: set[str]) -> None:
        self.known = known

    def write(self, schema: AvroType, namespace: str | None) -> str:
        if isinstance(schema, Named):
            return self._named(schema, namespace)
        if isinstance(schema, Container):
            if schema.type == "union":
                return "[" + ",".join(self.write(b, namespace) for b in schema.branches) + "]"
            key = "items" if schema.type == "array" else "values"
            assert schema.element is not None
            parts = [f'"type":"{schema.type}"', f'"{key}":{self.write(schema.element, namespace)}']
            return _object(parts + _props(schema.props))
        if not schema.props:
            return json_text(schema.type)
        return _object([f'"type":{json_text(schema.type)}'] + _props(schema.props))

    def _named(self, named: Named, namespace: str | None) -> str:
        if named.fullname in self.known:
            return json_text(qualified(named, namespace))
        self.known.add(named.fullname)
        kind = "error" if named.is_error else named.type
        parts = [f'"type":"{kind}"', f'"name":{json_text(named.name)}']
        if named.namespace is not None and named.namespace != namespace:
            parts.append(f'"namespace":{json_text(named.namespace)}')
        elif named.namespace is None and namespace is not None:
            parts.append('"namespace":""')
        if named.doc is not None:
            parts.append(f'"doc":{json_text(named.doc)}')
        if named.type == "record":
            fields = ",".join(self._field(f, named.namespace) for f in named.fields)
            parts.append(f'"fields":[{fields}]')
        elif named.type == "enum":
            parts.append(f'"symbols":{json_text(named.symbols)}')
            if named.enum_default is not None:
                parts.append(f'"default":{json_text(named.enum_default)}')
        else:
            parts.append(f'"size":{named.size}')
        parts += _props(named.props)
        if named.aliases:
            aliases = [_alias_text(alias, named.namespace) for alias in named.aliases]
            parts.append(f'"aliases":[{",".join(aliases)}]')
        return _object(parts)

    def _field(self, field: Field, namespace: str | None) -> str:
        parts = [f'"name":{json_text(field.name)}', f'"type":{self.write(field.schema, namespace)}']
        if field.doc is not None:
            parts.append(f'"doc":{json_text(field.doc)}')
        if field.has_default:
            parts.append(f'"default":{json_text(field.default)}')
        if field.order != "ascending":
            parts.append(f'"order":"{field.order}"')
        if field.aliases:
            parts.append(f'"aliases":{json_text(field.aliases)}')
        return _object(parts + _props(field.props))


def _alias_text(alias: str, namespace: str | None) -> str:
    name, space = qualify(alias, None)
    if space is not None and space == namespace and name not in PRIMITIVES:
        return json_text(name)
    return json_text(alias)


def _object(parts: list[str]) -> str:
    return "{" + ",".join(parts) + "}"


def _props(props: dict[str, Any]) -> list[str]:
    return [f"{json_text(key)}:{json_text(value)}" for key, value in props.items()]


def logical_type(schema: AvroType) -> str | None:
    """The schema's logical type if Java's LogicalTypes accepts it, else None (Java ignores
    an invalid one and keeps it as a plain property)."""
    name = schema.props.get("logicalType")
    if not isinstance(name, str) or schema.type not in _LOGICAL_TYPES.get(name, ()):
        return None
    if name == "decimal":
        precision, scale = schema.props.get("precision"), schema.props.get("scale", 0)
        if not isinstance(precision, int) or precision <= 0:
            return None
        if not isinstance(scale, int) or not 0 <= scale <= precision:
            return None
        if isinstance(schema, Named) and precision > _max_fixed_precision(schema.size):
            return None
    if name == "uuid" and isinstance(schema, Named) and schema.size != 16:
        return None
    if name == "duration" and isinstance(schema, Named) and schema.size != 12:
        return None
    return name


def _max_fixed_precision(size: int) -> int:
    return len(str(2 ** (8 * size - 1) - 1)) - 1 if size > 0 else 0


def normalized_string(schema: AvroType, referenced: set[str]) -> str:
    return _NormalWriter({name: json_text(name) for name in referenced}).write(schema)


class _NormalWriter:
    def __init__(self, env: dict[str, str]) -> None:
        self.env = env

    def write(self, schema: AvroType) -> str:
        if isinstance(schema, Container):
            if schema.type == "union":
                return "[" + ",".join(self.write(b) for b in schema.branches) + "]"
            key = "items" if schema.type == "array" else "values"
            assert schema.element is not None
            parts = [f'"type":"{schema.type}"', f'"{key}":{self.write(schema.element)}']
            return _object(parts + _logical_parts(schema) + _sorted_props(schema.props))
        if isinstance(schema, Named):
            return self._named(schema)
        if logical_type(schema) is None and not schema.props:
            return json_text(schema.type)
        parts = [f'"type":"{schema.type}"'] + _logical_parts(schema)
        return _object(parts + _sorted_props(schema.props))

    def _named(self, named: Named) -> str:
        if named.fullname in self.env:
            return self.env[named.fullname]
        self.env[named.fullname] = json_text(named.fullname)
        kind = "error" if named.is_error else named.type
        parts = [f'"name":{json_text(named.fullname)}', f'"type":"{kind}"']
        if named.type == "enum":
            parts.append(f'"symbols":{json_text(named.symbols)}')
        elif named.type == "fixed":
            parts.append(f'"size":{named.size}')
        else:
            parts.append(f'"fields":[{",".join(self._field(f) for f in named.fields)}]')
        parts += _logical_parts(named)
        if named.doc:
            parts.append(f'"doc":{json_text(named.doc)}')
        if named.aliases:
            parts.append(f'"aliases":{json_text(sorted(named.aliases))}')
        if named.type == "enum" and named.enum_default is not None:
            parts.append(f'"default":{json_text(named.enum_default)}')
        return _object(parts + _sorted_props(named.props))

    def _field(self, field: Field) -> str:
        parts = [f'"name":{json_text(field.name)}', f'"type":{self.write(field.schema)}']
        parts.append(f'"order":"{field.order.upper()}"')
        if field.doc is not None:
            parts.append(f'"doc":{json_text(field.doc)}')
        if field.aliases:
            parts.append(f'"aliases":{json_text(sorted(field.aliases))}')
        if field.has_default:
            parts.append(f'"default":{json_text(_typed_default(field))}')
        return _object(parts + _sorted_props(field.props))


def _typed_default(field: Field) -> Any:
    """A default as Java holds it for its field's type: a float or double field's number is a
    double (so 1 prints 1.0)."""
    kind = field.schema.type
    if kind in ("float", "double") and isinstance(field.default, (int, float)):
        if not isinstance(field.default, bool):
            return float(field.default)
    return field.default


def _logical_parts(schema: AvroType) -> list[str]:
    name = logical_type(schema)
    if name is None:
        return []
    parts = [f'"logicalType":"{name}"']
    if name == "decimal":
        parts.append(f'"precision":{schema.props["precision"]}')
        if schema.props.get("scale", 0):
            parts.append(f'"scale":{schema.props["scale"]}')
    return parts


def _sorted_props(props: dict[str, Any]) -> list[str]:
    return _props(dict(sorted(props.items())))
