"""Kafka's coordinator record schemas, read from Kafka's own message JSON: the codec of Kafka 4's
records in `__consumer_offsets` (and of any other coordinator's records built the same way).

Kafka generates its record classes from JSON files (group-coordinator/src/main/resources/common/
message/*.json); `schemas/` holds those files as Kafka has them, and `record_type(name)` builds
from `<name>Key.json` and `<name>Value.json` the same thing in Python: a frozen dataclass per
struct (fields in snake_case, Kafka's defaults) and the byte codec. A record is written as Kafka's
CoordinatorRecordSerde writes it:

    key   = int16 key version (which names the record type: 3 is ConsumerGroupMetadata, …)
            + the key struct at that version (never flexible)
    value = int16 value version + the value struct at that version (None: a tombstone)

Struct encoding is Kafka's: big-endian integers; a non-flexible version has int16-length strings
(-1 null), int32-length bytes and arrays (-1 null); a flexible one has unsigned-varint lengths
plus one (0 null) and ends each struct with its tagged fields (a count, then tag, size, bytes per
field), written only when they differ from their default. Unknown tags are skipped on reading,
so records of a newer Kafka that only adds tagged fields are read as well.

To add a record type (share groups' ShareGroup*, the share coordinator's ShareSnapshot/…), copy
Kafka's two JSON files into `schemas/` and call `record_type`. Pure functions and immutable
values, no I/O but reading the package's JSON once.
"""

from __future__ import annotations

import dataclasses
import json
import re
import struct
import uuid
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

_INTS = {"int8": struct.Struct(">b"), "int16": struct.Struct(">h"), "int32": struct.Struct(">i"),
         "int64": struct.Struct(">q"), "uint16": struct.Struct(">H"), "float64": struct.Struct(">d")}
_BOOL = struct.Struct(">?")
_I16 = _INTS["int16"]
_I32 = _INTS["int32"]


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def _versions(text: str | None) -> tuple[int, int]:
    """Kafka's version ranges: "none", "3", "0+", "1-2"."""
    if text is None or text == "none":
        return (1, 0)  # empty
    if text.endswith("+"):
        return (int(text[:-1]), 1 << 15)
    low, _, high = text.partition("-")
    return (int(low), int(high or low))


def _in(version: int, versions: tuple[int, int]) -> bool:
    return versions[0] <= version <= versions[1]


# -- the schema model ---------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class FieldSpec:
    name: str  # snake_case
    type: str  # a primitive ("int32", "string", …), a struct name, with "[]" for arrays
    versions: tuple[int, int]
    nullable: tuple[int, int]
    tagged: tuple[int, int]
    tag: int | None
    default: Any
    struct: StructSpec | None  # the element struct of a struct or struct-array field

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element(self) -> str:
        return self.type[2:] if self.is_array else self.type


@dataclass(frozen=True, slots=True)
class StructSpec:
    name: str
    fields: tuple[FieldSpec, ...]
    cls: type  # the frozen dataclass of its values


_PRIMITIVES = frozenset(_INTS) | {"bool", "string", "bytes", "uuid"}


def _default(spec: dict, ftype: str, struct_spec: StructSpec | None) -> Any:
    """Kafka's default of a field: its JSON "default", else zero, empty, or a default struct."""
    raw = spec.get("default")
    if raw == "null" or (struct_spec is not None and not ftype.startswith("[]") and raw is None
                         and "nullableVersions" in spec):
        return None
    if ftype.startswith("[]"):
        return ()
    if struct_spec is not None:
        return struct_spec.cls()
    if ftype == "float64":
        return float(raw or 0)
    if ftype in _INTS:
        return int(raw, 0) if isinstance(raw, str) else int(raw or 0)
    if ftype == "bool":
        return raw in (True, "true")
    if ftype == "string":
        return raw if isinstance(raw, str) else ""
    if ftype == "bytes":
        return b""
    if ftype == "uuid":
        return uuid.UUID(int=0)
    raise ValueError(f"unknown field type {ftype!r}")


def _struct(name: str, fields: list[dict], common: dict[str, list[dict]], built: dict[str, StructSpec]
            ) -> StructSpec:
    """The struct `name`; a common struct (commonStructs) is built once per schema, so that
    every field of its type holds instances of one class."""
    if name in built:
        return built[name]
    specs = []
    for f in fields:
        ftype = f["type"]
        element = ftype[2:] if ftype.startswith("[]") else ftype
        nested = None if element in _PRIMITIVES else _struct(element, f.get("fields") or common[element],
                                                             common, built)
        specs.append(FieldSpec(
            name=_snake(f["name"]), type=ftype, versions=_versions(f["versions"]),
            nullable=_versions(f.get("nullableVersions")), tagged=_versions(f.get("taggedVersions")),
            tag=f.get("tag"), default=_default(f, ftype, nested), struct=nested))
    cls = dataclasses.make_dataclass(
        name, [(s.name, Any, dataclasses.field(default=s.default)) for s in specs],
        frozen=True, slots=True, kw_only=True)
    cls.__module__ = __name__
    for s in specs:
        if s.struct is not None:
            setattr(cls, s.struct.name, s.struct.cls)
    spec = StructSpec(name, tuple(specs), cls)
    if name in common:
        built[name] = spec
    return spec


@dataclass(frozen=True, slots=True)
class MessageSchema:
    """One JSON file: a top-level struct with its valid and flexible versions."""

    name: str
    versions: tuple[int, int]
    flexible: tuple[int, int]
    struct: StructSpec

    @property
    def cls(self) -> type:
        return self.struct.cls

    def encode(self, value, version: int) -> bytes:
        if not _in(version, self.versions):
            raise ValueError(f"{self.name} has no version {version}")
        out = bytearray()
        _write_struct(out, self.struct, value, version, _in(version, self.flexible))
        return bytes(out)

    def decode(self, data: bytes | memoryview, pos: int, version: int) -> tuple[Any, int]:
        if not _in(version, self.versions):
            raise UnknownRecordVersionError(f"{self.name} has no version {version}")
        return _read_struct(memoryview(data), pos, self.struct, version, _in(version, self.flexible))


class UnknownRecordVersionError(ValueError):
    """A record version this broker cannot read (a newer Kafka's)."""


def _strip_comments(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//"))


@cache
def load_schema(name: str) -> MessageSchema:
    """`schemas/<name>.json`, as Kafka's message generator reads it."""
    # A plain path rather than importlib.resources (~5 ms of imports on the first consumer or share
    # group request): the package is always installed as files, never zipped.
    text = (Path(__file__).parent / "schemas" / f"{name}.json").read_text(encoding="utf-8")
    spec = json.loads(_strip_comments(text))
    common = {c["name"]: c["fields"] for c in spec.get("commonStructs", ())}
    return MessageSchema(spec["name"], _versions(spec["validVersions"]), _versions(spec["flexibleVersions"]),
                         _struct(spec["name"], spec["fields"], common, {}))


# -- records ------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class RecordType:
    """A coordinator record type: its key version and its key and value schemas. `Key` and
    `Value` are the dataclasses of their values (`Value.TopicPartitions`, … their structs)."""

    key_schema: MessageSchema
    value_schema: MessageSchema

    @property
    def key_version(self) -> int:
        return self.key_schema.versions[0]

    @property
    def value_version(self) -> int:
        """The version written: the highest this broker knows."""
        return self.value_schema.versions[1]

    @property
    def Key(self) -> type:  # noqa: N802 - Kafka's class names
        return self.key_schema.cls

    @property
    def Value(self) -> type:  # noqa: N802
        return self.value_schema.cls

    def encode_key(self, key) -> bytes:
        return _I16.pack(self.key_version) + self.key_schema.encode(key, self.key_version)

    def encode_value(self, value) -> bytes:
        return _I16.pack(self.value_version) + self.value_schema.encode(value, self.value_version)

    def decode_key(self, data: bytes):
        (version,) = _I16.unpack_from(data)
        if version != self.key_version:
            raise ValueError(f"key version {version} is not {self.key_schema.name}'s {self.key_version}")
        return self.key_schema.decode(data, 2, version)[0]

    def decode_value(self, data: bytes):
        (version,) = _I16.unpack_from(data)
        return self.value_schema.decode(data, 2, version)[0]


@cache
def record_type(name: str) -> RecordType:
    """The record type of `schemas/<name>Key.json` and `schemas/<name>Value.json`."""
    return RecordType(load_schema(f"{name}Key"), load_schema(f"{name}Value"))


@dataclass(frozen=True, slots=True)
class CoordinatorRecord:
    """One record to append and replay: a key, and a value or None for a tombstone."""

    type: RecordType
    key: Any
    value: Any | None

    def encode(self) -> tuple[bytes, bytes | None]:
        return (self.type.encode_key(self.key),
                None if self.value is None else self.type.encode_value(self.value))


def key_version(key: bytes) -> int:
    """The record type of a coordinator record key, as the loader dispatches on it."""
    return _I16.unpack_from(key)[0]


# -- writing ------------------------------------------------------------------------------------
def _uvarint(out: bytearray, n: int) -> None:
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _write_length(out: bytearray, n: int | None, flexible: bool, legacy: struct.Struct) -> None:
    if flexible:
        _uvarint(out, 0 if n is None else n + 1)
    else:
        out += legacy.pack(-1 if n is None else n)


def _write_value(out: bytearray, spec: FieldSpec, element: str, value, version: int, flexible: bool) -> None:
    if spec.struct is not None:
        _write_struct(out, spec.struct, value, version, flexible)
    elif element in _INTS:
        out += _INTS[element].pack(value)
    elif element == "bool":
        out += _BOOL.pack(value)
    elif element == "uuid":
        out += value.bytes
    elif element == "string" or element == "bytes":
        data = None if value is None else value.encode() if element == "string" else bytes(value)
        _write_length(out, None if data is None else len(data), flexible, _I16 if element == "string" else _I32)
        if data is not None:
            out += data
    else:
        raise ValueError(f"unknown field type {element!r}")


def _write_field(out: bytearray, spec: FieldSpec, value, version: int, flexible: bool) -> None:
    nullable = _in(version, spec.nullable)
    if value is None and not nullable:
        raise ValueError(f"{spec.name} is not nullable at version {version}")
    if spec.is_array:
        _write_length(out, None if value is None else len(value), flexible, _I32)
        for item in value or ():
            _write_value(out, spec, spec.element, item, version, flexible)
        return
    if spec.struct is not None and nullable:
        out.append(0xFF if value is None else 1)  # int8 -1 for null, 1 before a present struct
        if value is None:
            return
    _write_value(out, spec, spec.element, value, version, flexible)


def _write_struct(out: bytearray, struct_spec: StructSpec, value, version: int, flexible: bool) -> None:
    tagged = []
    for spec in struct_spec.fields:
        if not _in(version, spec.versions):
            continue
        field_value = getattr(value, spec.name)
        if flexible and _in(version, spec.tagged):
            if field_value != spec.default:
                tagged.append((spec, field_value))
            continue
        _write_field(out, spec, field_value, version, flexible)
    if flexible:
        _uvarint(out, len(tagged))
        for spec, field_value in sorted(tagged, key=lambda t: t[0].tag):
            data = bytearray()
            _write_field(data, spec, field_value, version, flexible)
            _uvarint(out, spec.tag)
            _uvarint(out, len(data))
            out += data


# -- reading ------------------------------------------------------------------------------------
def _read_uvarint(data: memoryview, pos: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        b = data[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        if b < 0x80:
            return n, pos
        shift += 7
        if shift > 28:
            raise ValueError("varint too long")


def _read_length(data: memoryview, pos: int, flexible: bool, legacy: struct.Struct) -> tuple[int | None, int]:
    if flexible:
        n, pos = _read_uvarint(data, pos)
        return (None if n == 0 else n - 1), pos
    (n,) = legacy.unpack_from(data, pos)
    return (None if n < 0 else n), pos + legacy.size


def _read_value(data: memoryview, pos: int, spec: FieldSpec, version: int, flexible: bool) -> tuple[Any, int]:
    element = spec.element
    if spec.struct is not None:
        return _read_struct(data, pos, spec.struct, version, flexible)
    if element in _INTS:
        s = _INTS[element]
        return s.unpack_from(data, pos)[0], pos + s.size
    if element == "bool":
        return data[pos] != 0, pos + 1
    if element == "uuid":
        return uuid.UUID(bytes=bytes(data[pos:pos + 16])), pos + 16
    n, pos = _read_length(data, pos, flexible, _I16 if element == "string" else _I32)
    if n is None:
        return None, pos
    if pos + n > len(data):
        raise ValueError(f"{spec.name}: length {n} runs past the record")
    raw = bytes(data[pos:pos + n])
    return (raw.decode() if element == "string" else raw), pos + n


def _read_field(data: memoryview, pos: int, spec: FieldSpec, version: int, flexible: bool) -> tuple[Any, int]:
    if spec.is_array:
        n, pos = _read_length(data, pos, flexible, _I32)
        if n is None:
            return None, pos
        if n > len(data) - pos:
            raise ValueError(f"{spec.name}: {n} elements cannot fit in the record")
        items = []
        for _ in range(n):
            item, pos = _read_value(data, pos, spec, version, flexible)
            items.append(item)
        return tuple(items), pos
    if spec.struct is not None and _in(version, spec.nullable):
        present = data[pos]
        pos += 1
        if present == 0xFF:
            return None, pos
    return _read_value(data, pos, spec, version, flexible)


def _read_struct(data: memoryview, pos: int, struct_spec: StructSpec, version: int,
                 flexible: bool) -> tuple[Any, int]:
    values = {}
    by_tag = {}
    for spec in struct_spec.fields:
        if not _in(version, spec.versions):
            continue
        if flexible and _in(version, spec.tagged):
            by_tag[spec.tag] = spec
            continue
        values[spec.name], pos = _read_field(data, pos, spec, version, flexible)
    if flexible:
        count, pos = _read_uvarint(data, pos)
        for _ in range(count):
            tag, pos = _read_uvarint(data, pos)
            size, pos = _read_uvarint(data, pos)
            spec = by_tag.get(tag)
            if spec is not None:
                values[spec.name], _ = _read_field(data[:pos + size], pos, spec, version, flexible)
            pos += size
    return struct_spec.cls(**values), pos


class ReplayedGroups:
    """The groups of one type rebuilt from their records while a partition loads
    (group_loader.GroupRecords): each record is replayed into its group as the live path applies
    it; a record for an unknown group creates it (a tombstone for one does nothing); a group
    that becomes dead (its metadata record deleted) is dropped. Subclasses name the record types
    they replay in `_TYPES` and say how a group is made (`_new_group`) and fed (`_apply`)."""

    _TYPES: dict[int, object] = {}

    def __init__(self) -> None:
        self._groups: dict = {}

    def _new_group(self, group_id: str):  # noqa: ANN202 - the subclass's group type
        raise NotImplementedError

    def _apply(self, group, record: CoordinatorRecord) -> None:
        raise NotImplementedError

    def replay(self, key: bytes, value: bytes | None) -> None:
        rtype = self._TYPES.get(key_version(key))
        if rtype is None:
            return  # a record type this group type does not keep (see the subclass)
        decoded = rtype.decode_key(key)
        group = self._groups.get(decoded.group_id)
        if group is None:
            if value is None:
                return
            group = self._groups[decoded.group_id] = self._new_group(decoded.group_id)
        self._apply(group, CoordinatorRecord(rtype, decoded, None if value is None else rtype.decode_value(value)))
        if group.dead:
            del self._groups[decoded.group_id]

    def groups(self, now_ms: int) -> list:
        return list(self._groups.values())
