"""Which log to compact next, and how far each is clean (Kafka's LogCleanerManager + LogCleaner).

Each compacted log (cleanup.policy contains `compact`) is, from its log start offset:

    [clean section][dirty section][uncleanable: ... active segment]
                   ^ first dirty offset          ^ first uncleanable offset

- first dirty offset: the log's entry in `cleaner-offset-checkpoint` (Kafka's format, one file
  per log dir, see checkpoints.py), or the log start offset when there is none, when it is below
  the log start, or above the log end (a truncated log is cleaned again from the start).
- first uncleanable offset: the smallest of the active segment's base offset (the active
  segment is never cleaned), the high watermark (consumers must not see a record vanish that
  they have not been allowed to read), the first unstable offset (an open transaction, or one
  whose marker is not yet below the high watermark, is not decided for consumers), and, with
  min.compaction.lag.ms > 0, the base offset of the first dirty segment whose largest timestamp
  is younger than that lag.
- dirty ratio = dirty bytes / (clean + dirty bytes), counted in whole segments as Kafka does.

A log is eligible when its dirty ratio exceeds min.cleanable.dirty.ratio (strictly, as Kafka), or
when the first batch of its oldest dirty segment is older than max.compaction.lag.ms and it has
dirty bytes, or when a delete horizon that an earlier cleaning set on tombstones or transaction
markers has passed (so they go after delete.retention.ms even when no new data arrives; Kafka
waits for the ratio). The eligible log with the highest ratio is cleaned first (`Cleaner.clean`); its
checkpoint moves to where the cleaning ended, only after every segment swap is done.

A log whose cleaning fails (corrupt batch, I/O error) is marked uncleanable and skipped until
restart, as Kafka does; the error is logged once. Runs in a worker thread, one round at a time.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from logbroker.errors import CorruptRecordError, KafkaStorageError
from logbroker.storage.checkpoints import CLEANER_OFFSET_CHECKPOINT_FILE, OffsetCheckpointFile
from logbroker.storage.cleaner import (
    DEFAULT_DEDUPE_BUFFER_SIZE,
    DEFAULT_LOAD_FACTOR,
    Cleaner,
    CleanerStats,
)
from logbroker.types import TopicPartition

log = logging.getLogger("kafka.log.LogCleanerManager")

LONG_MAX = (1 << 63) - 1


@dataclass(frozen=True, slots=True)
class LogToClean:
    """One compacted log's cleanable range and sizes at one moment."""

    log: object  # storage.log.Log
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    max_compaction_delay_ms: int

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0

    @property
    def need_compaction_now(self) -> bool:
        return self.max_compaction_delay_ms > 0


def first_dirty_offset(log_, checkpoint: int | None) -> int:
    """Where cleaning resumes (see the module docstring)."""
    start = log_.log_start_offset
    if checkpoint is None or checkpoint < start or checkpoint > log_.log_end_offset:
        return start
    return checkpoint


def log_to_clean(log_, checkpoint: int | None, now_ms: int) -> LogToClean:
    """The cleanable range of `log_` given its cleaner checkpoint (Kafka's cleanableOffsets and
    LogToClean)."""
    segments = log_.segments
    dirty = first_dirty_offset(log_, checkpoint)
    active = segments[-1]
    non_active_dirty = [s for i, s in enumerate(segments[:-1])
                        if segments[i + 1].base_offset > dirty]
    # Never past the first unstable offset: an open transaction's outcome is not known yet.
    candidates = [active.base_offset, log_.high_watermark]
    if log_.first_unstable_offset is not None:
        candidates.append(log_.first_unstable_offset)
    lag_ms = max(log_.config.min_compaction_lag_ms, 0)
    if lag_ms > 0:
        for segment in non_active_dirty:
            if segment.largest_timestamp > now_ms - lag_ms:
                candidates.append(segment.base_offset)
                break
    uncleanable = max(dirty, min(candidates))
    clean_bytes = sum(s.size for s in segments if s.base_offset < dirty)
    cleanable_bytes = sum(s.size for s in non_active_dirty if s.base_offset < uncleanable)
    delay_ms = 0
    max_lag_ms = max(log_.config.max_compaction_lag_ms, 0)
    if max_lag_ms < LONG_MAX:
        timestamps = [t for t in (s.first_batch_timestamp() for s in non_active_dirty) if t > 0]
        earliest = min(timestamps) if timestamps else LONG_MAX
        clean_until_ms = now_ms - max_lag_ms
        if earliest < clean_until_ms:
            delay_ms = clean_until_ms - earliest
    return LogToClean(log_, dirty, uncleanable, clean_bytes, cleanable_bytes, delay_ms)


@dataclass(frozen=True, slots=True)
class CleanResult:
    topic_partition: TopicPartition
    first_dirty_offset: int
    end_offset: int
    stats: CleanerStats


class LogCleaner:
    """Chooses and cleans compacted logs, and keeps `cleaner-offset-checkpoint` in each log dir.

    Not re-entrant: rounds run one at a time (an internal lock makes a second caller wait).
    `crash_hook` is passed to the Cleaner (tests kill the cleaning at a named step).
    """

    def __init__(self, *, dedupe_buffer_size: int = DEFAULT_DEDUPE_BUFFER_SIZE,
                 load_factor: float = DEFAULT_LOAD_FACTOR,
                 crash_hook: Callable[[str], None] | None = None) -> None:
        self.cleaner = Cleaner(dedupe_buffer_size=dedupe_buffer_size, load_factor=load_factor,
                               crash_hook=crash_hook)
        self._uncleanable: set[Path] = set()
        self._delete_horizons: dict[Path, int] = {}
        self._lock = threading.Lock()

    # --- checkpoints ---------------------------------------------------------------------

    @staticmethod
    def checkpoint_file(log_dir: Path) -> OffsetCheckpointFile:
        return OffsetCheckpointFile(Path(log_dir) / CLEANER_OFFSET_CHECKPOINT_FILE)

    def read_checkpoint(self, log_dir: Path) -> dict[TopicPartition, int]:
        try:
            return self.checkpoint_file(log_dir).read()
        except KafkaStorageError as e:
            log.warning("Ignoring unreadable %s: %s", CLEANER_OFFSET_CHECKPOINT_FILE, e)
            return {}

    def _update_checkpoint(self, log_, offset: int) -> None:
        log_dir = log_.dir.parent
        offsets = self.read_checkpoint(log_dir)
        offsets[log_.topic_partition] = offset
        self.checkpoint_file(log_dir).write(offsets)

    # --- choosing ------------------------------------------------------------------------

    def grab_filthiest_log(self, logs: Iterable, now_ms: int) -> LogToClean | None:
        """The eligible compacted log with the highest dirty ratio, or None."""
        checkpoints: dict[Path, dict[TopicPartition, int]] = {}
        best: LogToClean | None = None
        for lg in logs:
            if not lg.config.compact or lg.closed or lg.dir in self._uncleanable:
                continue
            log_dir = lg.dir.parent
            if log_dir not in checkpoints:
                checkpoints[log_dir] = self.read_checkpoint(log_dir)
            candidate = log_to_clean(lg, checkpoints[log_dir].get(lg.topic_partition), now_ms)
            horizon = self._delete_horizons.get(lg.dir)
            eligible = (candidate.cleanable_ratio > lg.config.min_cleanable_dirty_ratio
                        or (candidate.need_compaction_now and candidate.cleanable_bytes > 0)
                        or (horizon is not None and horizon <= now_ms))
            if eligible and candidate.total_bytes > 0 and (
                    best is None or candidate.cleanable_ratio > best.cleanable_ratio):
                best = candidate
        return best

    # --- cleaning ------------------------------------------------------------------------

    def clean_log(self, to_clean: LogToClean, now_ms: int) -> CleanResult:
        """Clean one log and move its checkpoint. Raises what Cleaner.clean raises."""
        lg = to_clean.log
        end_offset, stats = self.cleaner.clean(
            lg, first_dirty_offset=to_clean.first_dirty_offset,
            first_uncleanable_offset=to_clean.first_uncleanable_offset, now_ms=now_ms)
        if stats.groups_aborted == 0:
            self._update_checkpoint(lg, end_offset)
        if stats.min_delete_horizon_ms is None:
            self._delete_horizons.pop(lg.dir, None)
        else:
            self._delete_horizons[lg.dir] = stats.min_delete_horizon_ms
        mb = stats.bytes_read / 1e6
        log.info("Cleaned %s: offsets [%d, %d) deduplicated, %.1f MB read, %.1f MB written, %d "
                 "segment(s) rewritten, %d tombstone(s) removed, in %.2f s (%.1f MB/s)",
                 lg.topic_partition, to_clean.first_dirty_offset, end_offset, mb,
                 stats.bytes_written / 1e6, stats.segments_cleaned, stats.tombstones_dropped,
                 stats.elapsed_s, mb / stats.elapsed_s if stats.elapsed_s else 0.0)
        return CleanResult(lg.topic_partition, to_clean.first_dirty_offset, end_offset, stats)

    def clean_logs(self, logs: Iterable, now_ms: int) -> list[CleanResult]:
        """One round: clean the filthiest eligible log, then the next, until none is eligible
        (at most one cleaning per log). Errors mark the log uncleanable; a log closed meanwhile
        is skipped. Blocks on disk: worker thread."""
        logs = list(logs)
        results: list[CleanResult] = []
        with self._lock:
            for _ in range(len(logs)):
                to_clean = self.grab_filthiest_log(logs, now_ms)
                if to_clean is None:
                    break
                lg = to_clean.log
                try:
                    results.append(self.clean_log(to_clean, now_ms))
                except (KafkaStorageError, CorruptRecordError, OSError, ValueError) as e:
                    if lg.closed:
                        log.info("Stopped cleaning %s: the log was closed", lg.topic_partition)
                    else:
                        log.error("Failed to clean %s; marking it uncleanable until restart: %s",
                                  lg.topic_partition, e, exc_info=True)
                    self._uncleanable.add(lg.dir)
                logs = [other for other in logs if other is not lg]
        return results
