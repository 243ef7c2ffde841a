"""Log compaction (Kafka's Cleaner): keep the latest record of each key, crash-safely.

One cleaning of one log, given the cleanable range [first dirty offset, first uncleanable offset)
chosen by `cleaner_manager.py`:

1. Build the offset map (key → latest offset) over the dirty range, batch by batch, until the
   range ends or the map is full (`OffsetMap`, bounded by log.cleaner.dedupe.buffer.size). The
   map then covers [first dirty, end offset): `end offset` is the next checkpoint.
2. Group the segments from the log start up to the end offset so each group's cleaned result
   fits segment.bytes and the indexes (Kafka's groupSegmentsBySize).
3. For each group, write the retained batches into `<base>.log.cleaned` (+ `.index.cleaned`,
   `.timeindex.cleaned`), flush it, then swap it into the log (`Log.replace_segments`).

What is retained (Kafka's MemoryRecords.filterTo with the cleaner's filter):
- a record past the map's latest offset (not deduplicated this round);
- else a keyed record whose offset is >= the map's offset for its key, if it has a value, or if
  it is a tombstone whose batch has no delete horizon yet or one still in the future (KIP-534).
  Records without a key are dropped (a compacted topic refuses them anyway).
- A batch whose records are all retained is copied byte for byte, unless it holds a tombstone
  and no delete horizon: then it is rebuilt with deleteHorizonMs = now + delete.retention.ms
  (in baseTimestamp, attribute bit 6), so a later cleaning past that time drops the tombstone.
- A batch that loses records is rebuilt with the same base offset, last offset delta, producer
  id/epoch/base sequence, partition leader epoch, attributes and codec; the retained records keep
  their bytes (their offset and timestamp deltas are unchanged, as baseOffset and baseTimestamp
  are).
- A batch that loses every record is dropped, except the last data batch of a producer the
  producer state still tracks (or its last marker, when it has no data batch left): that one is
  kept as an empty batch (header only), so the producer's last sequence and epoch survive
  cleaning and a restart (Kafka's RETAIN_EMPTY).
- Transactions (cleaned_txn_metadata.py, Kafka's rules): the cleanable range ends at the first
  unstable offset (cleaner_manager.py), so every transaction met is decided. Batches of aborted
  transactions (from the .txnindex files) are dropped and their keys never enter the map;
  committed transactional batches are compacted like any other. Markers go in two phases: once
  no data of its transaction is left before it, a marker is stamped with a delete horizon (now +
  delete.retention.ms) and dropped by a cleaning after that time. An ABORT marker that is kept
  carries its AbortedTxn into the cleaned segment's `.txnindex` (renamed with the other files).

Crash safety, Kafka's protocol, matched by LogLoader (log_loader.py):
    write `.cleaned` and fsync it → (under the log's lock) rename to `.swap` → put it in the
    segment list → rename the replaced segments `.deleted` (removed file.delete.delay.ms later)
    → rename `.swap` to the final names → (after the lock) fsync the directory. The
    cleaner-offset-checkpoint moves only after every group is swapped.
A crash before the `.swap` rename leaves `.cleaned` files, which loading deletes; after it, the
`.swap` files are complete and loading finishes the swap (deleting the segments they replace,
which lie in [swap base, swap's next offset)). Either way nothing is lost.

Threads: runs in a worker thread. It reads rolled (immutable) segments without the log's lock
and takes the lock only for the swap, after checking that the segments it cleaned are still
the log's (retention or truncation meanwhile aborts that group). The record scans release the
GIL now and then (`time.sleep(0)`), so the event loop's produce and fetch are not held up.
"""

from __future__ import annotations

import logging
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from logbroker.errors import CorruptRecordError, KafkaStorageError
from logbroker.records.batch import (
    CRC_OFFSET,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    NO_TIMESTAMP,
    BatchHeader,
    compute_crc,
)
from logbroker.records.builder import build_batch
from logbroker.records.compression import compress, decompress
from logbroker.records.control import read_end_txn_marker
from logbroker.records.record import decode_records
from logbroker.records.varint import decode_varint, decode_varlong
from logbroker.storage.cleaned_txn_metadata import CleanedTransactionMetadata
from logbroker.storage.log_segment import CLEANED_FILE_SUFFIX, LogSegment

log = logging.getLogger("kafka.log.LogCleaner")

DEFAULT_DEDUPE_BUFFER_SIZE = 128 * 1024 * 1024
DEFAULT_LOAD_FACTOR = 0.9
INT32_MAX = (1 << 31) - 1
# What one map entry costs in a Python dict keyed by the key bytes: the bytes object (33 + its
# length), the int offset (32), and the dict's share of slots and entries (~48).
_ENTRY_OVERHEAD_BYTES = 113
_YIELD_EVERY_BYTES = 32 * 1024

_LAST_OFFSET_DELTA = struct.Struct(">i")  # at 23
_CRC = struct.Struct(">I")


class SimulatedCrash(BaseException):
    """Raised by a test's crash hook: a BaseException, so no cleanup handler runs, as if the
    process had died at that step."""


# --- the offset map ----------------------------------------------------------------------------


class OffsetMap:
    """key → latest offset over the dirty range (Kafka's SkimpyOffsetMap, as a dict).

    Memory is bounded by an estimate: each entry costs its key's length plus a fixed overhead,
    and the map counts itself full at `load_factor` of `memory_bytes`. `latest_offset` is the
    last offset of the last batch wholly indexed; records past it were not deduplicated.
    Invariant: every offset in the map is <= latest_offset.
    """

    def __init__(self, memory_bytes: int = DEFAULT_DEDUPE_BUFFER_SIZE, *,
                 load_factor: float = DEFAULT_LOAD_FACTOR) -> None:
        self.memory_bytes = memory_bytes
        self.budget_bytes = int(memory_bytes * load_factor)
        self._map: dict[bytes, int] = {}
        self._used_bytes = 0
        self.latest_offset = -1

    def __len__(self) -> int:
        return len(self._map)

    @property
    def used_bytes(self) -> int:
        return self._used_bytes

    def clear(self) -> None:
        self._map.clear()
        self._used_bytes = 0
        self.latest_offset = -1

    def get(self, key: bytes, default: int = -1) -> int:
        return self._map.get(key, default)

    def put_all(self, entries: Sequence[tuple[bytes, int]], last_offset: int) -> bool:
        """Index one batch's (key, offset) pairs and move latest_offset to its last offset.
        Refuses (False, nothing changed) when the batch might not fit, unless the map is empty,
        so every round makes progress."""
        cost = sum(len(k) for k, _ in entries) + _ENTRY_OVERHEAD_BYTES * len(entries)
        if self._map and self._used_bytes + cost > self.budget_bytes:
            return False
        m = self._map
        for key, offset in entries:
            if key not in m:
                self._used_bytes += len(key) + _ENTRY_OVERHEAD_BYTES
            m[key] = offset
        self.latest_offset = last_offset
        return True


# --- record scanning ---------------------------------------------------------------------------


def records_section(header: BatchHeader, data) -> bytes:
    """A batch's records section, decompressed."""
    body = data[HEADER_SIZE:header.size_in_bytes]
    if header.compression_codec:
        return decompress(header.compression_codec, body)
    return bytes(body)


def scan_records(body: bytes, count: int) -> list[tuple[int, int, int, int, bytes | None, bool]]:
    """(start, end, offset delta, timestamp delta, key, has value) of each record in a records
    section, without copying values or parsing headers (the cleaner needs only these).
    Raises CorruptRecordError."""
    try:
        return _scan_records(body, count)
    except IndexError:
        raise CorruptRecordError("a record runs past the end of its batch") from None


def _scan_records(body: bytes, count: int) -> list[tuple[int, int, int, int, bytes | None, bool]]:
    out = []
    pos = 0
    size = len(body)
    for _ in range(count):
        if pos >= size:
            raise CorruptRecordError(f"records section ends after {len(out)} of {count} records")
        start = pos
        b = body[pos]
        if b < 0x80:
            length, pos = (b >> 1) ^ -(b & 1), pos + 1
        else:
            length, pos = decode_varint(body, pos)
        end = pos + length
        if length < 0 or end > size:
            raise CorruptRecordError(f"record at {start} claims {length} bytes, {size - pos} remain")
        pos += 1  # attributes
        b = body[pos]
        if b < 0x80:
            ts_delta, pos = (b >> 1) ^ -(b & 1), pos + 1
        else:
            ts_delta, pos = decode_varlong(body, pos)
        b = body[pos]
        if b < 0x80:
            offset_delta, pos = (b >> 1) ^ -(b & 1), pos + 1
        else:
            offset_delta, pos = decode_varint(body, pos)
        b = body[pos]
        if b < 0x80:
            key_length, pos = (b >> 1) ^ -(b & 1), pos + 1
        else:
            key_length, pos = decode_varint(body, pos)
        if key_length < 0:
            key = None
        else:
            if pos + key_length > end:
                raise CorruptRecordError(f"record at {start}: key runs past the record")
            key = body[pos:pos + key_length]
            pos += key_length
        b = body[pos] if pos < end else 0x80
        has_value = b != 1  # zigzag(-1): a null value, a tombstone
        out.append((start, end, offset_delta, ts_delta, key, has_value))
        pos = end
    if pos != size:
        raise CorruptRecordError(f"{size - pos} bytes remain after the {count} records of a batch")
    return out


def empty_batch(header: BatchHeader) -> bytes:
    """The header-only batch Kafka keeps for a producer's last batch once all its records are
    cleaned away: same offsets, producer fields, timestamp type, transactional and control flags;
    no codec, no records, baseTimestamp -1."""
    attributes = header.attributes & 0x38  # timestamp type, transactional, control
    buf = bytearray(HEADER_SIZE)
    HEADER.pack_into(buf, 0, header.base_offset, HEADER_SIZE - LOG_OVERHEAD,
                     header.partition_leader_epoch, MAGIC, 0, attributes, header.last_offset_delta,
                     NO_TIMESTAMP, header.max_timestamp, header.producer_id, header.producer_epoch,
                     header.base_sequence, 0)
    _CRC.pack_into(buf, CRC_OFFSET, compute_crc(buf, 0, HEADER_SIZE))
    return bytes(buf)


def _with_last_offset_delta(batch: bytes, last_offset_delta: int) -> bytes:
    buf = bytearray(batch)
    _LAST_OFFSET_DELTA.pack_into(buf, 23, last_offset_delta)
    _CRC.pack_into(buf, CRC_OFFSET, compute_crc(buf, 0, len(buf)))
    return bytes(buf)


def _rebuild_raw(header: BatchHeader, body: bytes, kept, max_timestamp: int) -> bytes:
    """The batch with only the `kept` records, whose bytes are copied as they are."""
    records = b"".join(body[start:end] for start, end, *_ in kept)
    if header.compression_codec:
        records = compress(header.compression_codec, records)
    size = HEADER_SIZE + len(records)
    buf = bytearray(size)
    HEADER.pack_into(buf, 0, header.base_offset, size - LOG_OVERHEAD, header.partition_leader_epoch,
                     MAGIC, 0, header.attributes, header.last_offset_delta, header.base_timestamp,
                     max_timestamp, header.producer_id, header.producer_epoch,
                     header.base_sequence, len(kept))
    buf[HEADER_SIZE:] = records
    _CRC.pack_into(buf, CRC_OFFSET, compute_crc(buf, 0, size))
    return bytes(buf)


def _rebuild_with_horizon(header: BatchHeader, data, kept_offsets: set[int],
                          delete_horizon_ms: int) -> bytes:
    """The batch with the records at `kept_offsets`, re-encoded around a new delete horizon
    (which takes the baseTimestamp field, so every timestamp delta changes)."""
    records = [r for r in decode_records(
        records_section(header, data), header.records_count, base_offset=header.base_offset,
        base_timestamp=header.base_timestamp, base_sequence=header.base_sequence,
        log_append_time_ms=header.max_timestamp if header.is_log_append_time else None)
        if r.offset in kept_offsets]
    built = build_batch(records, base_offset=header.base_offset,
                        compression=header.compression_codec, producer_id=header.producer_id,
                        producer_epoch=header.producer_epoch, base_sequence=header.base_sequence,
                        partition_leader_epoch=header.partition_leader_epoch,
                        log_append_time=header.is_log_append_time,
                        transactional=header.is_transactional, control=header.is_control,
                        delete_horizon_ms=delete_horizon_ms, preserve_offsets=True)
    return _with_last_offset_delta(built, header.last_offset_delta)


# --- one cleaning ------------------------------------------------------------------------------


@dataclass(slots=True)
class CleanerStats:
    """What one cleaning did (Kafka's CleanerStats, the parts we report)."""

    bytes_read: int = 0
    bytes_written: int = 0
    map_bytes_read: int = 0
    map_records: int = 0
    records_read: int = 0
    records_retained: int = 0
    tombstones_dropped: int = 0
    segments_cleaned: int = 0
    groups_aborted: int = 0
    min_delete_horizon_ms: int | None = None  # earliest horizon set or kept on a tombstone batch
    elapsed_s: float = 0.0
    extra: dict = field(default_factory=dict)


class Cleaner:
    """Cleans one log at a time; see the module docstring. Not thread-safe: one per thread.

    `crash_hook(step)` (tests) is called at each step of the swap: "cleaned" (the .cleaned files
    written and flushed), "swap" (renamed .swap), "deleted" (old segments renamed .deleted),
    "swapped" (the .swap renamed to final names).
    """

    def __init__(self, *, dedupe_buffer_size: int = DEFAULT_DEDUPE_BUFFER_SIZE,
                 load_factor: float = DEFAULT_LOAD_FACTOR,
                 crash_hook: Callable[[str], None] | None = None) -> None:
        self.offset_map = OffsetMap(dedupe_buffer_size, load_factor=load_factor)
        self.crash_hook = crash_hook

    def _step(self, name: str) -> None:
        if self.crash_hook is not None:
            self.crash_hook(name)

    def clean(self, log_, *, first_dirty_offset: int, first_uncleanable_offset: int,
              now_ms: int) -> tuple[int, CleanerStats]:
        """Clean `log_` (a Log) over [first_dirty_offset, first_uncleanable_offset): returns the
        offset up to which the log is now clean (the next cleaner checkpoint) and the stats.
        Raises KafkaStorageError on I/O errors and CorruptRecordError on a corrupt batch."""
        started = time.monotonic()
        stats = CleanerStats()
        offset_map = self.offset_map
        end_offset = self.build_offset_map(log_, first_dirty_offset, first_uncleanable_offset, stats)
        producers = log_.producer_state.active_producers
        last_records = {pid: (entry.last_data_offset, entry.producer_epoch)
                        for pid, entry in producers.items()}
        segments = [s for s in log_.segments[:-1] if s.base_offset < end_offset]
        config = log_.config
        txn_metadata = CleanedTransactionMetadata()
        for group in group_segments_by_size(segments, max_size=config.segment_bytes,
                                            max_index_size=config.segment_index_bytes,
                                            first_uncleanable_offset=first_uncleanable_offset):
            self._clean_segments(log_, group, offset_map, now_ms=now_ms, last_records=last_records,
                                 txn_metadata=txn_metadata, stats=stats)
        stats.elapsed_s = time.monotonic() - started
        return end_offset, stats

    def build_offset_map(self, log_, start: int, end: int, stats: CleanerStats) -> int:
        """Fill the offset map from the batches holding offsets in [start, end); returns the
        offset the map covers up to (exclusive): `end`, or less when the map filled up."""
        offset_map = self.offset_map
        offset_map.clear()
        offset_map.latest_offset = start - 1
        txn_metadata = CleanedTransactionMetadata()
        txn_metadata.add_aborted_transactions(log_.collect_aborted_transactions(start, end))
        segments = log_.segments
        since_yield = 0
        for i, segment in enumerate(segments[:-1]):
            next_base = segments[i + 1].base_offset
            if next_base <= start:
                continue
            if segment.base_offset >= end:
                break
            found = segment.translate_offset(start) if segment.base_offset < start else (0, 0)
            if found is None:
                continue
            for _, header, data in segment.log.batches_with_data(found[0]):
                if header.base_offset >= end:
                    return end
                if header.last_offset < start:
                    continue
                if header.last_offset >= end:
                    # A batch straddling the end (the high watermark mid-batch): the map stops
                    # before it, and so does the clean range, so no record in it is counted clean.
                    return offset_map.latest_offset + 1
                stats.map_bytes_read += header.size_in_bytes
                since_yield += header.size_in_bytes
                if since_yield >= _YIELD_EVERY_BYTES:
                    since_yield = 0
                    time.sleep(0)  # let the event loop thread run
                entries: list[tuple[bytes, int]] = []
                if header.is_control:
                    txn_metadata.on_control_batch_read(header, _marker(header, data))
                elif not txn_metadata.on_batch_read(header):  # an aborted batch shadows nothing
                    base = header.base_offset
                    for _, _, delta, _, key, _ in scan_records(records_section(header, data),
                                                                header.records_count):
                        if key is not None and base + delta >= start:
                            entries.append((key, base + delta))
                if not offset_map.put_all(entries, header.last_offset):
                    log.debug("Offset map of %s full at offset %d (%d keys)",
                              log_.topic_partition, header.base_offset, len(offset_map))
                    return offset_map.latest_offset + 1
                stats.map_records += len(entries)
        return end

    # --- rewriting a group of segments ------------------------------------------------------

    def _clean_segments(self, log_, group: list[LogSegment], offset_map: OffsetMap, *, now_ms: int,
                        last_records: dict[int, tuple[int, int]],
                        txn_metadata: CleanedTransactionMetadata, stats: CleanerStats) -> None:
        config = log_.config
        first = group[0]
        cleaned = LogSegment.open(log_.dir, first.base_offset, clock=_FixedClock(now_ms),
                                  index_interval_bytes=config.index_interval_bytes,
                                  max_index_size=config.segment_index_bytes,
                                  file_already_exists=False, file_suffix=CLEANED_FILE_SUFFIX)
        txn_metadata.cleaned_index = cleaned.txn_index
        segments = log_.segments
        try:
            for segment in group:
                # Every aborted transaction with data or its marker in the segment, so the
                # cleaned segment's .txnindex is complete (Kafka collects over the whole segment).
                later = [s.base_offset for s in segments if s.base_offset > segment.base_offset]
                upper = later[0] if later else segment.read_next_offset()
                txn_metadata.add_aborted_transactions(
                    log_.collect_aborted_transactions(segment.base_offset, upper))
                self._clean_into(segment, cleaned, offset_map, now_ms=now_ms,
                                 delete_retention_ms=config.delete_retention_ms,
                                 last_records=last_records, txn_metadata=txn_metadata, stats=stats)
            cleaned.on_become_inactive()
            cleaned.flush(rolled=True)  # trims the retired indexes too
            cleaned.remap_trimmed_indexes()  # not in the log yet: no reader to lock out
            cleaned.set_last_modified_ms(group[-1].last_modified_ms)
            self._step("cleaned")
            swapped = log_.replace_segments(cleaned, group, on_step=self._step)
        except Exception as e:
            # An error, not a crash (a crash is a BaseException and leaves the files as they
            # are): if the segment never made it into the log, its files just go.
            if not any(s is cleaned for s in log_.segments):
                cleaned.delete()
            if isinstance(e, (OSError, ValueError)):
                raise KafkaStorageError(f"Error cleaning {log_.topic_partition}: {e}") from e
            raise
        if swapped:
            stats.segments_cleaned += len(group)
        else:
            stats.groups_aborted += 1
            cleaned.delete()

    def _clean_into(self, source: LogSegment, dest: LogSegment, offset_map: OffsetMap, *,
                    now_ms: int, delete_retention_ms: int, last_records: dict[int, tuple[int, int]],
                    txn_metadata: CleanedTransactionMetadata, stats: CleanerStats) -> None:
        latest = offset_map.latest_offset
        get = offset_map.get
        since_yield = 0
        for _, header, data in source.log.batches_with_data(0):
            size = header.size_in_bytes
            stats.bytes_read += size
            since_yield += size
            if since_yield >= _YIELD_EVERY_BYTES:
                since_yield = 0
                time.sleep(0)
            stats.records_read += header.records_count
            last_of_producer = _is_last_record_of_producer(header, last_records)
            if header.is_control:
                can_discard = txn_metadata.on_control_batch_read(header, _marker(header, data))
                out = self._filter_control_batch(header, data, can_discard, last_of_producer,
                                                 now_ms=now_ms,
                                                 delete_retention_ms=delete_retention_ms,
                                                 stats=stats)
            elif txn_metadata.on_batch_read(header):  # aborted: its records go
                out = empty_batch(header) if last_of_producer else None
            elif header.records_count == 0:
                out = bytes(data)
            else:
                out = self._filter_batch(header, data, latest, get, now_ms=now_ms,
                                         delete_retention_ms=delete_retention_ms,
                                         last_of_producer=last_of_producer, stats=stats)
            if out is None:
                continue
            dest.append(largest_offset=header.last_offset, largest_timestamp=_max_ts(out),
                        offset_of_max_timestamp=header.last_offset, records=out)
            stats.bytes_written += len(out)

    def _filter_control_batch(self, header: BatchHeader, data, can_discard: bool,
                              last_of_producer: bool, *, now_ms: int, delete_retention_ms: int,
                              stats: CleanerStats) -> bytes | None:
        """A marker: kept as it is until it may go; then stamped with a delete horizon; dropped
        by a cleaning past the horizon (emptied instead, if it is its producer's last record)."""
        if header.records_count == 0:
            return bytes(data) if last_of_producer else None
        horizon = header.base_timestamp if header.has_delete_horizon else None
        if can_discard and horizon is not None and horizon <= now_ms:
            return empty_batch(header) if last_of_producer else None
        if not can_discard:
            return bytes(data)
        if horizon is None:
            horizon = now_ms + delete_retention_ms
            self._note_horizon(stats, horizon)
            return _rebuild_with_horizon(header, data, {header.base_offset}, horizon)
        self._note_horizon(stats, horizon)
        return bytes(data)

    def _filter_batch(self, header: BatchHeader, data, latest: int, get, *, now_ms: int,
                      delete_retention_ms: int, last_of_producer: bool,
                      stats: CleanerStats) -> bytes | None:
        body = records_section(header, data)
        scanned = scan_records(body, header.records_count)
        base = header.base_offset
        horizon = header.base_timestamp if header.has_delete_horizon else None
        retain_deletes = horizon is None or now_ms < horizon
        kept = []
        has_tombstone = False
        tombstone_to_expire = False  # a kept tombstone that a later cleaning may drop
        for record in scanned:
            offset = base + record[2]
            if offset > latest:
                kept.append(record)
                has_tombstone = has_tombstone or not record[5]
                continue
            key = record[4]
            if key is None or offset < get(key):
                continue
            if record[5]:
                kept.append(record)
            elif retain_deletes:
                kept.append(record)
                has_tombstone = tombstone_to_expire = True
            else:
                stats.tombstones_dropped += 1
        stats.records_retained += len(kept)
        if not kept:
            return empty_batch(header) if last_of_producer else None
        if has_tombstone:
            if horizon is None:
                horizon = now_ms + delete_retention_ms
                if tombstone_to_expire:
                    self._note_horizon(stats, horizon)
                return _rebuild_with_horizon(header, data, {base + r[2] for r in kept}, horizon)
            if tombstone_to_expire:
                self._note_horizon(stats, horizon)
        if len(kept) == len(scanned):
            return bytes(data)
        if header.is_log_append_time:
            max_timestamp = header.max_timestamp
        else:
            max_timestamp = header.base_timestamp + max(r[3] for r in kept)
        return _rebuild_raw(header, body, kept, max_timestamp)

    @staticmethod
    def _note_horizon(stats: CleanerStats, horizon: int) -> None:
        if stats.min_delete_horizon_ms is None or horizon < stats.min_delete_horizon_ms:
            stats.min_delete_horizon_ms = horizon


def _marker(header: BatchHeader, data):
    """The marker of a control batch (None when empty or not a transaction marker)."""
    return read_end_txn_marker(data) if header.records_count else None


def _is_last_record_of_producer(header: BatchHeader, last_records: dict[int, tuple[int, int]]) -> bool:
    """Whether the batch holds what the producer state of an active producer rests on (Kafka's
    isBatchLastRecordOfProducer): its last data batch, or, when it has none, its last marker."""
    if header.producer_id < 0:
        return False
    last = last_records.get(header.producer_id)
    if last is None:
        return False
    last_data_offset, epoch = last
    if last_data_offset >= 0:
        return header.last_offset == last_data_offset
    return header.is_control and header.producer_epoch == epoch


def _max_ts(batch: bytes) -> int:
    return struct.unpack_from(">q", batch, 35)[0]


class _FixedClock:
    """The clock a cleaned segment is opened with (only its creation time is read)."""

    def __init__(self, now_ms: int) -> None:
        self._now_ms = now_ms

    def time_ms(self) -> int:
        return self._now_ms

    def monotonic_ms(self) -> int:
        return self._now_ms


# --- grouping and swapping ---------------------------------------------------------------------


def group_segments_by_size(segments: Sequence[LogSegment], *, max_size: int, max_index_size: int,
                           first_uncleanable_offset: int) -> list[list[LogSegment]]:
    """Consecutive segments grouped so that each group's total size stays within `max_size`
    (segment.bytes), its index entries within `max_index_size`, and its offsets within int32 of
    the group's base offset (Kafka's groupSegmentsBySize). Each group becomes one segment."""
    groups: list[list[LogSegment]] = []
    i = 0
    while i < len(segments):
        group = [segments[i]]
        log_size = segments[i].size
        index_size = segments[i].offset_index.entries * 8
        time_index_size = segments[i].time_index.entries * 12
        i += 1
        while i < len(segments):
            seg = segments[i]
            next_index = seg.offset_index.entries * 8
            next_time_index = seg.time_index.entries * 12
            if (log_size + seg.size > max_size or index_size + next_index > max_index_size
                    or time_index_size + next_time_index > max_index_size):
                break
            if seg.size > 0:
                last = (segments[i + 1].base_offset - 1 if i + 1 < len(segments)
                        else first_uncleanable_offset - 1)
                if last - group[0].base_offset > INT32_MAX:
                    break
            group.append(seg)
            log_size += seg.size
            index_size += next_index
            time_index_size += next_time_index
            i += 1
        groups.append(group)
    return groups


