"""One record of a v2 batch, and the records section codec.

Each record in the (decompressed) records section is:

    length          varint   bytes after this field
    attributes      int8     unused, always 0
    timestampDelta  varlong  timestamp - batch baseTimestamp
    offsetDelta     varint   offset - batch baseOffset
    keyLength       varint   -1 for a null key
    key             bytes
    valueLength     varint   -1 for a null value
    value           bytes
    headersCount    varint
    headers         [headerKeyLength varint, headerKey utf-8, headerValueLength varint (-1 null),
                     headerValue bytes] * headersCount

Decoding mirrors Kafka's DefaultRecord.readFrom: a record whose fields do not add up to its
length, a negative header count or header key length, or a section whose record count differs
from the batch header's is a CorruptRecordError. Under LogAppendTime every record's timestamp is
the batch's maxTimestamp, whatever its delta says.

Only features that need records decode them (compaction, ListOffsets by timestamp, dump-log,
clients): produce and fetch never do.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from logbroker.errors import CorruptRecordError
from logbroker.records.batch import NO_SEQUENCE
from logbroker.records.varint import decode_varint, decode_varlong, encode_varint, encode_varlong

Header = tuple[str, "bytes | None"]


@dataclass(frozen=True, slots=True)
class Record:
    """A decoded record. `sequence` is the producer sequence (-1 without idempotence).

    Header keys are str (utf-8 on the wire, decoded with replacement as Java does); header
    values, keys and values are bytes or None (null).
    """

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()
    sequence: int = NO_SEQUENCE

    @property
    def key_size(self) -> int:
        return -1 if self.key is None else len(self.key)

    @property
    def value_size(self) -> int:
        return -1 if self.value is None else len(self.value)


# --- decoding -----------------------------------------------------------------------------

def _read_bytes(buf, position: int, end: int, what: str) -> tuple[bytes | None, int]:
    length, position = decode_varint(buf, position)
    if length < 0:
        return None, position
    stop = position + length
    if stop > end:
        raise CorruptRecordError(f"record {what} of {length} bytes runs past the end of its record")
    return bytes(buf[position:stop]), stop


def decode_record(buf, position: int, *, base_offset: int, base_timestamp: int,
                  base_sequence: int = NO_SEQUENCE,
                  log_append_time_ms: int | None = None) -> tuple[Record, int]:
    """Decode the record at `position` of a records section: `(record, next_position)`.

    `buf` is fastest as bytes. Every read stays inside the record's own length.
    """
    # Parsing records is the costly part of every per-record feature (2-3 us a record), so the
    # one-byte varint case, by far the commonest for small lengths and deltas, is inlined below.
    size = len(buf)
    b = buf[position] if position < size else 0x80
    if b < 0x80:
        length, start = (b >> 1) ^ -(b & 1), position + 1
    else:
        length, start = decode_varint(buf, position)
    end = start + length
    if length < 0 or end > size:
        raise CorruptRecordError(
            f"record at position {position} claims {length} bytes but {size - start} remain")
    pos = start + 1  # attributes: unused
    b = buf[pos] if pos < end else 0x80
    if b < 0x80:
        timestamp_delta = (b >> 1) ^ -(b & 1)
        pos += 1
    else:
        timestamp_delta, pos = decode_varlong(buf, pos)
    b = buf[pos] if pos < end else 0x80
    if b < 0x80:
        offset_delta = (b >> 1) ^ -(b & 1)
        pos += 1
    else:
        offset_delta, pos = decode_varint(buf, pos)
    b = buf[pos] if pos < end else 0x80
    if b == 1:
        key = None
        pos += 1
    elif not b & 0x81 and pos + 1 + (b >> 1) <= end:  # a short key (under 64 bytes)
        key = bytes(buf[pos + 1:pos + 1 + (b >> 1)])
        pos += 1 + (b >> 1)
    else:
        key, pos = _read_bytes(buf, pos, end, "key")
    b = buf[pos] if pos < end else 0x80
    if b == 1:
        value = None
        pos += 1
    else:
        value, pos = _read_bytes(buf, pos, end, "value")
    b = buf[pos] if pos < end else 0x80
    if b == 0:
        headers: tuple[Header, ...] = ()
        pos += 1
    else:
        count, pos = decode_varint(buf, pos)
        if count < 0:
            raise CorruptRecordError(f"record at position {position} has a negative header count {count}")
        items = []
        for _ in range(count):
            key_length, pos = decode_varint(buf, pos)
            if key_length < 0:
                raise CorruptRecordError(f"record at position {position} has a negative header key size")
            if pos + key_length > end:
                raise CorruptRecordError(f"record at position {position}: header key runs past the record")
            header_key = bytes(buf[pos:pos + key_length]).decode("utf-8", "replace")
            pos += key_length
            header_value, pos = _read_bytes(buf, pos, end, "header value")
            items.append((header_key, header_value))
        headers = tuple(items)
    if pos != end:
        raise CorruptRecordError(
            f"record at position {position}: expected to read {length} bytes but read {pos - start}")
    if log_append_time_ms is not None:
        timestamp = log_append_time_ms
    else:
        timestamp = base_timestamp + timestamp_delta
    if base_sequence == NO_SEQUENCE:
        sequence = NO_SEQUENCE
    else:
        sequence = (base_sequence + offset_delta) % 0x80000000
    return Record(base_offset + offset_delta, timestamp, key, value, headers, sequence), end


def decode_records(data, count: int, *, base_offset: int, base_timestamp: int,
                   base_sequence: int = NO_SEQUENCE,
                   log_append_time_ms: int | None = None) -> list[Record]:
    """Decode a whole (decompressed) records section holding exactly `count` records."""
    if count < 0:
        raise CorruptRecordError(f"negative record count {count}")
    if not isinstance(data, bytes):
        data = bytes(data)
    records = []
    position = 0
    end = len(data)
    for _ in range(count):
        if position >= end:
            raise CorruptRecordError(
                f"batch declares {count} records but its records section ends after {len(records)}")
        record, position = decode_record(data, position, base_offset=base_offset,
                                         base_timestamp=base_timestamp, base_sequence=base_sequence,
                                         log_append_time_ms=log_append_time_ms)
        records.append(record)
    if position != end:
        raise CorruptRecordError(
            f"batch declares {count} records but {end - position} bytes remain after them")
    return records


# --- encoding -----------------------------------------------------------------------------

def _encode_bytes(out: bytearray, data) -> None:
    if data is None:
        out += b"\x01"  # zigzag(-1)
    else:
        out += encode_varint(len(data))
        out += data


def encode_record(out: bytearray, *, offset_delta: int, timestamp_delta: int, key, value,
                  headers: Iterable[tuple[str | bytes, object]] = ()) -> None:
    """Append one record (length prefix included) to `out`.

    `key`, `value` and header values are bytes-like or None; header keys str (utf-8) or bytes.
    """
    body = bytearray(b"\x00")  # attributes
    body += encode_varlong(timestamp_delta)
    body += encode_varint(offset_delta)
    _encode_bytes(body, key)
    _encode_bytes(body, value)
    headers = list(headers)
    body += encode_varint(len(headers))
    for header_key, header_value in headers:
        raw_key = header_key.encode("utf-8") if isinstance(header_key, str) else header_key
        if raw_key is None:
            raise ValueError("a header key cannot be null")
        _encode_bytes(body, raw_key)
        _encode_bytes(body, header_value)
    out += encode_varint(len(body))
    out += body

