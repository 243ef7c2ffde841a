"""Variable-length integers as Kafka's record format writes them (protobuf style).

A varint is an int32 and a varlong an int64, both zigzag encoded so that small negative numbers
stay short: `(n << 1) ^ (n >> 63)`, then written 7 bits at a time, least significant group first,
with the high bit of each byte set when more bytes follow. A varint takes at most 5 bytes, a
varlong at most 10. The unsigned forms (no zigzag) are what the flexible protocol versions use
for compact lengths and tagged fields.

Encoding a value out of range is a programming error (ValueError). Decoding bytes that run past
the end of the buffer or past the maximum length is corrupt input (CorruptRecordError), since the
bytes came from a client or a file.

All functions are pure; the decoders take any object supporting indexing by int to a byte value
(bytes, bytearray, memoryview) and return `(value, next_position)`.
"""

from __future__ import annotations

from logbroker.errors import CorruptRecordError

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
UINT32_MAX = (1 << 32) - 1

VARINT_MAX_BYTES = 5
VARLONG_MAX_BYTES = 10


_SMALL_UNSIGNED = [bytes((n,)) for n in range(128)]


def encode_uvarint(n: int) -> bytes:
    """The unsigned varint of a non-negative `n`, unchecked: the hot path of the protocol
    encoders (compact lengths, tagged fields). `encode_unsigned_varint` checks the uint32 range."""
    if n < 0x80:
        return _SMALL_UNSIGNED[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def encode_varint(value: int) -> bytes:
    """Zigzag-encode an int32."""
    if not INT32_MIN <= value <= INT32_MAX:
        raise ValueError(f"varint out of int32 range: {value}")
    return encode_uvarint((value << 1) ^ (value >> 31))


def encode_varlong(value: int) -> bytes:
    """Zigzag-encode an int64."""
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"varlong out of int64 range: {value}")
    return encode_uvarint((value << 1) ^ (value >> 63))


def encode_unsigned_varint(value: int) -> bytes:
    """Encode a uint32 without zigzag (compact lengths, tagged fields)."""
    if not 0 <= value <= UINT32_MAX:
        raise ValueError(f"unsigned varint out of uint32 range: {value}")
    return encode_uvarint(value)


def write_varint(out: bytearray, value: int) -> None:
    """Append the zigzag varint of an int32 to `out`."""
    out += encode_varint(value)


def write_varlong(out: bytearray, value: int) -> None:
    """Append the zigzag varlong of an int64 to `out`."""
    out += encode_varlong(value)


def _size_unsigned(n: int) -> int:
    size = 1
    while n >= 0x80:
        n >>= 7
        size += 1
    return size


def size_of_varint(value: int) -> int:
    """Bytes taken by the zigzag varint of `value` (an int32)."""
    return _size_unsigned(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def size_of_varlong(value: int) -> int:
    """Bytes taken by the zigzag varlong of `value` (an int64)."""
    return _size_unsigned(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def _decode_unsigned(buf, position: int, max_bytes: int, what: str) -> tuple[int, int]:
    result = 0
    shift = 0
    end = len(buf)
    for i in range(position, position + max_bytes):
        if i >= end:
            raise CorruptRecordError(f"{what} at position {position} runs past the end of the buffer")
        b = buf[i]
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, i + 1
        shift += 7
    raise CorruptRecordError(f"{what} at position {position} is longer than {max_bytes} bytes")


def _decode_short(buf, position: int) -> tuple[int, int] | None:
    """The unsigned value of a varint of 1 to 3 bytes, or None when it is longer or truncated."""
    # Record lengths, key and value lengths and deltas nearly always fit in 3 bytes (values below
    # 2^21): unrolling those cases makes record parsing about twice as fast as the general loop.
    try:
        b = buf[position]
        if b < 0x80:
            return b, position + 1
        n = b & 0x7F
        b = buf[position + 1]
        if b < 0x80:
            return n | (b << 7), position + 2
        n |= (b & 0x7F) << 7
        b = buf[position + 2]
        if b < 0x80:
            return n | (b << 14), position + 3
    except IndexError:
        pass
    return None


def decode_varint(buf, position: int = 0) -> tuple[int, int]:
    """Decode a zigzag varint (int32) at `position`: `(value, next_position)`."""
    short = _decode_short(buf, position) if position >= 0 else None
    if short is not None:
        n, next_position = short
        return (n >> 1) ^ -(n & 1), next_position
    n, next_position = _decode_unsigned(buf, position, VARINT_MAX_BYTES, "varint")
    if n > UINT32_MAX:
        raise CorruptRecordError(f"varint at position {position} overflows 32 bits")
    return (n >> 1) ^ -(n & 1), next_position


def decode_varlong(buf, position: int = 0) -> tuple[int, int]:
    """Decode a zigzag varlong (int64) at `position`: `(value, next_position)`."""
    short = _decode_short(buf, position) if position >= 0 else None
    if short is not None:
        n, next_position = short
        return (n >> 1) ^ -(n & 1), next_position
    n, next_position = _decode_unsigned(buf, position, VARLONG_MAX_BYTES, "varlong")
    if n > 0xFFFFFFFFFFFFFFFF:
        raise CorruptRecordError(f"varlong at position {position} overflows 64 bits")
    return (n >> 1) ^ -(n & 1), next_position


def decode_unsigned_varint(buf, position: int = 0) -> tuple[int, int]:
    """Decode an unsigned varint (uint32, no zigzag): `(value, next_position)`."""
    n, next_position = _decode_unsigned(buf, position, VARINT_MAX_BYTES, "unsigned varint")
    if n > UINT32_MAX:
        raise CorruptRecordError(f"unsigned varint at position {position} overflows 32 bits")
    return n, next_position
