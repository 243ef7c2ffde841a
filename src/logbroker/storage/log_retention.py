"""Retention, DeleteRecords and the cleaner's swap for a `Log` (Kafka's UnifiedLog
deleteOldSegments, maybeIncrementLogStartOffset and replaceSegments): everything that removes
records from the start of a log, as cleanup.policy asks.

`LogRetention` is a part of `Log` (log.py), mixed into it; it keeps no state of its own and works
on the Log's offsets, lock and LocalLog. Retention decides with the rules of retention.py and
deletes through `LocalLog.remove_and_delete_segments` (segments renamed `.deleted`, removed
file.delete.delay.ms later).

Invariants kept: the log start offset only moves up and never passes the high watermark (only
segments wholly below it are deleted); the log always keeps a segment (the active one is rolled
before it goes); moving the log start offset moves the high watermark and recovery point up with
it and trims the leader epochs and producer state below it — except that a tiered log
(remote.storage.enable) keeps the leader epochs of what its remote segments hold when its local
segments go: its epochs are trimmed at the earliest remote offset (`trim_leader_epochs`).

Threads: every method takes the Log's lock and blocks on disk (renames, deletions): run them in
a worker thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from logbroker.clock import Clock
from logbroker.errors import KafkaStorageError, OffsetOutOfRangeError
from logbroker.storage.checkpoints import fsync_dir
from logbroker.storage.leader_epoch_cache import LeaderEpochFileCache
from logbroker.storage.local_log import LocalLog
from logbroker.storage.log_config import LogConfig
from logbroker.storage.log_segment import LogSegment
from logbroker.storage.producer_state import ProducerStateManager
from logbroker.storage.retention import (
    BreachRule,
    deletable_segments,
    log_start_offset_breached,
    only_uploaded,
    retention_ms_breached,
    retention_size_breached,
)
from logbroker.types import TopicPartition

log = logging.getLogger("kafka.log.UnifiedLog")


class LogRetention:
    """The record-removing methods of `Log`. See the module docstring."""

    # The Log's state this part works on (set in Log.__init__).
    _tp: TopicPartition
    _clock: Clock
    _config: LogConfig
    _lock: threading.RLock
    _local: LocalLog
    _epoch_cache: LeaderEpochFileCache
    _producer_state: ProducerStateManager
    _log_start_offset: int
    _log_end_offset: int
    _high_watermark: int
    _highest_offset_in_remote: int
    dir: Path
    closed: bool
    size_in_bytes: int
    _check_open: Callable[[], None]
    _maybe_increment_first_unstable_offset: Callable[[], None]
    _roll: Callable[[int | None], LogSegment]

    def maybe_increment_log_start_offset(self, offset: int) -> bool:
        """DeleteRecords: move the log start offset up to `offset` (OffsetOutOfRangeError above
        the high watermark) and delete the segments now wholly below it. True if it moved."""
        with self._lock:
            self._check_open()
            if offset > self._high_watermark:
                raise OffsetOutOfRangeError(
                    f"Cannot increment the log start offset to {offset} of partition {self._tp} "
                    f"since it is larger than the high watermark {self._high_watermark}")
            if offset <= self._log_start_offset:
                return False
            log.info("Incrementing log start offset of %s to %d", self._tp, offset)
            self._update_log_start_offset(offset)
            self._delete_old_segments(log_start_offset_breached(offset))
            return True

    def _update_log_start_offset(self, offset: int, *, trim_epochs: bool = True) -> None:
        self._log_start_offset = offset
        if self._high_watermark < offset:
            self._high_watermark = offset
        if self._local.recovery_point < offset:
            self._local.update_recovery_point(offset)
        if trim_epochs:
            self._epoch_cache.truncate_from_start(offset)
        self._producer_state.on_log_start_offset_incremented(offset)
        self._maybe_increment_first_unstable_offset()

    def trim_leader_epochs(self, log_start_offset: int) -> None:
        """A tiered log: the partition's log start offset (the earliest offset in the remote
        store, at most the local one) is `log_start_offset`; drop the leader epochs wholly below
        it. Blocks on disk (fsync) when the cache changes."""
        with self._lock:
            if not self.closed:
                self._epoch_cache.truncate_from_start(min(log_start_offset, self._log_start_offset))

    def replace_segments(self, cleaned: LogSegment, old_segments: list[LogSegment], *,
                         on_step: Callable[[str], None] = lambda step: None) -> bool:
        """Swap the `.cleaned` segment into the live log in place of `old_segments` (Kafka's
        replaceSegments; the file steps are LocalLog.replace_segments). Returns False, nothing
        changed, when the old segments are no longer all the log's (retention, truncation or
        deletion meanwhile). Then fsyncs the directory. Blocks on disk (renames, one directory
        fsync); called from the cleaner's thread.
        """
        with self._lock:
            if self.closed:
                return False
            try:
                if not self._local.replace_segments(cleaned, old_segments, on_step=on_step):
                    return False
            except OSError as e:
                raise KafkaStorageError(f"I/O error swapping cleaned segments into {self.dir}: {e}") from e
        try:
            fsync_dir(self.dir)
        except OSError as e:
            raise KafkaStorageError(f"I/O error syncing {self.dir}: {e}") from e
        return True

    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """Retention (rules in retention.py): with cleanup.policy=delete, the segments over
        retention.bytes and past retention.ms, and always those wholly below the log start
        offset; only below the high watermark; the active segment is rolled first when it has
        to go too (if it is non-empty). A tiered log (copying to remote storage) applies
        local.retention.* instead, to segments already copied only. Also removes the `.deleted`
        files that are due. Returns the number of segments deleted. Renames and removes files:
        worker thread.
        """
        now_ms = self._clock.time_ms() if now_ms is None else now_ms
        with self._lock:
            if self.closed:
                return 0
            deleted = self._delete_old_segments(log_start_offset_breached(self._log_start_offset))
            config = self._config
            if config.delete:
                tiered = config.remote_storage_enable and not config.remote_log_copy_disable
                retention_bytes, retention_ms = (
                    (config.local_retention_bytes_effective, config.local_retention_ms_effective)
                    if tiered else (config.retention_bytes, config.retention_ms))
                for rule in (retention_size_breached(self.size_in_bytes, retention_bytes),
                             retention_ms_breached(now_ms, retention_ms)):
                    if rule is not None:
                        if tiered:
                            rule = only_uploaded(rule, self._highest_offset_in_remote)
                        deleted += self._delete_old_segments(rule)
            self._local.delete_due(now_ms)
            return deleted

    def _delete_old_segments(self, rule: BreachRule) -> int:
        segments = self._local.segments
        deletable = deletable_segments(segments, log_end_offset=self._log_end_offset,
                                       high_watermark=self._high_watermark, rule=rule)
        if not deletable:
            return 0
        count = len(deletable)
        try:
            if count == len(segments):
                # Deleting the active segment too: roll first so there is always a segment.
                new_segment = self._roll(None)
                if deletable[-1].base_offset == new_segment.base_offset:
                    deletable = deletable[:-1]
            self._local.remove_and_delete_segments(deletable)
        except OSError as e:
            raise KafkaStorageError(f"I/O error while deleting segments of {self.dir}: {e}") from e
        first_base = self._local.segments[0].base_offset
        if first_base > self._log_start_offset:
            # A tiered log keeps the leader epochs of its remote segments (Kafka truncates the
            # cache at UnifiedLog.logStartOffset, not the local one): the remote log manager
            # trims them when the earliest remote offset moves (trim_leader_epochs).
            self._update_log_start_offset(first_base, trim_epochs=not self._config.remote_storage_enable)
        log.info("Deleted %d segment(s) of %s; log start offset now %d", count, self._tp,
                 self._log_start_offset)
        return count

    def delete_pending_files(self, now_ms: int | None = None) -> int:
        """Remove the `.deleted` files whose delay has passed; returns how many segments went."""
        with self._lock:
            return self._local.delete_due(self._clock.time_ms() if now_ms is None else now_ms)

    @property
    def pending_deletes(self) -> int:
        return self._local.pending_deletes

    def remove_expired_producers(self, now_ms: int | None = None) -> None:
        with self._lock:
            self._producer_state.remove_expired_producers(
                self._clock.time_ms() if now_ms is None else now_ms)
