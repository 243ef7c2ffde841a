"""The remote log manager (Kafka's RemoteLogManager): copies, expiry and reads of tiered partitions.

For each partition this broker leads whose topic has remote.storage.enable, every
remote.log.manager.task.interval.ms:

1. load (once per leadership): list the partition's directory in the store; delete the objects of
   crashed uploads (no COPY_SEGMENT_FINISHED metadata) and finish interrupted deletions
   (DELETE_SEGMENT_STARTED); drop a segment wholly covered by earlier ones (a copy two leaders
   both made); tell the log how far the copies reach.
2. copy: each closed segment whose next segment starts at or below the last stable offset and
   that reaches past the highest copied offset — its .log, .index, .timeindex, .txnindex (when it
   has aborted transactions), the producer snapshot at the next segment's base offset and the
   leader epochs up to there — under a fresh segment id; the metadata written last commits it.
   The log's local retention (local.retention.*) may then delete the local copy.
3. expire: remote segments wholly below the log start offset (DeleteRecords), past retention.ms,
   or over retention.bytes counting local and remote bytes together, oldest first.

Reads (fetches below the local log start, timestamp lookups) are in remote_log_reads.py.
Followers of a tiered partition only read the store's metadata, to learn how far the leader
copied (so their local retention deletes the same segments).

The log start offset of a tiered partition (Kafka's UnifiedLog.logStartOffset) is the earliest
offset still in the store (`log_start_offset`); the log's own is the local log start offset.

Threads: runs on the event loop; the store's I/O is awaited (remote/storage_manager.py), file
deletions of local retention go to the thread executor. Each partition's work is serialised by
its own lock.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict

from logbroker.errors import KafkaError
from logbroker.log_limits import RateLimitedLog
from logbroker.remote.metadata import (
    DELETE_SEGMENT_STARTED,
    LEADER_EPOCH,
    METADATA,
    OFFSET_INDEX,
    PRODUCER_SNAPSHOT,
    RESTORING,
    SEGMENT,
    TIME_INDEX,
    TRANSACTION_INDEX,
    RemoteLogSegmentMetadata,
    parse_object_name,
)
from logbroker.remote.remote_log_reads import RemoteLogReads
from logbroker.remote.remote_partition import RemotePartitionState
from logbroker.remote.storage_manager import RemoteResourceNotFoundError, RemoteStorageManager
from logbroker.storage.checkpoints import random_kafka_uuid, uuid_to_kafka_str
from logbroker.storage.log_segment import transaction_index_file
from logbroker.types import TopicPartition

log = logging.getLogger("kafka.log.remote.RemoteLogManager")


def _holds_nothing(log_) -> bool:
    return log_.log_end_offset == log_.log_start_offset


class RemoteLogManager(RemoteLogReads):
    """See the module docstring. `partitions` is the broker's ReplicaManager.partitions."""

    def __init__(self, *, rsm: RemoteStorageManager, broker_id: int, clock, partitions: dict,
                 task_interval_ms: int, fetch_max_wait_ms: int) -> None:
        self.rsm = rsm
        self.broker_id = broker_id
        self.clock = clock
        self.partitions = partitions
        self.task_interval_ms = task_interval_ms
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.states: dict[TopicPartition, RemotePartitionState] = {}
        self._locks: dict[TopicPartition, asyncio.Lock] = {}
        self._indexes: OrderedDict[tuple[str, str], bytes] = OrderedDict()
        self._chunks: OrderedDict[str, tuple[int, bytes]] = OrderedDict()
        # A failing store fails every pass of every partition: a few lines a minute per partition.
        self._task_log = RateLimitedLog(log, burst=3, interval_s=60.0)
        # Counters for the metrics (Kafka's RemoteCopyBytesPerSec, RemoteFetchBytesPerSec, …).
        self.copy_bytes = self.copy_requests = self.copy_errors = 0
        self.fetch_bytes = self.fetch_requests = self.fetch_errors = self.fetch_timeouts = 0
        self.delete_requests = self.delete_errors = 0

    # --- leadership ----------------------------------------------------------------------------

    def on_leadership(self, tp: TopicPartition, partition) -> None:
        """A ReplicaManager leadership listener: track the tiered partitions hosted here. Each
        change of role starts from a fresh state: a new leader loads (and cleans) the store."""
        if partition is None or not partition.log.config.remote_storage_enable \
                or partition.log.topic_id is None:
            self.states.pop(tp, None)
            return
        state = RemotePartitionState(tp, uuid_to_kafka_str(partition.log.topic_id))
        state.as_leader = partition.is_leader
        self.states[tp] = state
        asyncio.get_running_loop().create_task(self._run_partition(tp), name=f"remote-log {tp}")

    def _configs_changed(self, tp: TopicPartition, partition) -> None:
        """remote.storage.enable turned on (start tiering) or off: as Kafka, turning it off needs
        remote.log.delete.on.disable, and the leader then deletes the partition's remote data."""
        state = self.states.get(tp)
        if state is None:
            self.on_leadership(tp, partition)
            return
        self.states.pop(tp, None)
        if state.as_leader and partition.log.config.remote_log_delete_on_disable:
            log.info("Remote storage disabled for %s: deleting its remote data", tp)
            asyncio.get_running_loop().create_task(self.delete_partitions([tp], partition.log.topic_id))

    def _lock(self, tp: TopicPartition) -> asyncio.Lock:
        return self._locks.setdefault(tp, asyncio.Lock())

    # --- the periodic task -----------------------------------------------------------------------

    async def run(self) -> None:
        """Forever: one pass over the tiered partitions led here, then sleep the task interval."""
        while True:
            await self.run_once()
            await asyncio.sleep(self.task_interval_ms / 1000)

    async def run_once(self) -> None:
        for tp, partition in list(self.partitions.items()):  # topics whose remote.storage.enable changed
            if (tp in self.states) != (partition.log.config.remote_storage_enable
                                       and partition.log.topic_id is not None):
                self._configs_changed(tp, partition)
        for tp in list(self.states):
            try:
                await self._run_partition(tp)
            except Exception:  # noqa: BLE001 - a bug on one partition must not stop the task
                log.exception("Remote log manager task failed on %s", tp)

    async def _run_partition(self, tp: TopicPartition) -> None:
        async with self._lock(tp):
            state = self.states.get(tp)
            partition = self.partitions.get(tp)
            if state is None or partition is None or partition.is_leader != state.as_leader:
                return
            log_ = partition.log
            try:
                if not state.as_leader:
                    await self._follow(state, log_)
                elif not state.loaded or (not state.segments and _holds_nothing(log_)):
                    # An empty log keeps looking: a restored topic's segments may arrive.
                    try:
                        await self._load(state, log_)
                    except KafkaError:
                        self.copy_errors += 1  # nothing is copied while the store cannot be listed
                        raise
                if state.as_leader and not log_.config.remote_log_copy_disable:
                    await self._copy(state, log_)
                if state.as_leader:
                    await self._expire(state, log_)
            except KafkaError as exc:
                self._task_log.log(logging.ERROR, str(tp), "Remote log manager task failed on %s: %s "
                                   "(local segments are kept until their copy succeeds)", tp, exc)
                return
        await asyncio.get_running_loop().run_in_executor(None, log_.delete_old_segments)

    async def _ensure_loaded(self, tp: TopicPartition) -> None:
        async with self._lock(tp):
            state = self.states.get(tp)
            partition = self.partitions.get(tp)
            if state is None or state.loaded or partition is None:
                return
            if state.as_leader:
                await self._load(state, partition.log)
            else:
                await self._follow(state, partition.log)

    async def _load(self, state: RemotePartitionState, log_) -> None:
        if await self.rsm.exists(f"{state.directory}/{RESTORING}"):
            return  # `logbroker restore-topic` is still copying: its objects are no orphans
        segments, orphans = await self.rsm.list_partition(state.directory)
        if orphans:
            log.info("Deleting %d object(s) of unfinished copies of %s: %s", len(orphans), state.tp,
                     ", ".join(sorted(orphans)[:6]))
            await self.rsm.delete_keys(orphans)
        kept: list[RemoteLogSegmentMetadata] = []
        for segment in segments:
            covered = any(k.start_offset <= segment.start_offset and k.end_offset >= segment.end_offset
                          for k in kept)
            if segment.state == DELETE_SEGMENT_STARTED or covered:
                await self._delete_segment(segment)
            else:
                kept.append(segment)
        state.segments = kept
        state.log_start_floor = await self._read_floor(state)
        state.loaded = True
        log_.update_highest_offset_in_remote_storage(state.highest_offset)
        if kept and _holds_nothing(log_) and log_.log_end_offset <= state.highest_offset:
            # An erased disk, or a topic restored from the store: the log goes on after the
            # store's last offset instead of writing offsets the store already has.
            start = state.highest_offset + 1
            log.info("The local log of %s is empty and the remote store holds offsets up to %d: "
                     "starting the local log at %d", state.tp, state.highest_offset, start)
            # On the event loop, right after the check: no append can come in between (and an
            # empty log's one segment is quick to replace).
            log_.truncate_fully_and_start_at(start)
        log.log(logging.INFO if kept else logging.DEBUG, "Loaded %d remote segment(s) of %s up to offset %d",
                len(kept), state.tp, state.highest_offset)

    async def _follow(self, state: RemotePartitionState, log_) -> None:
        """A follower learns what the leader copied (Kafka's followers read it from
        __remote_log_metadata), so its local retention deletes those segments too. Reads only
        the metadata objects it has not seen; deletes nothing in the store."""
        known = {s.segment_id: s for s in state.segments}
        found = []
        for key in await self.rsm.list_keys(state.directory + "/"):
            parsed = parse_object_name(key.rsplit("/", 1)[-1])
            if parsed is None or parsed[2] != METADATA:
                continue
            segment = known.get(parsed[1])
            if segment is None:
                try:
                    segment = RemoteLogSegmentMetadata.from_json(await self.rsm.get(key))
                except (KafkaError, ValueError, KeyError, TypeError):
                    continue  # being deleted, or not ours to judge: the leader cleans up
            if segment.state != DELETE_SEGMENT_STARTED:
                found.append(segment)
        state.segments = sorted(found, key=lambda m: (m.start_offset, m.end_offset))
        state.loaded = True
        log_.update_highest_offset_in_remote_storage(state.highest_offset)

    async def _copy(self, state: RemotePartitionState, log_) -> None:
        segments = log_.segments
        for segment, following in zip(segments, segments[1:]):
            end_offset = following.base_offset - 1
            if end_offset <= state.highest_offset:
                continue
            if following.base_offset > log_.last_stable_offset:
                break
            await self._copy_segment(state, log_, segment, following.base_offset)

    async def _copy_segment(self, state: RemotePartitionState, log_, segment, next_offset: int) -> None:
        epochs = [e for e in log_.leader_epoch_cache.entries if e.start_offset < next_offset]
        in_segment = {}
        for i, entry in enumerate(epochs):
            following = epochs[i + 1].start_offset if i + 1 < len(epochs) else next_offset
            if following > segment.base_offset:
                in_segment[entry.epoch] = max(entry.start_offset, segment.base_offset)
        txn_path = transaction_index_file(log_.dir, segment.base_offset)
        snapshot = log_.producer_state.snapshot_path(next_offset)
        has_txn = txn_path.exists() and txn_path.stat().st_size > 0
        has_snapshot = snapshot.exists()
        metadata = RemoteLogSegmentMetadata(
            topic=state.tp.topic, partition=state.tp.partition, topic_id=state.topic_id_str,
            segment_id=uuid_to_kafka_str(random_kafka_uuid()), start_offset=segment.base_offset,
            end_offset=next_offset - 1, max_timestamp_ms=segment.largest_timestamp,
            broker_id=self.broker_id, event_timestamp_ms=self.clock.time_ms(),
            segment_size_in_bytes=segment.size, segment_leader_epochs=in_segment,
            has_txn_index=has_txn, has_producer_snapshot=has_snapshot)
        checkpoint = "0\n%d\n%s" % (len(epochs), "".join(f"{e.epoch} {e.start_offset}\n" for e in epochs))
        files = {SEGMENT: segment.log.path, OFFSET_INDEX: segment.offset_index_path,
                 TIME_INDEX: segment.time_index_path, LEADER_EPOCH: checkpoint.encode()}
        if has_txn:
            files[TRANSACTION_INDEX] = txn_path
        if has_snapshot:
            files[PRODUCER_SNAPSHOT] = snapshot
        try:
            await self.rsm.copy_log_segment_data(metadata, files)
        except KafkaError:
            self.copy_errors += 1
            try:  # what was written is an orphan now (the next load would delete it too)
                await self.rsm.delete_keys(metadata.data_keys())
            except KafkaError:
                pass
            raise
        state.add(metadata)
        log_.update_highest_offset_in_remote_storage(metadata.end_offset)
        self.copy_bytes += metadata.segment_size_in_bytes
        self.copy_requests += 1
        log.info("Copied segment %d-%d of %s to the remote store (%d bytes, id %s)",
                 metadata.start_offset, metadata.end_offset, state.tp,
                 metadata.segment_size_in_bytes, metadata.segment_id)

    async def _expire(self, state: RemotePartitionState, log_) -> None:
        config = log_.config
        now_ms = self.clock.time_ms()
        doomed = [s for s in state.segments if s.end_offset < state.log_start_floor]
        if config.retention_ms >= 0:
            for segment in state.segments:
                if now_ms - segment.max_timestamp_ms <= config.retention_ms:
                    break
                doomed.append(segment)
        if config.retention_bytes >= 0:
            local_only = sum(s.size for s in log_.segments if s.base_offset > state.highest_offset)
            excess = state.size_in_bytes + local_only - config.retention_bytes
            for segment in state.segments:
                if excess < segment.segment_size_in_bytes:
                    break
                excess -= segment.segment_size_in_bytes
                doomed.append(segment)
        for segment in {s.segment_id: s for s in doomed}.values():
            await self._delete_segment(segment)
            state.remove(segment)
            log.info("Deleted remote segment %d-%d of %s", segment.start_offset, segment.end_offset,
                     state.tp)

    async def _delete_segment(self, segment: RemoteLogSegmentMetadata) -> None:
        self.delete_requests += 1
        try:
            await self.rsm.delete_log_segment_data(segment)
        except KafkaError:
            self.delete_errors += 1
            raise
        for suffix in (OFFSET_INDEX, TRANSACTION_INDEX):
            self._indexes.pop((segment.segment_id, suffix), None)
        self._chunks.pop(segment.segment_id, None)

    # --- log start offset -----------------------------------------------------------------------

    def log_start_offset(self, tp: TopicPartition, log_) -> int:
        """Kafka's logStartOffset: the earliest offset in the store, else the local log start."""
        state = self.states.get(tp)
        earliest = state.earliest_offset() if state is not None else None
        return log_.log_start_offset if earliest is None else min(earliest, log_.log_start_offset)

    def copy_lag(self, tp: TopicPartition, log_) -> tuple[int, int]:
        """(bytes, segments) of the closed local segments not yet copied (RemoteCopyLag*)."""
        state = self.states.get(tp)
        highest = -1 if state is None else state.highest_offset
        segments = log_.segments
        waiting = [s for s, following in zip(segments, segments[1:]) if following.base_offset - 1 > highest]
        return sum(s.size for s in waiting), len(waiting)

    def highest_offset(self, tp: TopicPartition) -> int:
        """The last offset copied to the store, -1 when none (ListOffsets -5)."""
        state = self.states.get(tp)
        return -1 if state is None else state.highest_offset

    async def followed_segments(self, tp: TopicPartition) -> list[RemoteLogSegmentMetadata] | None:
        """The remote segments of a partition followed here, read from the store now (for a
        follower rebuilding its state from them: aux_state.py); None when the partition is not
        followed here as a tiered one. RemoteStorageError when the store cannot be listed."""
        async with self._lock(tp):
            state = self.states.get(tp)
            partition = self.partitions.get(tp)
            if state is None or state.as_leader or partition is None:
                return None
            await self._follow(state, partition.log)
            return list(state.segments)

    def epoch_for_offset(self, tp: TopicPartition, offset: int) -> int | None:
        state = self.states.get(tp)
        segment = state.segment_for(offset) if state is not None else None
        if segment is None:
            return None
        epochs = [e for e, start in segment.segment_leader_epochs.items() if start <= offset]
        return max(epochs) if epochs else None

    def delete_records(self, tp: TopicPartition, offset: int) -> None:
        """DeleteRecords: the log start offset is now `offset`. Kept in the store (as
        `<dir>/log-start-offset`, so it survives a restart) and the remote segments wholly below
        it expire, in the background."""
        state = self.states.get(tp)
        if state is None or offset <= state.log_start_floor:
            return
        state.log_start_floor = offset
        asyncio.get_running_loop().create_task(self._save_floor(tp, state, offset))

    async def _save_floor(self, tp: TopicPartition, state: RemotePartitionState, offset: int) -> None:
        try:
            await self.rsm.put(f"{state.directory}/log-start-offset", str(offset).encode())
        except KafkaError as exc:
            self._task_log.log(logging.ERROR, str(tp), "Saving the log start offset of %s failed: %s", tp, exc)
            return
        await self._run_partition(tp)

    async def _read_floor(self, state: RemotePartitionState) -> int:
        try:
            return int(await self.rsm.get(f"{state.directory}/log-start-offset"))
        except RemoteResourceNotFoundError:
            return -1
        except ValueError:
            log.error("Ignoring an unreadable log-start-offset object of %s", state.tp)
            return -1

    # --- topic deletion ---------------------------------------------------------------------------

    async def delete_partitions(self, tps: list[TopicPartition], topic_id) -> None:
        """A deleted topic: every object of its partitions' directories goes."""
        topic_id_str = uuid_to_kafka_str(topic_id)
        for tp in tps:
            self.states.pop(tp, None)
            state = RemotePartitionState(tp, topic_id_str)
            async with self._lock(tp):  # after a copy in progress
                keys = await self.rsm.list_keys(state.directory + "/")
                await self.rsm.delete_keys(keys)
            if keys:
                log.info("Deleted %d remote object(s) of %s", len(keys), tp)

