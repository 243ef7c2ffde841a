"""Moving a replica to another log dir of this broker while it serves (Kafka's
ReplicaAlterLogDirsManager and its future replicas).

AlterReplicaLogDirs makes an empty future log `<topic>-<n>.<uuid>-future` in the target dir; a
task on the event loop then copies the current log into it, batch by batch as a follower would
(`append_as_follower`: offsets, epochs and producer state as written), a chunk per turn of the
loop, while producers and consumers go on using the current log; all moves together copy at
most `replica.alter.log.dirs.io.max.bytes.per.second` (unlimited by default), as Kafka's quota.
Once the future log has reached the current log's end it is flushed off the loop, catches up the
little written meanwhile, and — in one synchronous step on the event loop, where every append
runs, so none can slip in between the last check and the swap — replaces the current log
(LogManager.replace_current_with_future) and becomes the partition's log. Nothing is lost or
reordered: the copy holds every offset of the current log when the two are swapped.

The current log may change under the copy: retention or DeleteRecords move its start past what
was copied (the copy starts again at the new start), and a follower may truncate it after a
leader change (the copy is truncated to where the two agree, by the current log's leader epochs,
as a follower would after OffsetForLeaderEpoch). A move ends when it is done, when the partition
leaves this broker or its topic is deleted (the future log is dropped), or at shutdown (the
future dir is removed at the next start).
"""

from __future__ import annotations

import asyncio
import logging
import os
import struct
from pathlib import Path

from logbroker.errors import KafkaError, ReplicaNotAvailableError
from logbroker.types import TopicPartition

log = logging.getLogger("kafka.server.ReplicaAlterLogDirsManager")

COPY_CHUNK_BYTES = 1 << 20
_BASE_OFFSET = struct.Struct(">q")  # a record batch's first field


class ReplicaLogDirMover:
    """The replica moves in progress on one broker, one task per partition. Event loop only."""

    def __init__(self, broker) -> None:
        self._broker = broker
        self._tasks: dict[TopicPartition, asyncio.Task] = {}
        self._copy_allowed_at = 0.0  # loop time from which the next chunk may be copied (the throttle)

    def move(self, tp: TopicPartition, log_dir: Path) -> None:
        """Start moving `tp`'s replica to `log_dir` (a configured dir), unless it is there or
        on its way there; a move to another dir is given up for this one. ReplicaNotAvailable
        when this broker has no replica of `tp` (its log is then created in `log_dir` when it
        comes, as Kafka). Blocks briefly on disk (creating the future log)."""
        manager = self._broker.log_manager
        current = manager.get_log(tp)
        if current is None or tp not in self._broker.replica_manager.partitions:
            manager.prefer_log_dir(tp, log_dir)
            raise ReplicaNotAvailableError(f"Replica of {tp} is not available on this broker")
        future = manager.get_future_log(tp)
        if future is not None and future.dir.parent == log_dir:
            return
        self.cancel(tp)
        if current.dir.parent == log_dir:
            return
        manager.create_future_log(tp, log_dir)
        task = asyncio.get_running_loop().create_task(self._copy(tp), name=f"move {tp}")
        self._tasks[tp] = task
        task.add_done_callback(lambda t, tp=tp: self._tasks.pop(tp, None) if self._tasks.get(tp) is t else None)

    def cancel(self, tp: TopicPartition) -> None:
        """Stop moving `tp` and drop its future log. Blocks briefly on disk."""
        task = self._tasks.pop(tp, None)
        if task is not None:
            task.cancel()
        self._broker.log_manager.abort_future_log(tp)

    async def close(self) -> None:
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _copy(self, tp: TopicPartition) -> None:
        manager = self._broker.log_manager
        flushed = False
        try:
            while True:
                partition = self._broker.replica_manager.partitions.get(tp)
                future = manager.get_future_log(tp)
                if partition is None or future is None or manager.get_log(tp) is not partition.log:
                    log.info("Stopped moving %s: the partition left this broker", tp)
                    manager.abort_future_log(tp)
                    return
                current = partition.log
                _align(current, future)
                if future.log_end_offset < current.log_end_offset:
                    region = current.read(future.log_end_offset, max_bytes=COPY_CHUNK_BYTES).region
                    chunk = os.pread(region.fd, region.size, region.position)
                    (first_base_offset,) = _BASE_OFFSET.unpack_from(chunk)
                    if first_base_offset < future.log_end_offset == future.log_start_offset:
                        # The current log starts inside this batch (DeleteRecords): the copy
                        # starts with the whole batch, then moves its log start up (`_align`),
                        # as Kafka's Partition does for a future replica.
                        future.truncate_fully_and_start_at(first_base_offset)
                    future.append_as_follower(chunk)
                    await self._throttle(len(chunk))
                elif not flushed:  # the bulk goes to disk off the loop; the swap flushes the rest
                    await asyncio.get_running_loop().run_in_executor(None, future.flush)
                    flushed = True
                else:
                    partition.log = manager.replace_current_with_future(tp)
                    return
        except (KafkaError, OSError) as e:
            log.error("Moving the replica of %s failed, the replica stays where it is: %s", tp, e)
            manager.abort_future_log(tp)

    async def _throttle(self, copied_bytes: int) -> None:
        """Hold every move to replica.alter.log.dirs.io.max.bytes.per.second together (Kafka's
        AlterLogDirs replication quota), and let the loop serve other work between chunks."""
        loop = asyncio.get_running_loop()
        rate = self._broker.config.replica_alter_log_dirs_io_max_bytes_per_second
        self._copy_allowed_at = max(self._copy_allowed_at, loop.time()) + copied_bytes / rate
        await asyncio.sleep(max(self._copy_allowed_at - loop.time(), 0))


def _align(current, future) -> None:
    """Make `future` a prefix of `current` again after the current log's start moved up or its
    end was truncated. Blocks briefly on disk."""
    if future.log_end_offset < current.log_start_offset:
        future.truncate_fully_and_start_at(current.log_start_offset)
        return
    if future.log_start_offset < current.log_start_offset:
        future.update_high_watermark(max(future.high_watermark, current.log_start_offset))
        future.maybe_increment_log_start_offset(current.log_start_offset)
    epoch = future.latest_epoch
    if epoch is not None:
        agreed = current.end_offset_for_epoch(epoch)
        end = current.log_start_offset if agreed is None else min(agreed[1], current.log_end_offset)
        if end < future.log_end_offset:
            future.truncate_to(end)
    if future.log_end_offset > current.log_end_offset:
        future.truncate_to(current.log_end_offset)
