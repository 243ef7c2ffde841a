"""Primitive encodings of the Kafka protocol, for the hand-written encoders.

Big-endian fixed-width integers; "legacy" strings (int16 length, -1 = null), bytes and arrays
(int32 length, -1 = null) in non-flexible versions; "compact" ones (unsigned varint of length + 1,
0 = null) and tagged-field sections in flexible versions (KIP-482). Every function returns `bytes`
so the encoders can collect parts in a list and join them once.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from uuid import UUID

from logbroker.records.varint import encode_uvarint as uvarint

I16 = struct.Struct(">h")
I32 = struct.Struct(">i")
I32_I32 = struct.Struct(">ii")

NULL_LEGACY_STRING = b"\xff\xff"
NULL_LEGACY_ARRAY = b"\xff\xff\xff\xff"
NULL_COMPACT = b"\x00"  # null compact string / bytes / array
NO_TAGGED_FIELDS = b"\x00"
ZERO_UUID = bytes(16)


def legacy_string(value: str) -> bytes:
    data = value.encode()
    return I16.pack(len(data)) + data


def legacy_nullable_string(value: str | None) -> bytes:
    if value is None:
        return NULL_LEGACY_STRING
    data = value.encode()
    return I16.pack(len(data)) + data


def compact_string(value: str) -> bytes:
    data = value.encode()
    return uvarint(len(data) + 1) + data


def compact_nullable_string(value: str | None) -> bytes:
    if value is None:
        return NULL_COMPACT
    data = value.encode()
    return uvarint(len(data) + 1) + data


def string(value: str | None, flexible: bool) -> bytes:
    """A (nullable) string in the encoding of a flexible or non-flexible version."""
    if value is None:
        return NULL_COMPACT if flexible else NULL_LEGACY_STRING
    data = value.encode()
    if flexible:
        return uvarint(len(data) + 1) + data
    return I16.pack(len(data)) + data


def array_length(length: int | None, flexible: bool) -> bytes:
    """The length prefix of an array; None for a null array."""
    if length is None:
        return NULL_COMPACT if flexible else NULL_LEGACY_ARRAY
    return uvarint(length + 1) if flexible else I32.pack(length)


_INT32_ARRAYS: dict[int, struct.Struct] = {}


def int32_array(values: Sequence[int], flexible: bool) -> bytes:
    """A non-null array of int32 (broker ids in Metadata)."""
    n = len(values)
    packer = _INT32_ARRAYS.get(n)
    if packer is None:
        packer = struct.Struct(f">{n}i")
        if n < 1024:
            _INT32_ARRAYS[n] = packer
    return (uvarint(n + 1) if flexible else I32.pack(n)) + packer.pack(*values)


def uuid_bytes(value: UUID | bytes | None) -> bytes:
    """A uuid field: 16 bytes, the zero uuid for None."""
    if value is None:
        return ZERO_UUID
    if isinstance(value, UUID):
        return value.bytes
    if len(value) != 16:
        raise ValueError(f"a uuid is 16 bytes, got {len(value)}")
    return bytes(value)


def tagged_fields(fields: Sequence[tuple[int, bytes]]) -> bytes:
    """A tagged-field section from (tag, encoded value) pairs, which must be sorted by tag."""
    if not fields:
        return NO_TAGGED_FIELDS
    parts = [uvarint(len(fields))]
    for tag, value in fields:
        parts.append(uvarint(tag))
        parts.append(uvarint(len(value)))
        parts.append(value)
    return b"".join(parts)


def read_uvarint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """Read an unsigned varint of at most 5 bytes (32 bits) at `pos`: (value, next position).

    IndexError past the end; ValueError for a sixth continuation byte.
    """
    byte = buf[pos]
    if byte < 0x80:
        return byte, pos + 1
    second = buf[pos + 1]
    if second < 0x80:  # two bytes: a record batch's length (128 B - 16 KiB), the usual case
        return (byte & 0x7F) | (second << 7), pos + 2
    value = (byte & 0x7F) | ((second & 0x7F) << 7)
    pos += 1
    shift = 14
    while True:
        pos += 1
        byte = buf[pos]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos + 1
        shift += 7
        if shift > 28:
            raise ValueError("unsigned varint longer than 5 bytes")


def skip_tagged_fields(buf: bytes | memoryview, pos: int, end: int) -> int:
    """The position after a tagged-field section whose fields are all skipped (none is known
    where it is used). ValueError if a field runs past `end`, IndexError if the section does."""
    if buf[pos] == 0:  # no tagged fields: the usual case
        return pos + 1
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
        if pos > end:
            raise ValueError(f"tagged field {tag} runs past the end")
    return pos
