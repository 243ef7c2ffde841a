"""The segments of one partition on local disk (Kafka's LocalLog).

`LocalLog` owns the segments of a partition directory (a `LogSegments`, log_segments.py) and
everything that touches their files: rolling a new active segment, reading a file region for a
fetch, finding offsets by timestamp, truncating segments, swapping cleaned segments in, deleting
segment files (renamed `.deleted` at once, removed `file.delete.delay.ms` later, so a FileRegion
handed to a fetch just before stays readable until it has been sent), flushing them and closing
them.

Of the offsets it keeps only the recovery point (as Kafka's LocalLog): everything below it is
fsynced, so recovery after a crash starts there. The log start offset, log end offset, high
watermark, last stable offset, producer state and leader epochs are the `Log`'s (log.py), which
decides *what* to roll, read, truncate, delete or flush and calls this class to do it.

Invariants: the segment list is never empty after opening; base offsets strictly increase; the
last segment is the active one (the only one appended to); `recovery_point <= log_end_offset`
(the Log's), and only truncation and `truncate_fully_and_start_at` move it down. Once `closed`,
the Log refuses appends, reads and flushes (`check_open`).

Threads: not thread-safe. The owning `Log` calls every method under its lock, except
`flush_segments`, which runs its fsyncs without the lock so a flush never stalls appends, and
takes the lock itself when a segment changed under it. Every method is synchronous and may
block on disk.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from logbroker.clock import Clock
from logbroker.errors import KafkaStorageError
from logbroker.records.record_batch import RecordBatch
from logbroker.storage.checkpoints import fsync_dir, remove_tree
from logbroker.storage.log_config import LogConfig
from logbroker.storage.log_loader import open_segment
from logbroker.storage.log_segments import LogSegments
from logbroker.storage.log_segment import (
    CLEANED_FILE_SUFFIX,
    DELETED_FILE_SUFFIX,
    SWAP_FILE_SUFFIX,
    LogSegment,
    log_file,
)
from logbroker.storage.transaction_index import AbortedTxn
from logbroker.storage.values import FetchDataInfo, TimestampAndOffset
from logbroker.types import TopicPartition

log = logging.getLogger("kafka.log.LocalLog")


@dataclass(slots=True)
class _PendingDelete:
    due_ms: int
    segment: LogSegment
    extra_files: list[Path] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class PendingFlush:
    """What `LocalLog.start_flush` chose under the lock, for `flush_segments` to fsync without
    it: the segments holding offsets in [recovery point, target), whether one of them was created
    since the last flush (then the directory needs an fsync too), and the truncation count then
    (a truncation meanwhile leaves the recovery point where it was)."""

    target: int
    segments: tuple[LogSegment, ...]
    new_segment: bool
    directory: Path
    generation: int


class LocalLog:
    """The segments of one partition directory. See the module docstring.

    `files_to_delete_with(base_offset)` names the files that go with a deleted segment besides
    its own (the producer snapshot at its base offset): the `Log` renames them and returns
    their new paths, removed together with the segment.
    """

    def __init__(self, *, directory: Path, config: LogConfig, clock: Clock,
                 topic_partition: TopicPartition, segments: list[LogSegment], recovery_point: int,
                 files_to_delete_with: Callable[[int], list[Path]] = lambda base: []) -> None:
        self._dir = directory
        self.config = config
        self._clock = clock
        self._tp = topic_partition
        self._segments = LogSegments(segments)
        self._files_to_delete_with = files_to_delete_with
        self._pending_deletes: list[_PendingDelete] = []
        self._max_offset_position: tuple[int, int, int] | None = None  # (offset, segment base, position)
        self._recovery_point = recovery_point
        self._last_flush_ms = clock.time_ms()
        self._generation = 0  # bumped when offsets below the log end are rewritten (truncation)
        self._closed = False

    # --- the segment list ------------------------------------------------------------------

    @property
    def dir(self) -> Path:
        return self._dir

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        """The segments in base offset order (a snapshot; the last is the active one)."""
        return self._segments.snapshot()

    def segments_from(self, offset: int) -> list[LogSegment]:
        """The segments from the one holding `offset` (or the first) on."""
        return self._segments.from_offset(offset)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments.active

    @property
    def size_in_bytes(self) -> int:
        return self._segments.size_in_bytes

    def floor_index(self, offset: int) -> int:
        """Index of the last segment whose base offset is <= `offset`, or -1."""
        return self._segments.floor_index(offset)

    def add_segment(self, segment: LogSegment) -> None:
        self._segments.add(segment)

    def contains(self, segment: LogSegment) -> bool:
        return self._segments.contains(segment)

    def set_dir(self, directory: Path) -> None:
        self._dir = directory

    def _forget_positions(self) -> None:
        self._max_offset_position = None

    # --- recovery point and flushing -------------------------------------------------------

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    def update_recovery_point(self, offset: int) -> None:
        """Move the recovery point to `offset` (the log start offset passing it: nothing below
        the log start needs recovery)."""
        self._recovery_point = offset

    @property
    def last_flush_ms(self) -> int:
        return self._last_flush_ms

    def unflushed_messages(self, log_end_offset: int) -> int:
        return log_end_offset - self._recovery_point

    def rolled_segment_unflushed(self) -> bool:
        """Whether a segment before the active one still holds offsets above the recovery point
        (Kafka flushes each rolled segment right after the roll)."""
        return self._recovery_point < self._segments.active.base_offset

    def flush_policy_due(self, now_ms: int, log_end_offset: int) -> bool:
        """flush.messages unflushed messages, or flush.ms since the last flush with some."""
        unflushed = log_end_offset - self._recovery_point
        return unflushed > 0 and (unflushed >= self.config.flush_messages
                                  or now_ms - self._last_flush_ms >= self.config.flush_ms)

    def start_flush(self, target: int) -> PendingFlush:
        """Choose what a flush up to `target` (exclusive, <= the log end) must fsync. Lock held."""
        start = self._recovery_point
        segments = []
        if target > start:
            segments = [s for s in self._segments.from_offset(start) if s.base_offset < target]
        return PendingFlush(target=target, segments=tuple(segments),
                            new_segment=any(s.base_offset >= start for s in segments),
                            directory=self._dir, generation=self._generation)

    def flush_segments(self, pending: PendingFlush, lock: threading.RLock) -> None:
        """fsync the segments of `pending`, WITHOUT the owning Log's `lock` held (appends go on
        meanwhile). A segment closed or deleted meanwhile has nothing left to flush and is
        skipped; one whose indexes a roll remapped under us (ValueError) is flushed again under
        the lock. Blocking: worker thread. Raises KafkaStorageError."""
        active = self._segments.active
        for segment in pending.segments:
            rolled = segment is not active
            try:
                self._flush_segment(segment, rolled, lock)
            except (OSError, ValueError) as e:
                with lock:
                    if self._closed or not self._segments.contains(segment):
                        continue
                    if isinstance(e, OSError):
                        raise KafkaStorageError(
                            f"Error while flushing log {pending.directory}: {e}") from e
                    try:
                        self._flush_segment(segment, rolled, lock)
                    except (OSError, ValueError) as again:
                        raise KafkaStorageError(
                            f"Error while flushing log {pending.directory}: {again}") from again

    @staticmethod
    def _flush_segment(segment: LogSegment, rolled: bool, lock: threading.RLock) -> None:
        """fsync one segment; a rolled one's trimmed indexes are then remapped under `lock`
        (readers use the mappings; reentrant, so a caller may hold it already)."""
        segment.flush(rolled=rolled)
        if rolled:
            with lock:
                segment.remap_trimmed_indexes()

    def mark_flushed(self, pending: PendingFlush, log_end_offset: int) -> None:
        """Move the recovery point up to the flushed target (Kafka's markFlushed), unless a
        truncation happened since `start_flush`. Lock held."""
        if pending.generation == self._generation and pending.target > self._recovery_point:
            self._recovery_point = min(pending.target, log_end_offset)
            self._last_flush_ms = self._clock.time_ms()

    # --- open or closed --------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    def mark_closed(self) -> None:
        self._closed = True

    def check_open(self) -> None:
        """KafkaStorageError once the log is closed (Kafka's checkIfMemoryMappedBufferClosed)."""
        if self._closed:
            raise KafkaStorageError(f"The log of {self._tp} in {self._dir} is closed")

    # --- rolling ---------------------------------------------------------------------------

    def should_roll(self, size: int, max_timestamp: int, max_offset: int, now_ms: int) -> bool:
        config = self.config
        return self._segments.active.should_roll(size, max_timestamp, max_offset, now_ms,
                                                 config.segment_bytes, config.segment_ms)

    def roll(self, new_offset: int) -> LogSegment:
        """Make a new active segment at `new_offset` (>= the active segment's base offset; an
        empty active segment at that very offset is replaced). The old active segment gets its
        final time index entry and its files trimmed. Raises OSError."""
        active = self._segments.active
        if new_offset == active.base_offset:
            if active.size != 0:
                raise KafkaStorageError(
                    f"Trying to roll a new log segment for {self._tp} with start offset "
                    f"{new_offset} while it already exists")
            log.warning("Trying to roll a new log segment of %s with start offset %d = the start "
                        "of the empty active segment; replacing it", self._tp, new_offset)
            self.remove_and_delete_segments([active])
        elif new_offset < active.base_offset:
            raise KafkaStorageError(
                f"Trying to roll a new log segment for {self._tp} with start offset {new_offset} "
                f"lower than the start offset {active.base_offset} of the active segment")
        else:
            if log_file(self._dir, new_offset).exists():
                log.warning("Newly rolled segment file %s already exists; deleting it first",
                            log_file(self._dir, new_offset))
                log_file(self._dir, new_offset).unlink()
            active.on_become_inactive()
        segment = open_segment(self._dir, new_offset, self.config, clock=self._clock,
                               file_already_exists=False)
        self.add_segment(segment)
        return segment

    # --- reading ---------------------------------------------------------------------------

    def read(self, offset: int, *, max_bytes: int, limit: int, log_end_offset: int,
             min_one_message: bool, include_aborted_txns: bool = False) -> FetchDataInfo:
        """The file region from the batch holding `offset`, at most `max_bytes` (with
        `min_one_message` the first batch whole), never into the batch holding `limit`
        (exclusive, <= `log_end_offset`). Empty when there is nothing below `limit`. With
        `include_aborted_txns`, also the aborted transactions overlapping [offset, an offset at
        or after the region's end) (Kafka's addAbortedTransactions). Raises OSError."""
        if offset >= limit:
            return FetchDataInfo(offset, None, aborted_transactions=() if include_aborted_txns else None)
        if limit == log_end_offset:
            cap_base, cap_position = self._segments.active.base_offset, None
        else:
            cap_base, cap_position = self.position_of(limit)
        i = max(0, self.floor_index(offset))
        while i < len(self._segments):
            segment = self._segments[i]
            if segment.base_offset > cap_base:
                break
            max_position = cap_position if segment.base_offset == cap_base else None
            info = segment.read(offset, max_bytes, max_position=max_position,
                                min_one_message=min_one_message)
            if info is not None:
                if include_aborted_txns:
                    info = self._add_aborted_transactions(offset, i, info, log_end_offset)
                return info
            i += 1
        return FetchDataInfo(offset, None, aborted_transactions=() if include_aborted_txns else None)

    def _add_aborted_transactions(self, offset: int, i: int, info: FetchDataInfo,
                                  log_end_offset: int) -> FetchDataInfo:
        if info.region is None or all(s.txn_index.is_empty for s in self._segments.from_index(i)):
            # Nothing in the range, or no transaction aborted from this segment on (the usual case).
            return FetchDataInfo(info.fetch_offset, info.region, info.first_entry_incomplete, ())
        segment = self._segments[i]
        upper_bound = segment.fetch_upper_bound_offset(info.region.position, info.region.size)
        if upper_bound is None:
            upper_bound = self._segments.base_offset_at(i + 1) if i + 1 < len(self._segments) else log_end_offset
        aborted = self._collect_aborted(offset, upper_bound, i)
        return FetchDataInfo(info.fetch_offset, info.region, info.first_entry_incomplete,
                             tuple(aborted))

    def _collect_aborted(self, offset: int, upper_bound_offset: int, i: int) -> list[AbortedTxn]:
        """Kafka's collectAbortedTransactions: from segment `i` on, until a segment's index says
        no later abort can overlap."""
        found: list[AbortedTxn] = []
        for segment in self._segments.from_index(i):
            aborted, complete = segment.collect_aborted_txns(offset, upper_bound_offset)
            found.extend(aborted)
            if complete:
                break
        return found

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping [start_offset, upper_bound_offset)."""
        return self._collect_aborted(start_offset, upper_bound_offset,
                                     max(0, self.floor_index(start_offset)))

    def position_of(self, offset: int) -> tuple[int, int]:
        """(segment base, file position) of the batch holding `offset` (or the next batch; the
        segment's end if none), cached for the last offset asked (usually the high watermark)."""
        cached = self._max_offset_position
        if cached is not None and cached[0] == offset:
            return cached[1], cached[2]
        segment = self._segments[max(0, self.floor_index(offset))]
        found = segment.translate_offset(offset)
        position = segment.size if found is None else found[0]
        self._max_offset_position = (offset, segment.base_offset, position)
        return segment.base_offset, position

    def find_offset_by_timestamp(self, timestamp: int, log_start_offset: int) -> TimestampAndOffset | None:
        """The first record at or after the log start whose timestamp is >= `timestamp`:
        segments skipped on their largest timestamp, then the time index, then the records of
        the one batch that reaches the target."""
        for segment in list(self._segments):
            if segment.largest_timestamp >= timestamp:
                found = segment.find_offset_by_timestamp(timestamp, log_start_offset)
                if found is not None:
                    return found
        return None

    def max_timestamp_and_offset(self) -> TimestampAndOffset | None:
        """The record with the largest timestamp (ListOffsets -3); decodes one batch."""
        best = None
        for segment in self._segments:
            if best is None or segment.max_timestamp_so_far > best.max_timestamp_so_far:
                best = segment
        if best is None or best.max_timestamp_so_far < 0:
            return None
        target = best.max_timestamp_so_far
        position = best.offset_index.lookup(best.offset_of_max_timestamp_so_far).position
        for _, header, data in best.log.batches_with_data(position):
            if header.max_timestamp != target:
                continue
            offset = header.last_offset
            for record in RecordBatch(data, 0).records():
                if record.timestamp == target:
                    offset = record.offset
                    break
            epoch = header.partition_leader_epoch
            return TimestampAndOffset(target, offset, epoch if epoch >= 0 else -1)
        return None

    # --- truncation ------------------------------------------------------------------------

    def truncate_to(self, offset: int) -> int:
        """Delete the segments starting above `offset` and cut the (new) active one there; the
        first segment must start at or below `offset`. Returns the new log end offset
        (<= `offset`: a batch straddling it goes whole), which also caps the recovery point.
        Raises OSError."""
        self.remove_and_delete_segments([s for s in self._segments if s.base_offset > offset])
        active = self._segments.active
        active.truncate_to(offset)
        self._forget_positions()
        log_end_offset = active.read_next_offset()
        self._generation += 1
        self._recovery_point = min(self._recovery_point, log_end_offset)
        return log_end_offset

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and start one empty segment at `offset`, the new recovery
        point. Raises OSError."""
        self.remove_and_delete_segments(list(self._segments))
        self.add_segment(open_segment(self._dir, offset, self.config, clock=self._clock,
                                      file_already_exists=False))
        self._forget_positions()
        self._generation += 1
        self._recovery_point = offset

    # --- deleting segment files ------------------------------------------------------------

    def remove_and_delete_segments(self, segments: list[LogSegment]) -> None:
        """Take segments out of the list, rename their files (and the files that go with them)
        `.deleted` and schedule their removal after file.delete.delay.ms (now when it is 0)."""
        if not segments:
            return
        now_ms = self._clock.time_ms()
        due_ms = now_ms + self.config.file_delete_delay_ms
        for segment in segments:
            self._segments.remove(segment)
            self._forget_positions()
            segment.change_file_suffixes("", DELETED_FILE_SUFFIX)
            self._pending_deletes.append(
                _PendingDelete(due_ms, segment, self._files_to_delete_with(segment.base_offset)))
        if self.config.file_delete_delay_ms <= 0:
            self.delete_due(now_ms)

    def delete_due(self, now_ms: int) -> int:
        """Remove the `.deleted` files whose delay has passed; returns how many segments went."""
        due = [p for p in self._pending_deletes if p.due_ms <= now_ms]
        if not due:
            return 0
        self._pending_deletes = [p for p in self._pending_deletes if p.due_ms > now_ms]
        for pending in due:
            try:
                pending.segment.delete()
                for path in pending.extra_files:
                    path.unlink(missing_ok=True)
            except OSError as e:
                log.error("Failed to delete %r: %s", pending.segment, e)
        return len(due)

    @property
    def pending_deletes(self) -> int:
        return len(self._pending_deletes)

    def replace_segments(self, cleaned: LogSegment, old_segments: list[LogSegment], *,
                         on_step: Callable[[str], None]) -> bool:
        """Swap the `.cleaned` segment in for `old_segments` (Kafka's replaceSegments): check
        they are all still ours and none is the active one (else return False, nothing
        changed), rename the cleaned files `.swap`, put the segment in the list, rename the old
        segments `.deleted` and schedule their removal, rename the `.swap` files to their final
        names. The order is what LogLoader expects after a crash at any step. Raises OSError;
        the caller fsyncs the directory."""
        for old in old_segments:
            if not self.contains(old) or old is self._segments.active:
                log.info("Aborting a cleaning of %s: segment %d changed meanwhile", self._tp,
                         old.base_offset)
                return False
        cleaned.change_file_suffixes(CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX)
        on_step("swap")
        self._segments.replace_range(old_segments[0], old_segments[-1], cleaned)
        self._forget_positions()
        now_ms = self._clock.time_ms()
        due_ms = now_ms + self.config.file_delete_delay_ms
        for old in old_segments:
            old.change_file_suffixes("", DELETED_FILE_SUFFIX)
            extra = ([] if old.base_offset == cleaned.base_offset
                     else self._files_to_delete_with(old.base_offset))
            self._pending_deletes.append(_PendingDelete(due_ms, old, extra))
        on_step("deleted")
        cleaned.change_file_suffixes(SWAP_FILE_SUFFIX, "")
        on_step("swapped")
        if self.config.file_delete_delay_ms <= 0:
            self.delete_due(now_ms)
        return True

    # --- closing ---------------------------------------------------------------------------

    def close(self) -> None:
        """Close every segment (final time index entry, files trimmed) and remove every pending
        `.deleted` file. Raises OSError."""
        for segment in self._segments:
            segment.close()
        self.delete_due(1 << 62)

    def close_handles(self) -> None:
        """Close every descriptor and mapping without writing anything."""
        for segment in self._segments:
            segment.close_handlers()
        for pending in self._pending_deletes:
            pending.segment.close_handlers()

    def rename_dir(self, name: str) -> Path:
        """Rename the partition directory to `name` beside it; fsync the parent."""
        target = self._dir.parent / name
        os.replace(self._dir, target)
        fsync_dir(self._dir.parent)
        self._dir = target
        return target

    def delete_dir(self) -> None:
        self.close_handles()
        remove_tree(self._dir)
