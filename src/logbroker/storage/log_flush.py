"""Flushing and closing a `Log`: what reaches the disk, and when the log lets its files go.

`LogFlush` is a part of `Log` (log.py), mixed into it; it works on the Log's lock, offsets and
LocalLog, which keeps the recovery point and does the segment fsyncs (local_log.py). A flush
fsyncs the segments holding offsets in [recovery point, target), the producer snapshots written
at rolls since the last flush, the leader epoch checkpoint and, when a file was created, the
directory; only then does the recovery point move up to the target.

Invariants: `recovery_point <= log_end_offset`, and every byte below the recovery point is on
disk; a truncation during a flush leaves the recovery point where it was (the flushed bytes may
be gone). Once closed, the Log refuses appends, reads and flushes.

Writeback (`writeback_due`, `start_writeback`): as the active segment grows, its pages are sent
to the disk early, without waiting, so that a roll's fsync is short; what is durable and the
recovery point do not change.

Recovery checkpoints (`recovery_checkpoint_due`, `checkpoint_active_segment`): each time the
active segment grows by `recovery_checkpoint_bytes` (an eighth of segment.bytes, 1 to 32 MiB)
past its last checkpoint, a producer snapshot is taken at the log end and the log is flushed up
to there, so the recovery point follows the active segment instead of waiting for its roll.
Recovery after a crash then validates and replays only the bytes past that point
(log_loader.py), whatever the segment's size. Kafka flushes only at roll (and per
flush.messages / flush.ms) and recovers the whole active segment; this is one more fsync per
checkpoint, of pages the writeback has mostly written already. The older checkpoint snapshots
inside the active segment are deleted (the one at the recovery point is all recovery needs);
snapshots at segment base offsets stay, as Kafka's.

Threads: the flush itself blocks on fsync and belongs in a worker thread; it runs its fsyncs
outside the Log's lock (one flush at a time, under its own lock), so appends go on meanwhile.
`needs_flush` and `flush_policy_due` are cheap and fine on the event loop. Closing and deleting
block on disk.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from logbroker.errors import KafkaStorageError
from logbroker.storage.checkpoints import fsync_dir
from logbroker.storage.leader_epoch_cache import LEADER_EPOCH_CHECKPOINT_FILE, LeaderEpochFileCache
from logbroker.storage.local_log import LocalLog
from logbroker.storage.producer_snapshot import flush_snapshot
from logbroker.storage.producer_state import ProducerStateManager

log = logging.getLogger("kafka.log.UnifiedLog")

# How far the active segment grows past its last recovery checkpoint before the next one, what
# recovery after a crash replays at most: an eighth of segment.bytes, within these bounds (a
# segment smaller than the lower one gets none: its roll flushes it).
RECOVERY_CHECKPOINT_BYTES = 32 * 1024 * 1024
MIN_RECOVERY_CHECKPOINT_BYTES = 1024 * 1024


def recovery_checkpoint_bytes(segment_bytes: int) -> int:
    return min(RECOVERY_CHECKPOINT_BYTES, max(MIN_RECOVERY_CHECKPOINT_BYTES, segment_bytes // 8))


class LogFlush:
    """The flushing and closing methods of `Log`. See the module docstring."""

    # The Log's state this part works on (set in Log.__init__).
    _lock: threading.RLock
    _flush_lock: threading.Lock
    _local: LocalLog
    _epoch_cache: LeaderEpochFileCache
    _producer_state: ProducerStateManager
    _log_end_offset: int
    _unflushed_snapshots: list[Path]
    _checkpointed_at: tuple[int, int]  # (active segment's base offset, its size) at the last checkpoint
    dir: Path
    closed: bool

    def needs_flush(self, now_ms: int) -> bool:
        """Whether a flush is due: a rolled segment or producer snapshot not yet fsynced (Kafka
        flushes each rolled segment right after the roll), flush.messages unflushed messages, or
        flush.ms since the last flush with something unflushed. Cheap; run `flush_if_needed` in
        a worker thread."""
        with self._lock:
            if self.closed:
                return False
            if self._unflushed_snapshots or self._local.rolled_segment_unflushed():
                return True
            return self._local.flush_policy_due(now_ms, self._log_end_offset)

    def flush_policy_due(self, now_ms: int) -> bool:
        """Whether flush.messages or flush.ms ask for an fsync now — the flush Kafka does before
        answering the produce; a rolled segment's flush (also in `needs_flush`) waits for no one."""
        with self._lock:
            return not self.closed and self._local.flush_policy_due(now_ms, self._log_end_offset)

    def writeback_due(self) -> bool:
        """Whether the active segment grew by WRITEBACK_BYTES since its writeback last started
        (file_records.py). Cheap, no lock: call it after an append, on the event loop."""
        return self._local.active_segment.log.writeback_due()

    def start_writeback(self) -> None:
        """Have the kernel start writing the active segment's new pages to disk, without
        waiting, and keep its blocks allocated ahead of the appends (writeback.py): the fsync
        after the next roll then has little left to write. Not a flush: the recovery point stays. Worker thread; a segment closed or rolled
        meanwhile is simply skipped."""
        with self._lock:
            if self.closed:
                return
            records = self._local.active_segment.log
        try:
            records.start_writeback(self.config.segment_bytes)
            with self._lock:
                if not self.closed and records is not self._local.active_segment.log:
                    records.trim()  # rolled meanwhile: give back what was allocated past its end
        except (OSError, ValueError) as e:  # closed under us (deleted, truncated away): harmless
            log.debug("Writeback of %s not started: %s", records.path, e)

    def recovery_checkpoint_due(self) -> bool:
        """Whether the active segment grew `recovery_checkpoint_bytes` since its last recovery
        checkpoint (or its start). Cheap, no lock: call it after an append, on the event loop."""
        segment = self._local.active_segment
        base, size = self._checkpointed_at
        grown = segment.size - (size if base == segment.base_offset else 0)
        return grown >= recovery_checkpoint_bytes(self.config.segment_bytes)

    def checkpoint_active_segment(self) -> bool:
        """Take a producer snapshot at the log end and flush up to it (see the module
        docstring); False when there was nothing to do (closed, an empty active segment).
        Blocking fsyncs: worker thread. The snapshot is written under the log's lock (a few
        bytes per producer), the fsyncs outside it, as `flush`."""
        with self._lock:
            segment = self._local.active_segment
            target = self._log_end_offset
            if self.closed or target <= segment.base_offset:
                return False
            self._checkpointed_at = (segment.base_offset, segment.size)
            try:
                snapshot = self._producer_state.take_snapshot(target, sync=False)
            except OSError as e:
                raise KafkaStorageError(f"Error while writing a producer snapshot of {self.dir}: {e}") from e
            if snapshot is not None:
                self._unflushed_snapshots.append(snapshot)
        self.flush(target)
        with self._lock:
            if self._local.recovery_point >= target and segment is self._local.active_segment:
                self._producer_state.delete_snapshots_between(segment.base_offset, target)
        return True

    def flush_if_needed(self, now_ms: int) -> bool:
        """Flush what `needs_flush` says is due: up to the log end for flush.messages/flush.ms,
        else up to the active segment (rolled segments only). Blocking fsync: worker thread."""
        with self._lock:
            if not self.needs_flush(now_ms):
                return False
            target = (self._log_end_offset
                      if self._local.flush_policy_due(now_ms, self._log_end_offset)
                      else self._local.active_segment.base_offset)
        self.flush(target)
        return True

    def flush(self, up_to_offset: int | None = None) -> None:
        """fsync the segments holding offsets in [recovery point, up_to_offset) (default: the
        log end), the snapshots written since the last flush, the leader epoch checkpoint and the
        directory (when a segment or snapshot was created), then move the recovery point up.

        Blocking: run it in a worker thread. The fsyncs run outside the log's lock, so appends go
        on meanwhile; a truncation during the flush leaves the recovery point where it was.
        """
        with self._flush_lock:
            with self._lock:
                if self.closed:
                    return
                target = self._log_end_offset if up_to_offset is None else min(up_to_offset, self._log_end_offset)
                pending = self._local.start_flush(target)
                snapshots, self._unflushed_snapshots = self._unflushed_snapshots, []
                epoch_dirty = self._epoch_cache.pop_dirty()
            self._local.flush_segments(pending, self._lock)
            try:
                for path in snapshots:
                    flush_snapshot(path)
                if epoch_dirty:
                    self._epoch_cache.fsync_file()
                if (pending.new_segment or snapshots) and pending.directory.exists():
                    fsync_dir(pending.directory)
            except OSError as e:
                raise KafkaStorageError(f"Error while flushing log {pending.directory}: {e}") from e
            with self._lock:
                self._local.mark_flushed(pending, self._log_end_offset)

    # --- closing and deleting --------------------------------------------------------------

    def close(self) -> None:
        """Take a producer snapshot at the log end, then close every segment (final time index
        entry, indexes and file trimmed, .log fsynced) and remove pending `.deleted` files.
        Does not move the recovery point: call `flush` first for a clean shutdown. Blocks."""
        with self._lock:
            if self.closed:
                return
            try:
                self._producer_state.take_snapshot()
                self._local.close()
                self._epoch_cache.flush()
            except OSError as e:
                raise KafkaStorageError(f"Error while closing log {self.dir}: {e}") from e
            finally:
                self._local.mark_closed()

    def close_handles(self) -> None:
        """Close every file descriptor and mapping without writing anything (on errors, and for
        a log whose directory is about to be removed)."""
        with self._lock:
            self._local.close_handles()
            self._local.mark_closed()

    def rename_dir_for_deletion(self, name: str) -> Path:
        """Rename the partition directory to `name` beside it (LogManager's `…-delete`) and
        close the log to further calls. Open descriptors stay valid, so file regions already
        handed out can still be sent until `delete`. Returns the new path."""
        with self._lock:
            target = self._local.rename_dir(name)
            self._epoch_cache.set_path(target / LEADER_EPOCH_CHECKPOINT_FILE)
            self._local.mark_closed()
            return target

    def delete(self) -> None:
        """Close the log's files and remove its whole directory. Blocks on disk."""
        with self._lock:
            self._local.mark_closed()
            self._local.delete_dir()
