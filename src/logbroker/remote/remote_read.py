"""Reading a fetch's worth of records out of a remote segment's bytes: pure functions.

A remote read finds the position to start from in the segment's offset index (8-byte entries,
relative offset int32 + position int32, big-endian: the largest entry at or below the fetch
offset), reads a range of the .log from there, and keeps the whole batches from the one holding
the fetch offset on, as many as fit in the fetch's bytes (the first one whole with
min_one_message, as a local read does).
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from logbroker.records.batch import read_header

_INDEX_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_LENGTH = struct.Struct(">qi")  # baseOffset, batchLength
LOG_OVERHEAD = 12
HEADER_SIZE = 61


def index_position(index: bytes, base_offset: int, target_offset: int) -> int:
    """The file position of the largest offset index entry at or below `target_offset` (0 when
    there is none). Entries past the last real one (zeros after the first) are ignored."""
    relative = target_offset - base_offset
    count = len(index) // _INDEX_ENTRY.size
    lo, hi, found = 0, count - 1, 0
    while lo <= hi:
        mid = (lo + hi) // 2
        offset, position = _INDEX_ENTRY.unpack_from(index, mid * _INDEX_ENTRY.size)
        if mid > 0 and offset == 0 and position == 0:  # preallocated tail
            hi = mid - 1
            continue
        if offset <= relative:
            found, lo = position, mid + 1
        else:
            hi = mid - 1
    return found


def time_index_offset(index: bytes, base_offset: int, timestamp: int) -> int:
    """Kafka's TimeIndex.lookup: the offset of the last entry (12 bytes: timestamp int64,
    relative offset int32) whose timestamp is at most `timestamp`; the base offset when none."""
    found = base_offset
    for position in range(0, len(index) - len(index) % _TIME_ENTRY.size, _TIME_ENTRY.size):
        entry_timestamp, relative = _TIME_ENTRY.unpack_from(index, position)
        if entry_timestamp > timestamp or (position and entry_timestamp == 0 and relative == 0):
            break
        found = base_offset + relative
    return found


class CorruptRemoteBatchError(ValueError):
    """Bytes read from a remote segment that are no record batch (a garbage object or index)."""


def batch_size_at(data: bytes, position: int) -> int | None:
    """The size of the batch starting at `position`, or None when `data` ends before its length.
    CorruptRemoteBatchError for a length no batch has (shorter than a batch header)."""
    if len(data) - position < LOG_OVERHEAD:
        return None
    size = LOG_OVERHEAD + _LENGTH.unpack_from(data, position)[1]
    if size < HEADER_SIZE:
        raise CorruptRemoteBatchError(f"no record batch at position {position}: length {size - LOG_OVERHEAD}")
    return size


def select_batches(data: bytes, *, fetch_offset: int, max_bytes: int,
                   min_one_message: bool) -> tuple[int, int, int | None]:
    """Where the answer lies in `data` (read from a batch boundary): (start, end, needed) — the
    whole batches from the first that holds `fetch_offset` to the last that fits `max_bytes`.
    `needed` is the size of the first such batch when `data` ends inside it and it must go whole
    (min_one_message), else None; start == end means nothing to send from `data`."""
    position, start = 0, None
    while True:
        size = batch_size_at(data, position)
        if size is None or position + min(size, HEADER_SIZE) > len(data):
            break
        header = read_header(data, position)
        if header.last_offset < fetch_offset:
            position += size
            continue
        if start is None:
            start = position
        taken = position - start
        if taken + size > max_bytes and (taken or not min_one_message):
            break
        if position + size > len(data):
            return (start, position, size) if taken == 0 else (start, position, None)
        position += size
    if start is None:
        return position, position, None
    return start, position, None


class PendingRemoteRead(NamedTuple):
    """A fetch partition's records still to be read from the remote store: what the fetch path
    puts in a FetchResult until RemoteLogManager.complete_reads replaces it with the bytes.
    `size` is the byte budget it may use (so later partitions of the fetch get the rest)."""

    fetch_offset: int
    size: int
    min_one_message: bool
    read_committed: bool
