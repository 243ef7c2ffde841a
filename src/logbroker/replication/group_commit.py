"""flush.before.ack: acknowledge a produce only once its batch is on disk, by group commits.

Kafka acknowledges from the page cache and counts on replication for durability: a record
acknowledged with acks=-1 survives any broker's crash, but not a power loss that takes every
in-sync replica at once before the kernel writes it back. The topic config `flush.before.ack`
(broker default `log.flush.before.ack`, both false by default; not Kafka keys) closes that gap:

- acks=-1 is answered only when every ISR member has the batch on disk. The leader fsyncs its own
  log by group commit (below); a follower fsyncs what it appended before its next fetch carries
  the new fetch offset (replication/fetcher.py), so the log end offset the leader records for a
  follower is durable on it. The produce completes when `acknowledged_end` passes the batch:
  min(high watermark, leader's recovery point), i.e. the minimum durable offset over the ISR.
- acks=1 ("the leader has it") is answered once the leader's copy is on disk; acks=0 is never
  answered, but its batch is committed with the others.
- Consumers still read up to the high watermark, which does not wait for any fsync. Hiding the
  records until they are durable everywhere is not needed for what the setting promises: every
  acknowledged record is on the disks of the ISR. A record that is visible but not yet
  acknowledged can vanish only when every ISR member loses power within the few milliseconds
  before its fsync, the same window Kafka's defaults leave open for every record.

Set it per topic (its config lives in the cluster metadata, so all replicas agree); a broker
default of `log.flush.before.ack=true` must be set on every broker, or a follower without it
reports offsets it has not fsynced.

Group commit: `request(log)` marks a log as awaited. A commit takes every marked log and runs
`Log.flush` on each (up to its log end) in a worker thread, which moves the log's recovery point;
then `on_flushed(log)` is called on the event loop for each, and the produces waiting there are
checked. At most one commit runs at a time; a commit starts no sooner than COMMIT_INTERVAL_MS
after the previous one started (after an idle spell, on the next turn of the event loop); logs
marked while one runs wait for the next. So under load one fsync per log answers every produce
that arrived during the previous fsync, and a broker starts fewer than 1000 / COMMIT_INTERVAL_MS
commits a second.

Invariant: when `on_flushed(log)` runs, `log.recovery_point` is at least the log end offset the
log had when `request(log)` was called, unless the commit failed: a failed fsync is logged
(KafkaStorageError) and its produces are answered by a later commit or time out.

Runs on the event loop; the fsyncs run in the default executor.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Iterable

from logbroker.errors import KafkaStorageError
from logbroker.storage.log import Log

log = logging.getLogger("kafka.log.LogFlushStats")

COMMIT_INTERVAL_MS = 2


def acknowledged_end(partition, required_acks: int) -> int:
    """The offset below which a produce with `required_acks` (1 or -1) on `partition` (a leader
    Partition) may be answered: the high watermark for acks=-1, the log end for acks=1; with
    flush.before.ack, no further than the leader's recovery point (what is fsynced here)."""
    end = partition.high_watermark if required_acks == -1 else partition.log.log_end_offset
    if partition.log.config.flush_before_ack:
        end = min(end, partition.log.recovery_point)
    return end


def flush_logs(logs: Iterable[Log]) -> None:
    """fsync each log up to its log end. Blocking: run it in a worker thread. Raises
    KafkaStorageError at the first log that cannot be flushed."""
    for log_ in logs:
        log_.flush()


class GroupCommit:
    """One broker's group commits: see the module docstring."""

    def __init__(self, *, on_flushed: Callable[[Log], None],
                 interval_ms: int = COMMIT_INTERVAL_MS) -> None:
        self._on_flushed = on_flushed
        self._interval_s = interval_ms / 1000
        self._awaited: dict[Log, None] = {}  # insertion-ordered set
        self._running = False
        self._timer: asyncio.TimerHandle | None = None
        self._last_start_s = float("-inf")
        self.commits = 0  # commits started; each flushes every log it covers once

    def request(self, log_: Log) -> None:
        """Have `log_` fsynced up to its current log end by the next commit."""
        self._awaited[log_] = None
        if not self._running and self._timer is None:
            self._schedule()

    def _schedule(self) -> None:
        # Even with no delay due, start on the next turn of the loop, so that every produce
        # already woken this turn (say, by the previous commit's answers) joins this commit.
        loop = asyncio.get_running_loop()
        delay_s = self._last_start_s + self._interval_s - loop.time()
        self._timer = loop.call_later(max(delay_s, 0.0), self._start)

    def _start(self) -> None:
        loop = asyncio.get_running_loop()
        self._timer = None
        logs, self._awaited = list(self._awaited), {}
        self._running = True
        self._last_start_s = loop.time()
        self.commits += 1
        future = loop.run_in_executor(None, _commit, logs)
        future.add_done_callback(functools.partial(self._committed, logs))

    def _committed(self, logs: list[Log], future: asyncio.Future) -> None:
        self._running = False
        if not future.cancelled() and future.exception() is not None:
            log.error("Group commit failed: %r", future.exception(), exc_info=future.exception())
        for log_ in logs:
            self._on_flushed(log_)
        if self._awaited:
            self._schedule()


def _commit(logs: list[Log]) -> None:
    """One commit in a worker thread: a log that fails does not hold back the others."""
    for log_ in logs:
        try:
            log_.flush()
        except KafkaStorageError as exc:
            log.error("Group commit of %s failed; its produces wait for the next one: %s",
                      log_.topic_partition, exc)
