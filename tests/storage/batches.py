"""Helpers for storage tests: small v2 batches, and the index layout architecture.md §2 prescribes.

`expected_indexes` restates the spec's index rule on its own (no storage code), so format tests
compare what the segment wrote against the rule, not against itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from logbroker.records.batch import NO_TIMESTAMP, BatchHeader, read_header
from logbroker.records.builder import build_batch

BASE_TIMESTAMP = 1_700_000_000_000


def make_batch(base_offset: int, count: int = 1, *, timestamp: int = BASE_TIMESTAMP,
               timestamps: list[int] | None = None, value_size: int = 10,
               compression: str = "none", partition_leader_epoch: int = 0,
               log_append_time: bool = False) -> bytes:
    """A valid v2 batch of `count` records at offsets base_offset.., timestamps `timestamps`
    (default: all `timestamp`), values of `value_size` bytes."""
    if timestamps is None:
        timestamps = [timestamp] * count
    assert len(timestamps) == count
    records = [(None, bytes([i % 251]) * value_size, (), ts) for i, ts in enumerate(timestamps)]
    return build_batch(records, base_offset=base_offset, compression=compression,
                       partition_leader_epoch=partition_leader_epoch, log_append_time=log_append_time)


def append_batch(segment, data: bytes) -> BatchHeader:
    """Append one batch through LogSegment.append, with the arguments Log.append would pass."""
    header = read_header(data)
    segment.append(largest_offset=header.last_offset, largest_timestamp=header.max_timestamp,
                   offset_of_max_timestamp=header.last_offset, records=data, first_offset=header.base_offset)
    return header


@dataclass
class Layout:
    positions: list[int]            # where each batch starts
    offset_entries: list[tuple[int, int]]   # (absolute offset, position)
    time_entries: list[tuple[int, int]]     # (timestamp, absolute offset), before the final entry
    final_time_entry: tuple[int, int] | None  # added on roll/close if above the last one


def expected_indexes(batches: list[bytes], index_interval_bytes: int) -> Layout:
    """The index entries architecture.md §2 requires for these batches appended one per append."""
    positions, offset_entries, time_entries = [], [], []
    position = 0
    since_last_entry = 0
    max_ts, max_ts_offset = NO_TIMESTAMP, -1
    last_time_entry_ts = NO_TIMESTAMP
    for data in batches:
        header = read_header(data)
        positions.append(position)
        if header.max_timestamp > max_ts:
            max_ts, max_ts_offset = header.max_timestamp, header.last_offset
        if since_last_entry > index_interval_bytes:
            offset_entries.append((header.last_offset, position))
            if max_ts > last_time_entry_ts:
                time_entries.append((max_ts, max_ts_offset))
                last_time_entry_ts = max_ts
            since_last_entry = 0
        since_last_entry += len(data)
        position += len(data)
    final = (max_ts, max_ts_offset) if max_ts > last_time_entry_ts else None
    return Layout(positions, offset_entries, time_entries, final)


def offset_pairs(index) -> list[tuple[int, int]]:
    return [(e.offset, e.position) for e in index.all_entries()]


def time_pairs(index) -> list[tuple[int, int]]:
    return [(e.timestamp, e.offset) for e in index.all_entries()]
