"""A pre-parse check of request bodies that keeps kio's native decoder from aborting the process.

kio 0.6.5's Rust reader reserves room for an array from its declared length before reading any
element. A client can declare 2^32 elements in five bytes (a compact array length); the
allocation of 8 × that fails and Rust aborts the whole process — no Python exception, every
connection gone (found by tests/protocol/test_codec.py; the design says nothing a client sends may
crash the broker).

So before kio sees a body, `check_body(cls, buf, pos)` walks it with the schema kio's own classes
describe (field order, kafka_type, flexible or not, tagged fields) and refuses any array whose
declared length could not fit in the bytes left in the frame (each element takes at least
`min_size` bytes). That bounds every reservation by 8 × the frame size, which
`socket.request.max.bytes` bounds in turn. It also rejects truncated bodies early, but it is not a
parser: kio still decides what is valid.

The walk also enforces what the schema says a value may be, which kio's reader does not: a null
(length -1, or 0 in the compact encodings) in a field that is not nullable — an array, a string,
bytes, records — is refused with "non-nullable field X was serialized as null", Kafka's own words
(its generated readers throw the same while parsing, and the connection is closed). Nullability
comes from kio's field types (`T | None` is nullable), so every API and version in the table,
including ones added later, is covered without a line per handler; no handler ever sees a None
its schema forbids. Lengths below -1 are refused too. kio's request classes have no enum-typed
fields (error codes and the like are plain ints), so there is no enum to check here.

The walkers are built once per class from dataclass metadata and are plain closures; a one-topic
one-partition Produce request takes a few microseconds.
"""

from __future__ import annotations

import copy
import struct
from collections.abc import Callable
from dataclasses import fields
from functools import cache
from types import NoneType, UnionType
from typing import Union, get_args, get_origin, get_type_hints

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
)

from logbroker.protocol.wire import read_uvarint


class BodyRejected(Exception):
    """The body cannot be a valid request of this class (too short, or an impossible length)."""


Walker = Callable[[memoryview | bytes, int, int], int]

_FIXED_SIZES = {
    "int8": 1, "uint8": 1, "bool": 1,
    "int16": 2, "uint16": 2, "error_code": 2,
    "int32": 4, "uint32": 4, "timedelta_i32": 4,
    "int64": 8, "uint64": 8, "float64": 8, "timedelta_i64": 8, "datetime_i64": 8,
    "uuid": 16,
}

_I16 = struct.Struct(">h").unpack_from
_I32 = struct.Struct(">i").unpack_from
_I8 = struct.Struct(">b").unpack_from


def check_body(cls: type, buf: memoryview | bytes, pos: int) -> int:
    """Walk a body of kio class `cls` at `pos`; return where it ends. Raises BodyRejected."""
    end = len(buf)
    try:
        stop = _entity_walker(cls)(buf, pos, end)
    except (struct.error, IndexError, ValueError) as e:
        raise BodyRejected(f"truncated or malformed: {e}") from None
    if stop > end:
        raise BodyRejected(f"runs {stop - end} bytes past the end of the frame")
    return stop


def prepare_guard(cls: type) -> None:
    """Build (and cache) the walker of `cls` ahead of its first use."""
    _entity_walker(cls)


# --- steps: each takes (buf, pos, end) and returns the position after its field ---

def _fixed(n: int) -> Walker:
    return lambda buf, pos, end: pos + n


def _null(name: str) -> BodyRejected:
    return BodyRejected(f"non-nullable field {name} was serialized as null")


def _legacy_sized(unpack, width: int, kind: str) -> Callable[[str, bool], Walker]:
    """A non-flexible string (int16 length) or bytes (int32 length), -1 for null."""
    def make(name: str, nullable: bool) -> Walker:
        def walk(buf, pos, end):  # noqa: ANN001, ANN202
            (n,) = unpack(buf, pos)
            if n < 0:
                if n < -1:
                    raise BodyRejected(f"field {name} has {kind} length {n}")
                if not nullable:
                    raise _null(name)
                return pos + width
            return pos + width + n

        return walk

    return make


_legacy_string = _legacy_sized(_I16, 2, "string")
_legacy_bytes = _legacy_sized(_I32, 4, "bytes")


def _compact_string(name: str, nullable: bool) -> Walker:
    """A compact string or bytes: uvarint length + 1, 0 for null."""
    def walk(buf, pos, end):  # noqa: ANN001, ANN202
        n = buf[pos]
        if n < 0x80:  # the usual case: 1 byte of length, then n - 1 bytes
            if n == 0 and not nullable:
                raise _null(name)
            return pos + (n if n > 1 else 1)
        n, pos = read_uvarint(buf, pos)  # (a long form may still encode 0: null)
        if n == 0 and not nullable:
            raise _null(name)
        return pos + (n - 1 if n > 1 else 0)

    return walk


def _array(flexible: bool, element: Walker | None, element_size: int, name: str, nullable: bool) -> Walker:
    """An array of elements walked by `element`, or of fixed `element_size` bytes if it is None."""
    min_size = max(element_size, 1)

    def walk(buf, pos, end):  # noqa: ANN001, ANN202
        if flexible:
            n, pos = read_uvarint(buf, pos)
            count = n - 1
        else:
            (count,) = _I32(buf, pos)
            pos += 4
            if count < -1:
                raise BodyRejected(f"field {name} has array length {count}")
        if count <= 0:
            if count < 0 and not nullable:
                raise _null(name)
            return pos
        if count * min_size > end - pos:
            raise BodyRejected(f"array {name} of {count} elements cannot fit in the {end - pos} bytes left")
        if element is None:
            return pos + count * element_size
        for _ in range(count):
            pos = element(buf, pos, end)
        return pos

    return walk


def _nullable(walker: Walker) -> Walker:
    def walk(buf, pos, end):  # noqa: ANN001, ANN202
        (marker,) = _I8(buf, pos)
        return pos + 1 if marker < 0 else walker(buf, pos + 1, end)

    return walk


def _primitive(kafka_type: str, flexible: bool, name: str, nullable: bool) -> tuple[Walker | None, int]:
    """(walker, 0) for a variable-size primitive, (None, size) for a fixed one."""
    size = _FIXED_SIZES.get(kafka_type)
    if size is not None:
        return None, size
    if kafka_type == "string":
        return (_compact_string if flexible else _legacy_string)(name, nullable), 0
    if kafka_type in ("bytes", "records"):
        return (_compact_string if flexible else _legacy_bytes)(name, nullable), 0
    raise TypeError(f"no walker for kafka_type {kafka_type!r}")


def is_nullable(annotation) -> bool:  # noqa: ANN001
    """`T | None` in kio's generated classes is a nullable field; a tuple is an array."""
    return get_origin(annotation) in (UnionType, Union) and NoneType in get_args(annotation)


def _field_walker(cls: type, field, flexible: bool) -> tuple[Walker | None, int]:  # noqa: ANN001
    kind = classify_field(field)
    name = f"{cls.__name__}.{field.name}"
    nullable = is_nullable(field.type)
    if isinstance(kind, PrimitiveField):
        return _primitive(field.metadata["kafka_type"], flexible, name, nullable)
    if isinstance(kind, PrimitiveTupleField):
        element, size = _primitive(field.metadata["kafka_type"], flexible, f"{name}[]", False)
        return _array(flexible, element, size if element is None else (1 if flexible else 2),
                      name, nullable), 0
    if isinstance(kind, EntityTupleField):
        return _array(flexible, _entity_walker(kind.type_), _min_size(kind.type_), name, nullable), 0
    if isinstance(kind, EntityField):
        walker = _entity_walker(kind.type_)
        return (_nullable(walker) if nullable else walker), 0
    raise TypeError(f"cannot classify {cls.__name__}.{field.name}")


@cache
def resolved_fields(cls: type) -> list:
    """The dataclass fields of `cls` with their annotations resolved (kio's classifier needs types)."""
    hints = get_type_hints(cls)
    out = []
    for f in fields(cls):
        f = copy.copy(f)
        f.type = hints[f.name]
        out.append(f)
    return out


@cache
def _min_size(cls: type) -> int:
    """The fewest bytes an instance of `cls` can take (for the array-length bound)."""
    flexible = cls.__flexible__
    total = 1 if flexible else 0
    for f in resolved_fields(cls):
        if get_field_tag(f) is not None:
            continue
        kind = classify_field(f)
        if isinstance(kind, PrimitiveField):
            total += _FIXED_SIZES.get(f.metadata["kafka_type"]) or (1 if flexible else 2)
        elif isinstance(kind, (PrimitiveTupleField, EntityTupleField)):
            total += 1 if flexible else 4
        elif is_nullable(f.type):
            total += 1
        else:
            total += _min_size(kind.type_)
    return total


@cache
def _entity_walker(cls: type) -> Walker:
    flexible = cls.__flexible__
    steps: list[Walker] = []
    tagged: dict[int, Walker] = {}
    fixed_run = 0
    for f in resolved_fields(cls):
        walker, size = _field_walker(cls, f, flexible)
        tag = get_field_tag(f)
        if tag is not None:
            tagged[int(tag)] = walker if walker is not None else _fixed(size)
            continue
        if walker is None:
            fixed_run += size
            continue
        if fixed_run:
            steps.append(_fixed(fixed_run))
            fixed_run = 0
        steps.append(walker)
    if fixed_run:
        steps.append(_fixed(fixed_run))

    if not flexible:
        if len(steps) == 1:
            return steps[0]

        def walk(buf, pos, end):  # noqa: ANN001, ANN202
            for step in steps:
                pos = step(buf, pos, end)
            return pos

        return walk

    def walk_flexible(buf, pos, end):  # noqa: ANN001, ANN202
        for step in steps:
            pos = step(buf, pos, end)
        if buf[pos] == 0:  # no tagged fields: the usual case
            return pos + 1
        count, pos = read_uvarint(buf, pos)
        for _ in range(count):
            tag, pos = read_uvarint(buf, pos)
            size, pos = read_uvarint(buf, pos)
            stop = pos + size
            if stop > end:
                raise BodyRejected(f"tagged field {tag} runs past the end of the frame")
            step = tagged.get(tag)
            if step is not None and step(buf, pos, end) > stop:
                raise BodyRejected(f"tagged field {tag} is longer than its declared size {size}")
            pos = stop
        return pos

    return walk_flexible
