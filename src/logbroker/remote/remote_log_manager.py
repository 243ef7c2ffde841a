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

Reads: a consumer fetch below the local log start offset is served from the remote segment that
holds it (`read`), with the offset index and transaction index of each segment cached and the
.log read in ranges of at least READ_AHEAD_BYTES, kept for the next sequential fetch.

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

from logbroker.errors import (
    KafkaError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
)
from logbroker.log_limits import RateLimitedLog, StateChangeLog
from logbroker.records.batch import read_header
from logbroker.remote.metadata import (
    DELETE_SEGMENT_STARTED,
    LEADER_EPOCH,
    METADATA,
    OFFSET_INDEX,
    PRODUCER_SNAPSHOT,
    SEGMENT,
    TIME_INDEX,
    TRANSACTION_INDEX,
    RemoteLogSegmentMetadata,
    parse_object_name,
)
from logbroker.remote.remote_partition import RemotePartitionState
from logbroker.remote.remote_read import (
    PendingRemoteRead,
    batch_size_at,
    index_position,
    select_batches,
    time_index_offset,
)
from logbroker.remote.storage_manager import RemoteStorageManager
from logbroker.storage.checkpoints import random_kafka_uuid, uuid_to_kafka_str
from logbroker.storage.file_records import first_record_at_or_after
from logbroker.storage.log_segment import transaction_index_file
from logbroker.storage.transaction_index import decode_aborted_txns
from logbroker.storage.values import TimestampAndOffset
from logbroker.types import TopicPartition

log = logging.getLogger("kafka.log.remote.RemoteLogManager")
_read_log = RateLimitedLog(log, burst=5, interval_s=60.0)

READ_AHEAD_BYTES = 1 << 20
INDEX_CACHE_ENTRIES = 1024
CHUNK_CACHE_ENTRIES = 64


class RemoteLogManager:
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
        self._task_log = StateChangeLog(log, "Remote log manager task")
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

    def _lock(self, tp: TopicPartition) -> asyncio.Lock:
        return self._locks.setdefault(tp, asyncio.Lock())

    # --- the periodic task -----------------------------------------------------------------------

    async def run(self) -> None:
        """Forever: one pass over the tiered partitions led here, then sleep the task interval."""
        while True:
            await self.run_once()
            await asyncio.sleep(self.task_interval_ms / 1000)

    async def run_once(self) -> None:
        for tp in list(self.states):
            try:
                await self._run_partition(tp)
            except Exception as exc:  # noqa: BLE001 - a bug on one partition must not stop the task
                log.exception("Remote log manager task failed on %s", tp)
                self._task_log.failed(exc)

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
                elif not state.loaded:
                    await self._load(state, log_)
                if state.as_leader and not log_.config.remote_log_copy_disable:
                    await self._copy(state, log_)
                if state.as_leader:
                    await self._expire(state, log_)
            except KafkaError as exc:
                self._task_log.failed(exc)
                return
            self._task_log.succeeded()
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
        log.info("Loaded %d remote segment(s) of %s up to offset %d", len(kept), state.tp,
                 state.highest_offset)

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
            self._task_log.failed(exc)
            return
        await self._run_partition(tp)

    async def _read_floor(self, state: RemotePartitionState) -> int:
        keys = await self.rsm.list_keys(f"{state.directory}/log-start-offset")
        if not keys:
            return -1
        try:
            return int(await self.rsm.get(keys[0]))
        except ValueError:
            return -1

    # --- reads ------------------------------------------------------------------------------------

    def serves(self, tp: TopicPartition, log_, fetch_offset: int) -> bool:
        """Whether a fetch at `fetch_offset` is for the store: below the local log start and at
        or above the log start offset."""
        state = self.states.get(tp)
        if state is None or fetch_offset >= log_.log_start_offset:
            return False
        if not state.loaded:
            return True  # `read` waits for the store's listing (a leader just elected)
        earliest = state.earliest_offset()
        return earliest is not None and fetch_offset >= earliest

    async def read(self, tp: TopicPartition, log_, fetch_offset: int, *, max_bytes: int,
                   min_one_message: bool, read_committed: bool) -> tuple[bytes, tuple | None]:
        """The whole batches from the one holding `fetch_offset`, at most `max_bytes` (the first
        whole with `min_one_message`), from the remote segment holding it; and under
        read_committed the aborted transactions overlapping them, (producer id, first offset)."""
        state = self.states.get(tp)
        if state is not None and not state.loaded:
            await self._ensure_loaded(tp)
        earliest = state.earliest_offset() if state is not None else None
        segment = state.segment_for(fetch_offset) if earliest is not None and fetch_offset >= earliest else None
        if segment is None:
            raise OffsetOutOfRangeError(
                f"Received request for offset {fetch_offset} for partition {tp}, but the log "
                f"starts at offset {self.log_start_offset(tp, log_)}")
        fetch_offset = max(fetch_offset, segment.start_offset)
        self.fetch_requests += 1
        try:
            index = await self._index(segment, OFFSET_INDEX)
            position = index_position(index, segment.start_offset, fetch_offset)
            data = await self._records(segment, position, fetch_offset, max_bytes, min_one_message)
        except KafkaError:
            self.fetch_errors += 1
            raise
        self.fetch_bytes += len(data)
        if not read_committed:
            return data, None
        if not data:
            return data, ()
        upper = _next_offset_after(data)
        aborted = []
        for later in state.segments_after(segment):
            if later.start_offset >= upper:
                break
            if later.has_txn_index:
                for txn in decode_aborted_txns(await self._index(later, TRANSACTION_INDEX)):
                    if txn.last_offset >= fetch_offset and txn.first_offset < upper:
                        aborted.append(txn)
        aborted.extend(log_.collect_aborted_transactions(fetch_offset, upper))  # markers kept locally
        seen = {}
        for txn in aborted:
            seen[(txn.producer_id, txn.first_offset)] = None
        return data, tuple(seen)

    async def complete_reads(self, results: dict) -> dict:
        """Fetch results with their PendingRemoteRead records read from the store, concurrently,
        each answered within remote.fetch.max.wait.ms (else with no records this time)."""
        pending = {tp: r for tp, r in results.items() if type(r.records) is PendingRemoteRead}

        async def one(tp: TopicPartition, result):
            read = result.records
            partition = self.partitions.get(tp)
            if partition is None:
                return result._replace(error=NotLeaderOrFollowerError(f"This server no longer leads {tp}"),
                                       records=None)
            task = asyncio.get_running_loop().create_task(self.read(
                tp, partition.log, read.fetch_offset, max_bytes=read.size,
                min_one_message=read.min_one_message, read_committed=read.read_committed))
            done, _ = await asyncio.wait({task}, timeout=self.fetch_max_wait_ms / 1000)
            if not done:
                # Kafka's DelayedRemoteFetch on expiry: nothing for this partition this time. The
                # read goes on (what it loads and caches serves the client's next fetch).
                self.fetch_timeouts += 1
                task.add_done_callback(_consume_result)
                return result._replace(records=None, aborted_transactions=() if read.read_committed else None)
            try:
                data, aborted = task.result()
            except KafkaError as exc:
                _read_log.log(logging.WARNING, type(exc).__name__, "Remote read of %s failed: %s", tp, exc)
                return result._replace(error=exc, records=None)
            return result._replace(records=data or None, aborted_transactions=aborted)

        if not pending:
            return results
        done = await asyncio.gather(*(one(tp, r) for tp, r in pending.items()))
        merged = dict(results)
        merged.update(zip(pending, done))
        return merged

    async def _records(self, segment: RemoteLogSegmentMetadata, position: int, fetch_offset: int,
                       max_bytes: int, min_one_message: bool) -> bytes:
        window = max(max_bytes, READ_AHEAD_BYTES)
        while position < segment.segment_size_in_bytes:
            chunk = await self._chunk(segment, position, window)
            start, end, needed = select_batches(chunk, fetch_offset=fetch_offset, max_bytes=max_bytes,
                                                min_one_message=min_one_message)
            if needed is not None:
                return await self.rsm.fetch_log_segment(segment, position + start, position + start + needed)
            if end > start or position + len(chunk) >= segment.segment_size_in_bytes:
                return chunk[start:end]
            position += start  # the batch to start from did not fit the chunk: read from it
            window = max(window, 2 * len(chunk))
        return b""

    async def _chunk(self, segment: RemoteLogSegmentMetadata, position: int, window: int) -> bytes:
        """Bytes of the .log from `position`, at least `window` of them where the segment has
        them, from the read-ahead cache when it holds them."""
        cached = self._chunks.get(segment.segment_id)
        if cached is not None:
            start, data = cached
            if start <= position and (position + window <= start + len(data)
                                      or start + len(data) >= segment.segment_size_in_bytes) \
                    and position < start + len(data):
                self._chunks.move_to_end(segment.segment_id)
                return data[position - start:]
        data = await self.rsm.fetch_log_segment(segment, position, position + window)
        self._chunks[segment.segment_id] = (position, data)
        if len(self._chunks) > CHUNK_CACHE_ENTRIES:
            self._chunks.popitem(last=False)
        return data

    async def _index(self, segment: RemoteLogSegmentMetadata, suffix: str) -> bytes:
        key = (segment.segment_id, suffix)
        data = self._indexes.get(key)
        if data is None:
            data = await self.rsm.fetch_file(segment, suffix)
            self._indexes[key] = data
            if len(self._indexes) > INDEX_CACHE_ENTRIES:
                self._indexes.popitem(last=False)
        else:
            self._indexes.move_to_end(key)
        return data

    # --- timestamps -------------------------------------------------------------------------------

    def may_hold_timestamp(self, tp: TopicPartition, log_, timestamp: int) -> bool:
        """Whether ListOffsets for `timestamp` must look in the store: a remote segment below the
        local log start reaches it (or the store is not listed yet)."""
        state = self.states.get(tp)
        if state is None:
            return False
        if not state.loaded:
            return True
        return any(s.max_timestamp_ms >= timestamp and s.start_offset < log_.log_start_offset
                   for s in state.segments)

    async def find_offset_by_timestamp(self, tp: TopicPartition, log_, timestamp: int):
        """The first record in the remote segments, at or after the log start offset, whose
        timestamp is at least `timestamp` (a TimestampAndOffset), or None. Reads each candidate
        segment's time and offset indexes, then its batches from there; decodes one batch."""
        state = self.states.get(tp)
        if state is not None and not state.loaded:
            await self._ensure_loaded(tp)
        earliest = state.earliest_offset() if state is not None else None
        if earliest is None:
            return None
        for segment in list(state.segments):
            if segment.end_offset < earliest or segment.max_timestamp_ms < timestamp:
                continue
            start_offset = max(earliest, segment.start_offset,
                               time_index_offset(await self._index(segment, TIME_INDEX),
                                                 segment.start_offset, timestamp))
            position = index_position(await self._index(segment, OFFSET_INDEX), segment.start_offset,
                                      start_offset)
            found = await self._search_batches(segment, position, timestamp, start_offset)
            if found is not None:
                return found
        return None

    async def _search_batches(self, segment: RemoteLogSegmentMetadata, position: int, timestamp: int,
                              start_offset: int):
        while position < segment.segment_size_in_bytes:
            chunk = await self._chunk(segment, position, READ_AHEAD_BYTES)
            at = 0
            while (size := batch_size_at(chunk, at)) is not None and at + size <= len(chunk):
                header = read_header(chunk, at)
                if header.max_timestamp >= timestamp and header.last_offset >= start_offset:
                    found = first_record_at_or_after(header, memoryview(chunk)[at:at + size], timestamp,
                                                     start_offset)
                    if found is not None:
                        epoch = header.partition_leader_epoch
                        return TimestampAndOffset(found[0], found[1], epoch if epoch >= 0 else -1)
                at += size
            if at == 0:  # a batch larger than the chunk: read exactly it
                size = batch_size_at(chunk, 0)
                if size is None:
                    return None
                chunk = await self.rsm.fetch_log_segment(segment, position, position + size)
                self._chunks[segment.segment_id] = (position, chunk)
                continue
            position += at
        return None

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


def _consume_result(task: asyncio.Task) -> None:
    """A remote read no fetch waits for any more: its error is not worth a traceback."""
    if not task.cancelled() and task.exception() is not None:
        log.debug("Remote read finished after its fetch: %r", task.exception())


def _next_offset_after(data: bytes) -> int:
    """The offset after the last batch in `data` (whole batches)."""
    position, last = 0, -1
    while position < len(data):
        header = read_header(data, position)
        last = header.last_offset
        position += header.size_in_bytes
    return last + 1
