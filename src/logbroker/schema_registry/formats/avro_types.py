"""Avro schemas as Java's `Schema.Parser` builds them, from their JSON.

Names follow the Avro specification as Java applies it: a name with a dot is a full name; a
plain name takes the `namespace` beside it, or else the enclosing named type's namespace; an
empty namespace means none. A name used as a type is looked up in the current namespace first,
then without a namespace. Every named type is defined once per parse (references included);
a record is known by name while its own fields are parsed, so it may contain itself.

Properties other than the reserved attributes are kept in the order they were written, as Java
keeps them, because the canonical string prints them in that order.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from logbroker.schema_registry.formats.jackson import load_json
from logbroker.schema_registry.formats.model import InvalidSchemaError

PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")
SCHEMA_RESERVED = frozenset(
    ("doc", "fields", "items", "name", "namespace", "size", "symbols", "values", "type", "aliases")
)
ENUM_RESERVED = SCHEMA_RESERVED | {"default"}
FIELD_RESERVED = frozenset(("default", "doc", "name", "order", "type", "aliases"))
FIELD_ORDERS = ("ascending", "descending", "ignore")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
NO_DEFAULT = object()


@dataclass(eq=False)
class AvroType:
    """One node of a parsed schema. `type` is Avro's type name ("record", "int", "union"...)."""

    type: str
    props: dict[str, Any] = field(default_factory=dict)


@dataclass(eq=False)
class Named(AvroType):
    """A record (an error is a record with `is_error`), enum or fixed. `namespace` is None when
    the type has none."""

    name: str = ""
    is_error: bool = False
    namespace: str | None = None
    doc: str | None = None
    aliases: list[str] = field(default_factory=list)  # full names
    fields: list[Field] = field(default_factory=list)  # records
    symbols: list[str] = field(default_factory=list)  # enums
    enum_default: str | None = None
    size: int = 0  # fixed

    @property
    def fullname(self) -> str:
        return f"{self.namespace}.{self.name}" if self.namespace else self.name


@dataclass(eq=False)
class Field:
    name: str
    schema: AvroType
    position: int
    doc: str | None = None
    default: Any = NO_DEFAULT
    order: str = "ascending"
    aliases: list[str] = field(default_factory=list)
    props: dict[str, Any] = field(default_factory=dict)

    @property
    def has_default(self) -> bool:
        return self.default is not NO_DEFAULT


@dataclass(eq=False)
class Container(AvroType):
    """An array (`element` is its items), a map (`element` is its values) or a union."""

    element: AvroType | None = None
    branches: list[AvroType] = field(default_factory=list)


def qualify(name: str, namespace: str | None) -> tuple[str, str | None]:
    """(name, namespace) of a name written in `namespace`: a dotted name carries its own."""
    if "." in name:
        space, _, short = name.rpartition(".")
        return short, space or None
    return name, namespace or None


def full_name(name: str, namespace: str | None) -> str:
    short, space = qualify(name, namespace)
    return f"{space}.{short}" if space else short


class AvroParser:
    """Parses schemas into one shared space of names (`names`: full name -> named type), as Java's
    Schema.Parser does when a schema's references are parsed before it."""

    def __init__(self) -> None:
        self.names: dict[str, Named] = {}

    def parse_text(self, text: str) -> AvroType:
        return self.parse(load_json(text), None)

    def parse(self, json_value: Any, namespace: str | None) -> AvroType:
        if isinstance(json_value, str):
            return self._named_or_primitive(json_value, namespace)
        if isinstance(json_value, list):
            return self._union(json_value, namespace)
        if not isinstance(json_value, dict):
            raise InvalidSchemaError(f"Invalid schema: {json.dumps(json_value)} is not a schema")
        kind = json_value.get("type")
        if isinstance(kind, (dict, list)):
            return self.parse(kind, namespace)
        if not isinstance(kind, str):
            raise InvalidSchemaError(f"No type: {json.dumps(json_value)}")
        if kind in PRIMITIVES:
            return AvroType(kind, _props(json_value, SCHEMA_RESERVED))
        if kind in ("record", "error", "enum", "fixed"):
            return self._named(kind, json_value, namespace)
        if kind in ("array", "map"):
            key = "items" if kind == "array" else "values"
            if key not in json_value:
                raise InvalidSchemaError(f"{kind} has no {key}: {json.dumps(json_value)}")
            element = self.parse(json_value[key], namespace)
            return Container(kind, _props(json_value, SCHEMA_RESERVED), element=element)
        return self._named_or_primitive(kind, namespace)

    def _named_or_primitive(self, name: str, namespace: str | None) -> AvroType:
        if name in PRIMITIVES:
            return AvroType(name)
        found = self.names.get(full_name(name, namespace)) or self.names.get(name)
        if found is None:
            raise InvalidSchemaError(f'Undefined name: "{name}"')
        return found

    def _union(self, branches_json: list[Any], namespace: str | None) -> Container:
        branches: list[AvroType] = []
        seen: set[str] = set()
        for branch_json in branches_json:
            branch = self.parse(branch_json, namespace)
            if branch.type == "union":
                raise InvalidSchemaError(f"Nested union: {json.dumps(branches_json)}")
            key = branch.fullname if isinstance(branch, Named) else branch.type
            if key in seen:
                raise InvalidSchemaError(f"Duplicate in union: {key}")
            seen.add(key)
            branches.append(branch)
        return Container("union", branches=branches)

    def _named(self, kind: str, node: dict[str, Any], namespace: str | None) -> Named:
        name_json = node.get("name")
        if not isinstance(name_json, str):
            raise InvalidSchemaError(f"No name in schema: {json.dumps(node)}")
        space_json = node.get("namespace", namespace)
        if space_json is not None and not isinstance(space_json, str):
            raise InvalidSchemaError(f"namespace must be a string: {json.dumps(node)}")
        name, space = qualify(name_json, space_json)
        _check_name(name, space)
        reserved = ENUM_RESERVED if kind == "enum" else SCHEMA_RESERVED
        named = Named(
            "record" if kind == "error" else kind,
            _props(node, reserved),
            name=name,
            namespace=space,
            is_error=kind == "error",
        )
        named.doc = _optional_text(node, "doc")
        named.aliases = [full_name(alias, space) for alias in _aliases(node)]
        if named.fullname in PRIMITIVES:
            raise InvalidSchemaError(f"Schemas may not be named after primitives: {named.fullname}")
        if named.fullname in self.names:
            raise InvalidSchemaError(f"Can't redefine: {named.fullname}")
        self.names[named.fullname] = named
        if named.type == "record":
            self._fields(named, node)
        elif kind == "enum":
            _enum_symbols(named, node)
        else:
            size = node.get("size")
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                raise InvalidSchemaError(f"Invalid or no size: {json.dumps(node)}")
            named.size = size
        return named

    def _fields(self, record: Named, node: dict[str, Any]) -> None:
        fields_json = node.get("fields")
        if not isinstance(fields_json, list):
            raise InvalidSchemaError(f"Record has no fields: {json.dumps(node)}")
        seen: set[str] = set()
        for position, field_json in enumerate(fields_json):
            if not isinstance(field_json, dict) or not isinstance(field_json.get("name"), str):
                raise InvalidSchemaError(f"No field name: {json.dumps(field_json)}")
            name = field_json["name"]
            _check_name(name, None)
            if "type" not in field_json:
                raise InvalidSchemaError(f"No field type: {json.dumps(field_json)}")
            if name in seen:
                raise InvalidSchemaError(f"Duplicate field {name} in record {record.fullname}")
            seen.add(name)
            order = field_json.get("order", "ascending")
            order = order.lower() if isinstance(order, str) else order
            if order not in FIELD_ORDERS:
                raise InvalidSchemaError(f"Invalid order {json.dumps(order)} of field {name}")
            record.fields.append(
                Field(
                    name,
                    self.parse(field_json["type"], record.namespace),
                    position,
                    doc=_optional_text(field_json, "doc"),
                    default=field_json.get("default", NO_DEFAULT),
                    order=order,
                    aliases=_aliases(field_json),
                    props=_props(field_json, FIELD_RESERVED),
                )
            )


def _enum_symbols(enum: Named, node: dict[str, Any]) -> None:
    symbols = node.get("symbols")
    if not isinstance(symbols, list) or not all(isinstance(s, str) for s in symbols):
        raise InvalidSchemaError(f"Enum symbols must be a list of strings: {json.dumps(node)}")
    for symbol in symbols:
        _check_name(symbol, None)
    if len(set(symbols)) != len(symbols):
        raise InvalidSchemaError(f"Duplicate enum symbol in {enum.fullname}: {symbols}")
    enum.symbols = list(symbols)
    default = node.get("default")
    if default is not None and default not in symbols:
        raise InvalidSchemaError(
            f"The Enum Default: {default} is not in the enum symbol set: {symbols}"
        )
    enum.enum_default = default


def _check_name(name: str, namespace: str | None) -> None:
    parts = [name] + (namespace.split(".") if namespace else [])
    for part in parts:
        if not _NAME.match(part):
            raise InvalidSchemaError(f"Illegal name: {part!r} (in {full_name(name, namespace)!r})")


def _props(node: dict[str, Any], reserved: frozenset[str]) -> dict[str, Any]:
    return {key: value for key, value in node.items() if key not in reserved}


def _optional_text(node: dict[str, Any], key: str) -> str | None:
    value = node.get(key)
    if value is not None and not isinstance(value, str):
        raise InvalidSchemaError(f"{key} must be a string: {json.dumps(node)}")
    return value


def _aliases(node: dict[str, Any]) -> list[str]:
    aliases = node.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
        raise InvalidSchemaError(f"aliases must be a list of strings: {json.dumps(node)}")
    return list(dict.fromkeys(aliases))
