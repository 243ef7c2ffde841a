"""Future logs: a partition's replica being moved to another log dir of the broker
(AlterReplicaLogDirs), the part of Kafka's LogManager that handles `…-future` directories.

A move copies the current log into a future log in the target dir while the current one keeps
serving, then swaps them (server/replica_log_dir_mover.py). Invariant: a partition has at most one
future log, in a dir other than its current log's; the future log is not in `all_logs`, so
retention, flushes and checkpoints see only the current one. A future dir found at startup is a
move cut short by the shutdown: LogManager removes it (the current replica is whole).

A mixin of LogManager: it uses the manager's `_lock`, `_logs`, `_log_dirs`, `_clock`,
`_producer_id_expiration_ms`, `delete_logs` and `_write_checkpoints_for_dir`. Synchronous; the
methods that open, close or rename logs block on disk.
"""

from __future__ import annotations

import logging
import os
import uuid
from pathlib import Path

from logbroker.storage.log import Log
from logbroker.types import TopicPartition

log = logging.getLogger("kafka.log.LogManager")

FUTURE_DIR_SUFFIX = "-future"


def future_dir_name(tp: TopicPartition) -> str:
    """`<topic>-<n>.<uuid hex>-future`, a replica being moved to another log dir (Kafka's)."""
    return f"{tp}.{uuid.uuid4().hex}{FUTURE_DIR_SUFFIX}"


class FutureLogs:
    """LogManager's future logs (see the module docstring)."""

    _future_logs: dict[TopicPartition, Log]
    _preferred_dirs: dict[TopicPartition, Path]

    def log_dir_of(self, path: str | os.PathLike) -> Path | None:
        """The configured log dir `path` names (absolute, normalised), or None."""
        wanted = Path(os.path.abspath(path))
        return wanted if wanted in self._log_dirs else None

    def prefer_log_dir(self, tp: TopicPartition, log_dir: Path) -> None:
        """Create `tp`'s log in `log_dir` when it comes (a move asked before the replica exists)."""
        with self._lock:
            self._preferred_dirs[tp] = log_dir

    def get_future_log(self, tp: TopicPartition) -> Log | None:
        return self._future_logs.get(tp)

    def future_logs_by_dir(self) -> dict[Path, list[Log]]:
        with self._lock:
            futures = list(self._future_logs.values())
        grouped: dict[Path, list[Log]] = {}
        for lg in futures:
            grouped.setdefault(lg.dir.parent, []).append(lg)
        return grouped

    def create_future_log(self, tp: TopicPartition, log_dir: Path) -> Log:
        """An empty future log of `tp` in `log_dir`, starting at the current log's start
        offset. The current log must exist elsewhere and no future log either. Blocks briefly."""
        with self._lock:
            current = self._logs[tp]
            assert tp not in self._future_logs and current.dir.parent != log_dir, tp
            future = Log.open(log_dir / future_dir_name(tp), current.config, clock=self._clock,
                              topic_id=current.topic_id, had_clean_shutdown=True,
                              producer_id_expiration_ms=self._producer_id_expiration_ms,
                              topic_partition=tp)
            future.truncate_fully_and_start_at(current.log_start_offset)
            self._future_logs[tp] = future
        log.info("Created future log for partition %s in %s", tp, future.dir)
        return future

    def abort_future_log(self, tp: TopicPartition) -> None:
        """Drop `tp`'s future log and its directory, if it has one. Blocks on disk."""
        with self._lock:
            future = self._future_logs.pop(tp, None)
        if future is not None:
            future.delete()
            log.info("Removed future log for partition %s", tp)

    def replace_current_with_future(self, tp: TopicPartition) -> Log:
        """Make the future log `tp`'s log: the caller has checked that it holds everything the
        current one does (same log end offset) and no append can come in meanwhile. The future
        log is closed, its dir renamed `<topic>-<n>` and reopened (clean: no recovery); the
        current one is renamed `…-delete` and removed file.delete.delay.ms later, so regions
        already handed out can still be sent. Returns the new log. Blocks on disk."""
        with self._lock:
            current = self._logs[tp]
            future = self._future_logs.pop(tp)
            high_watermark = current.high_watermark
            future.flush()
            future.close()
            target = future.dir.parent / str(tp)
            os.replace(future.dir, target)
            self.delete_logs([tp])  # the current one: renamed now, removed later
            moved = Log.open(target, current.config, clock=self._clock,
                             recovery_point=future.log_end_offset,
                             log_start_offset=future.log_start_offset,
                             high_watermark=high_watermark, had_clean_shutdown=True,
                             producer_id_expiration_ms=self._producer_id_expiration_ms,
                             topic_partition=tp)
            # A leader epoch begun without a batch yet (a new leader) is in the current log's
            # cache only: the copy learnt its epochs from batches.
            latest = current.leader_epoch_cache.latest_entry
            if latest is not None and (moved.latest_epoch is None or moved.latest_epoch < latest.epoch):
                moved.maybe_assign_epoch_start_offset(latest.epoch, latest.start_offset)
            self._logs[tp] = moved
            self._write_checkpoints_for_dir(target.parent)
        log.info("The log of partition %s moved from %s to %s", tp, current.dir.parent, target.parent)
        return moved
