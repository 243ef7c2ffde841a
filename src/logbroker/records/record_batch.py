"""A view of one v2 record batch inside a larger buffer, and a walk over a buffer of batches.

A buffer of batches (a `.log` segment, a produce request's records, a fetch response's) is batches
back to back, each `batchLength + 12` bytes (see `records/batch.py` for the header layout).
`iter_batches` walks one using the headers alone:

- it stops cleanly, without error, when the bytes left cannot hold the next batch: fewer than 12
  bytes, or fewer than the batch's own length says. That is a torn tail (a crash mid-write, or a
  fetch response cut at max_bytes); the caller sees how far the walk got from the last batch
  yielded and reports or truncates the rest.
- it raises CorruptRecordError when a header is impossible: a length too small to hold a v2
  header, or a magic other than 2. Nothing after that point can be trusted.

It checks no CRC: `RecordBatch.is_valid` / `ensure_valid` do that, per batch, when a caller
wants it. Records are decoded (and decompressed) only by `RecordBatch.records`.

`set_log_append_time` is the one operation here that rewrites bytes covered by the CRC, so it is
the one that recomputes it.

Both `iter_batches` (while it runs) and a `RecordBatch` (while it lives) hold a memoryview of the
buffer: an mmap cannot be closed, nor a bytearray resized, until they are gone.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from logbroker.errors import CorruptRecordError
from logbroker.records.batch import (
    ATTRIBUTES_OFFSET,
    BATCH_LENGTH,
    CRC_OFFSET,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    MAGIC_OFFSET,
    MIN_BATCH_LENGTH,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    compute_crc,
    read_header,
)
from logbroker.records.compression import decompress
from logbroker.records.record import Record, decode_records

MAX_TIMESTAMP_OFFSET = 35

_ATTRIBUTES = struct.Struct(">h")
_CRC = struct.Struct(">I")
_INT64 = struct.Struct(">q")


def iter_batches(buffer, start: int = 0, end: int | None = None, *,
                 max_batch_size: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
    """Yield `(position, header)` for each complete batch in `buffer[start:end]`.

    Stops at a torn tail; raises CorruptRecordError at an impossible header or, when
    `max_batch_size` is given, at a batch larger than that (Kafka's max.message.bytes check when
    reading a log). The position of the first byte not walked is the last position yielded plus
    that batch's `size_in_bytes` (or `start` when nothing was yielded).
    """
    view = memoryview(buffer)
    if end is None:
        end = len(view)
    position = start
    while end - position >= LOG_OVERHEAD:
        (length,) = BATCH_LENGTH.unpack_from(view, position + 8)
        if length < MIN_BATCH_LENGTH:
            raise CorruptRecordError(
                f"batch at position {position} has length {length}, smaller than the minimum "
                f"v2 batch overhead ({HEADER_SIZE} bytes in all)")
        if max_batch_size is not None and length + LOG_OVERHEAD > max_batch_size:
            raise CorruptRecordError(
                f"batch at position {position} is {length + LOG_OVERHEAD} bytes, larger than the "
                f"maximum allowed {max_batch_size}")
        size = length + LOG_OVERHEAD
        if size > end - position:
            return  # torn tail
        magic = view[position + MAGIC_OFFSET]
        if magic != MAGIC:
            raise CorruptRecordError(
                f"batch at position {position} has magic {magic}; only magic {MAGIC} batches are supported")
        yield position, read_header(view, position)
        position += size


class RecordBatch:
    """One complete v2 batch at `position` in `buffer` (bytes, bytearray, memoryview, mmap).

    The view copies nothing until `records()` is called. Constructing it checks only that the
    header and the whole batch (by its length) are inside the buffer.
    """

    __slots__ = ("_view", "position", "header")

    def __init__(self, buffer, position: int = 0) -> None:
        view = memoryview(buffer)
        if len(view) - position < HEADER_SIZE:
            raise CorruptRecordError(
                f"batch at position {position}: {len(view) - position} bytes left, a v2 header needs {HEADER_SIZE}")
        header = read_header(view, position)
        if header.batch_length < MIN_BATCH_LENGTH:
            raise CorruptRecordError(
                f"batch at position {position} has length {header.batch_length}, smaller than the "
                f"minimum v2 batch overhead")
        if position + header.size_in_bytes > len(view):
            raise CorruptRecordError(
                f"batch at position {position} is {header.size_in_bytes} bytes but only "
                f"{len(view) - position} remain")
        self._view = view
        self.position = position
        self.header = header

    def __repr__(self) -> str:
        h = self.header
        return (f"RecordBatch(position={self.position}, base_offset={h.base_offset}, "
                f"last_offset={h.last_offset}, size={h.size_in_bytes}, codec={h.compression_name})")

    @property
    def size_in_bytes(self) -> int:
        return self.header.size_in_bytes

    @property
    def base_offset(self) -> int:
        return self.header.base_offset

    @property
    def last_offset(self) -> int:
        return self.header.last_offset

    @property
    def next_offset(self) -> int:
        return self.header.next_offset

    @property
    def timestamp_type(self) -> str:
        """Kafka's TimestampType name: "CreateTime" or "LogAppendTime"."""
        return "LogAppendTime" if self.header.is_log_append_time else "CreateTime"

    @property
    def delete_horizon_ms(self) -> int | None:
        """Set by compaction on batches with tombstones: stored in the baseTimestamp field."""
        return self.header.base_timestamp if self.header.has_delete_horizon else None

    def buffer(self) -> memoryview:
        """The batch's bytes, header included (a view, not a copy)."""
        return self._view[self.position:self.position + self.size_in_bytes]

    def records_section(self) -> memoryview:
        """The bytes after the header, compressed if the batch is."""
        return self._view[self.position + HEADER_SIZE:self.position + self.size_in_bytes]

    def compute_crc(self) -> int:
        return compute_crc(self._view, self.position, self.size_in_bytes)

    def is_valid(self) -> bool:
        """Magic 2 and the stored CRC-32C equals the computed one."""
        return self.header.magic == MAGIC and self.header.crc == self.compute_crc()

    def ensure_valid(self) -> None:
        """Raise CorruptRecordError unless `is_valid()`."""
        if self.header.magic != MAGIC:
            raise CorruptRecordError(
                f"batch at position {self.position} has magic {self.header.magic}, expected {MAGIC}")
        computed = self.compute_crc()
        if computed != self.header.crc:
            raise CorruptRecordError(
                f"batch at position {self.position} is corrupt (stored crc = {self.header.crc}, "
                f"computed crc = {computed})")

    def records(self) -> list[Record]:
        """Decompress (when needed) and decode every record. Raises CorruptRecordError."""
        h = self.header
        data = self.records_section()
        if h.compression_codec:
            data = decompress(h.compression_codec, data)
        return decode_records(
            data, h.records_count, base_offset=h.base_offset, base_timestamp=h.base_timestamp,
            base_sequence=h.base_sequence,
            log_append_time_ms=h.max_timestamp if h.is_log_append_time else None)

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records())


def iter_record_batches(buffer, start: int = 0, end: int | None = None) -> Iterator[RecordBatch]:
    """`iter_batches`, yielding RecordBatch views."""
    for position, _ in iter_batches(buffer, start, end):
        yield RecordBatch(buffer, position)


def set_log_append_time(buf: bytearray | memoryview, position: int, timestamp_ms: int) -> None:
    """Mark the batch at `position` as LogAppendTime stamped `timestamp_ms`, in place.

    Sets the timestamp-type attribute bit, writes maxTimestamp, and recomputes the CRC, since both
    fields lie inside the CRC'd range. Record deltas stay as they are: readers of a LogAppendTime
    batch take maxTimestamp as every record's timestamp. The whole batch must be in `buf`.
    """
    view = memoryview(buf)
    (length,) = BATCH_LENGTH.unpack_from(view, position + 8)
    size = length + LOG_OVERHEAD
    if length < MIN_BATCH_LENGTH or position + size > len(view):
        raise CorruptRecordError(f"no complete batch at position {position} to stamp")
    (attributes,) = _ATTRIBUTES.unpack_from(view, position + ATTRIBUTES_OFFSET)
    _ATTRIBUTES.pack_into(view, position + ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_MASK)
    _INT64.pack_into(view, position + MAX_TIMESTAMP_OFFSET, timestamp_ms)
    _CRC.pack_into(view, position + CRC_OFFSET, compute_crc(view, position, size))
