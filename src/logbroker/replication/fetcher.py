"""Followers: one fetcher task per leader broker, copying the leader's log into ours.

Kafka's ReplicaFetcherThread, as an asyncio task. For each partition it follows from a leader it
first truncates (KIP-101): it asks the leader, with OffsetForLeaderEpoch, where the follower's
latest epoch ends in the leader's log and cuts its own log there — never to its own high
watermark, which could drop records the new leader still has (and that are acknowledged). Then it
fetches with its broker id as replica id, so the leader reads up to its log end and counts this
fetch's offset as the follower's log end offset; fetched batches are appended as they are
(`Log.append_as_follower`: offsets and epochs as assigned by the leader), and the follower's high
watermark follows the leader's, capped at its own log end; its log start follows the leader's,
and a follower below the leader's log start (OFFSET_OUT_OF_RANGE) starts its log over there.
Fetch v14 (topics by id): a follower below the leader's local log start of a tiered partition
(OFFSET_MOVED_TO_TIERED_STORAGE) does not copy the tiered history (Kafka's TierStateMachine): it
asks the leader for its earliest local offset and that offset's epoch (ListOffsets -4), and the
epoch before (OffsetForLeaderEpoch), then starts its log after the remote segment holding the
offset before, with that segment's leader epochs and producer snapshot (remote/aux_state.py).
When the store cannot give them, the partition waits AUX_STATE_BACKOFF_S (one log line a minute)
and tries again; the others go on fetching.

A new leader or leader epoch for a partition (from the state watches) re-adds it, which means
truncating again. Errors back off briefly and retry; leadership changes come from ZooKeeper, not
from the fetch errors. Runs on the event loop; the appends are page-cache writes, as the leader's,
and after each `on_appended` (ReplicaManager.after_follower_append) has a rolled segment fsynced
and the active one's writeback started in a worker thread, as for a leader.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from kio.schema.fetch.v14 import request as fetch_request
from kio.schema.list_offsets.v8 import request as list_offsets_request
from kio.schema.offset_for_leader_epoch.v4 import request as ofle_request

from logbroker.client import PLAINTEXT, ClientSecurity, KafkaConnection
from logbroker.errors import (
    KafkaError,
    KafkaStorageError,
    OffsetMovedToTieredStorageError,
    OffsetOutOfRangeError,
)
from logbroker.log_limits import RateLimitedLog
from logbroker.remote.aux_state import RemoteLogAuxStateError, read_aux_state, target_epoch
from logbroker.remote.storage_manager import RemoteStorageError
from logbroker.replication.group_commit import flush_logs
from logbroker.replication.partition import Partition
from logbroker.storage.log import EARLIEST_LOCAL_TIMESTAMP, Log
from logbroker.types import TopicPartition

log = logging.getLogger("kafka.server.ReplicaFetcherThread")

FETCH_MAX_WAIT_MS = 500
FETCH_MAX_BYTES = 16 * 1024 * 1024
PARTITION_MAX_BYTES = 1024 * 1024
BACKOFF_S = 0.1
AUX_STATE_BACKOFF_S = 1.0  # Kafka's replica.fetch.backoff.ms for a partition whose state failed


@dataclass(slots=True)
class FetchState:
    partition: Partition
    leader_epoch: int
    truncated: bool = False
    delayed_until: float = 0.0  # time.monotonic(): building the state from the store failed


class ReplicaFetcher:
    """Fetches every partition this broker follows from one leader broker."""

    def __init__(self, *, broker_id: int, leader_id: int,
                 leader_address: Callable[[int], tuple[str, int] | None],
                 security: ClientSecurity = PLAINTEXT,
                 on_progress: Callable[[TopicPartition], None] | None = None,
                 on_appended: Callable[[Log], None] | None = None,
                 remote_log_manager: Callable[[], object | None] = lambda: None) -> None:
        self.broker_id = broker_id
        self.leader_id = leader_id
        self._leader_address = leader_address
        self._security = security
        self._on_progress = on_progress
        self._on_appended = on_appended
        self._remote_log_manager = remote_log_manager
        self._aux_state_log = RateLimitedLog(log, burst=1, interval_s=60.0)
        self.partitions: dict[TopicPartition, FetchState] = {}
        self._wakeup = asyncio.Event()
        self._connection: KafkaConnection | None = None
        self._failing = False  # log a failure streak once, not every retry
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"fetcher-{leader_id}")

    def add(self, partition: Partition) -> None:
        self.partitions[partition.tp] = FetchState(partition, partition.leader_epoch)
        self._wakeup.set()

    def remove(self, tp: TopicPartition) -> None:
        self.partitions.pop(tp, None)

    async def close(self) -> None:
        # Python 3.11's wait_for drops a cancellation that lands just as the read it waits on
        # completes (fixed in 3.12), and the loop would then fetch on: cancel until it has ended.
        while not self._task.done():
            self._task.cancel()
            await asyncio.wait([self._task], timeout=0.1)
        if self._connection is not None:
            await self._connection.close()

    async def _run(self) -> None:
        while True:
            if not self.partitions:
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            try:
                connection = self._connect()
                if connection is None:
                    await asyncio.sleep(BACKOFF_S)
                    continue
                await self._truncate(connection)
                await self._fetch(connection)
                self._failing = False
            except asyncio.CancelledError:
                raise
            except KafkaError as exc:
                (log.debug if self._failing else log.info)(
                    "Fetch from broker %d failed (retrying every %d ms): %s", self.leader_id,
                    BACKOFF_S * 1000, exc)
                self._failing = True
                await asyncio.sleep(BACKOFF_S)
            except Exception:  # noqa: BLE001 - a bug must not stop replication for good
                log.exception("Fetcher for broker %d failed", self.leader_id)
                await asyncio.sleep(BACKOFF_S)

    def _connect(self) -> KafkaConnection | None:
        address = self._leader_address(self.leader_id)
        if address is None:
            return None
        if self._connection is None or (self._connection.host, self._connection.port) != address:
            self._connection = KafkaConnection(*address, client_id=f"broker-{self.broker_id}-fetcher",
                                               security=self._security)
        return self._connection

    async def _truncate(self, connection: KafkaConnection) -> None:
        """KIP-101: cut each newly added partition's log where its latest epoch ends at the leader."""
        pending = {tp: st for tp, st in self.partitions.items() if not st.truncated}
        if not pending:
            return
        asks = {}
        for tp, st in pending.items():
            latest = st.partition.log.latest_epoch
            if latest is None:  # nothing with an epoch: nothing that can diverge
                st.truncated = True
            else:
                asks[tp] = latest
        if not asks:
            return
        answers = await self._epoch_end_offsets(connection, {tp: (pending[tp], epoch) for tp, epoch in asks.items()})
        for tp, result in answers.items():
            st = self.partitions.get(tp)
            if st is None or st is not pending.get(tp) or int(result.error_code) != 0:
                continue
            self._truncate_one(st, int(result.leader_epoch), int(result.end_offset))

    async def _epoch_end_offsets(self, connection: KafkaConnection,
                                 asks: dict[TopicPartition, tuple[FetchState, int]]) -> dict:
        """OffsetForLeaderEpoch: where each asked epoch ends in the leader's log (its answers
        by partition)."""
        topics: dict[str, list] = {}
        for tp, (st, epoch) in asks.items():
            topics.setdefault(tp.topic, []).append(ofle_request.OffsetForLeaderPartition(
                partition=tp.partition, current_leader_epoch=st.leader_epoch, leader_epoch=epoch))
        response = await connection.request(ofle_request.OffsetForLeaderEpochRequest(
            replica_id=self.broker_id,
            topics=tuple(ofle_request.OffsetForLeaderTopic(topic=t, partitions=tuple(ps))
                         for t, ps in topics.items())))
        return {TopicPartition(topic.topic, result.partition): result
                for topic in response.topics for result in topic.partitions}

    def _truncate_one(self, st: FetchState, leader_epoch: int, leader_end_offset: int) -> None:
        log_ = st.partition.log
        target = truncation_offset(log_, leader_epoch, leader_end_offset)
        if target is not None and target < log_.log_end_offset:
            log.info("Truncating %s from %d to %d (leader epoch %d)", st.partition.tp,
                     log_.log_end_offset, target, leader_epoch)
            log_.truncate_to(target)
        st.truncated = True

    async def _fetch(self, connection: KafkaConnection) -> None:
        # flush.before.ack: the leader acknowledges from our fetch offset, so what lies below it
        # must be on disk first: one fsync per log per fetch round, off the event loop.
        unflushed = [st.partition.log for st in self.partitions.values()
                     if st.truncated and st.partition.log.config.flush_before_ack
                     and st.partition.log.recovery_point < st.partition.log.log_end_offset]
        if unflushed:
            await asyncio.get_running_loop().run_in_executor(None, flush_logs, unflushed)
        now = time.monotonic()
        states = {tp: st for tp, st in self.partitions.items() if st.truncated and st.delayed_until <= now}
        if not states:
            await asyncio.sleep(BACKOFF_S)
            return
        topics: dict = {}
        names = {}
        for tp, st in states.items():
            log_ = st.partition.log
            names[log_.topic_id] = tp.topic
            topics.setdefault(log_.topic_id, []).append(fetch_request.FetchPartition(
                partition=tp.partition, current_leader_epoch=st.leader_epoch,
                fetch_offset=log_.log_end_offset, last_fetched_epoch=_or_undefined(log_.latest_epoch),
                log_start_offset=log_.log_start_offset, partition_max_bytes=PARTITION_MAX_BYTES))
        response = await connection.request(fetch_request.FetchRequest(
            cluster_id=None, replica_id=self.broker_id,
            max_wait=datetime.timedelta(milliseconds=FETCH_MAX_WAIT_MS), min_bytes=1,
            max_bytes=FETCH_MAX_BYTES, isolation_level=0, session_id=0, session_epoch=-1,
            topics=tuple(fetch_request.FetchTopic(topic_id=t, partitions=tuple(ps)) for t, ps in topics.items()),
            forgotten_topics_data=(), rack_id=""))
        backoff = False
        for topic in response.responses:
            for data in topic.partitions:
                tp = TopicPartition(names.get(topic.topic_id, ""), data.partition_index)
                st = self.partitions.get(tp)
                if st is None or st is not states.get(tp):
                    continue  # removed or re-added (new epoch) while the fetch was out
                log_ = st.partition.log
                leader_log_start = int(data.log_start_offset)
                if int(data.error_code) == OffsetOutOfRangeError.code and log_.log_end_offset < leader_log_start:
                    # Below the leader's log start (a new or wiped replica, the leader's head
                    # deleted by retention or DeleteRecords): start over there, as Kafka's
                    # ReplicaFetcherThread does on OFFSET_OUT_OF_RANGE.
                    log_.truncate_fully_and_start_at(leader_log_start)
                    continue
                if int(data.error_code) == OffsetMovedToTieredStorageError.code:
                    await self._start_from_tiered_storage(connection, st)
                    continue
                if int(data.error_code) != 0:
                    backoff = True
                    continue
                if data.records:
                    log_.append_as_follower(data.records)
                    if self._on_appended is not None:
                        self._on_appended(log_)  # a rolled segment's fsync, the writeback step
                # The leader's high watermark, capped at our log end; never back (a new leader's
                # may lag ours until its followers fetch).
                high_watermark = min(int(data.high_watermark), log_.log_end_offset)
                if high_watermark > log_.high_watermark:
                    log_.update_high_watermark(high_watermark)
                    if self._on_progress is not None:
                        self._on_progress(tp)  # consumers reading from this follower (KIP-392)
                # The leader's log start, once we hold it (Kafka's follower does the same), so
                # records deleted on the leader go here too.
                if log_.log_start_offset < leader_log_start <= log_.high_watermark:
                    log_.maybe_increment_log_start_offset(leader_log_start)
        if backoff:
            await asyncio.sleep(BACKOFF_S)

    async def _start_from_tiered_storage(self, connection: KafkaConnection, st: FetchState) -> None:
        """Kafka's follower on OFFSET_MOVED_TO_TIERED_STORAGE: start the log after the remote
        segment holding the offset before the leader's earliest local one, with the leader
        epochs and producer state there (remote/aux_state.py), instead of copying what is
        tiered. When the store cannot give them: one log line, and the partition waits."""
        tp = st.partition.tp
        try:
            await self._build_remote_log_aux_state(connection, st)
        except (RemoteStorageError, KafkaStorageError) as exc:  # the store's or the local disk's
            st.delayed_until = time.monotonic() + AUX_STATE_BACKOFF_S
            self._aux_state_log.log(
                logging.WARNING, str(tp), "Cannot start %s from the leader's local log start: its "
                "state is not readable from tiered storage (retrying every %d ms): %s", tp,
                AUX_STATE_BACKOFF_S * 1000, exc)

    async def _build_remote_log_aux_state(self, connection: KafkaConnection, st: FetchState) -> None:
        tp = st.partition.tp
        rlm = self._remote_log_manager()
        if rlm is None:
            raise RemoteLogAuxStateError("remote.log.storage.system.enable is off on this broker")
        response = await connection.request(list_offsets_request.ListOffsetsRequest(
            replica_id=self.broker_id, isolation_level=0,
            topics=(list_offsets_request.ListOffsetsTopic(name=tp.topic, partitions=(
                list_offsets_request.ListOffsetsPartition(
                    partition_index=tp.partition, current_leader_epoch=st.leader_epoch,
                    timestamp=EARLIEST_LOCAL_TIMESTAMP),)),)))
        [answer] = [p for t in response.topics for p in t.partitions]
        if int(answer.error_code) != 0 or st is not self.partitions.get(tp):
            return
        local_start, epoch = int(answer.offset), int(answer.leader_epoch)
        earlier = None
        if epoch > 0:  # where the epoch before ends: the epoch of local_start - 1 may be older
            result = (await self._epoch_end_offsets(connection, {tp: (st, epoch - 1)}))[tp]
            if int(result.error_code) != 0:
                return
            earlier = (int(result.leader_epoch), int(result.end_offset))
        segments = await rlm.followed_segments(tp)
        if segments is None:
            raise RemoteLogAuxStateError(f"{tp} is not followed here as a tiered partition")
        aux = await read_aux_state(
            rlm.rsm, segments, tp=tp, local_start=local_start,
            epoch=target_epoch(local_start=local_start, epoch_at_local_start=epoch, earlier=earlier),
            epoch_at_local_start=epoch)
        if st is not self.partitions.get(tp):
            return  # removed or re-added meanwhile
        log.info("%s is below the leader's local log start %d: starting at %d with the %d leader "
                 "epoch(s) and %s producer(s) of remote segment %d-%d; the rest is in tiered storage",
                 tp, local_start, aux.next_offset, len(aux.epochs),
                 "no" if aux.producers is None else len(aux.producers),
                 aux.segment.start_offset, aux.segment.end_offset)
        st.partition.log.start_at_with_remote_state(aux.next_offset, epochs=aux.epochs, producers=aux.producers)


def truncation_offset(log_, leader_epoch: int, leader_end_offset: int) -> int | None:
    """Where a follower cuts its log after OffsetForLeaderEpoch answered (`leader_epoch`,
    `leader_end_offset`) for the follower's latest epoch; None: nothing to cut (the leader knows
    no such epoch, and fetching will tell). KIP-101/KIP-279: when the leader's answer is for an
    older epoch than ours, cut where that epoch ends in our own log too, so both logs agree up to
    the cut. Never the follower's own high watermark: that could drop records the new leader has."""
    if leader_end_offset < 0:
        return None
    target = leader_end_offset
    if leader_epoch != log_.latest_epoch:
        ours = log_.end_offset_for_epoch(leader_epoch)
        if ours is not None:
            target = min(target, ours[1])
    return min(target, log_.log_end_offset)


def _or_undefined(epoch: int | None) -> int:
    return -1 if epoch is None else epoch


class ReplicaFetcherManager:
    """The fetchers of this broker, one per leader it follows something from."""

    def __init__(self, *, broker_id: int, leader_address: Callable[[int], tuple[str, int] | None],
                 security: ClientSecurity = PLAINTEXT,
                 on_progress: Callable[[TopicPartition], None] | None = None,
                 on_appended: Callable[[Log], None] | None = None,
                 remote_log_manager: Callable[[], object | None] = lambda: None) -> None:
        """`on_progress(tp)` is called when a followed partition's high watermark moves,
        `on_appended(log)` after each append to a followed partition's log;
        `remote_log_manager()` is the broker's RemoteLogManager (None without tiered storage)."""
        self.broker_id = broker_id
        self._leader_address = leader_address
        self._security = security
        self._on_progress = on_progress
        self._on_appended = on_appended
        self._remote_log_manager = remote_log_manager
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self._closed = False

    def add_partition(self, partition: Partition) -> None:
        """Follow `partition` from its current leader (a leader of -1: wait for one). After
        close (the broker is stopping) nothing is followed any more."""
        self.remove_partition(partition.tp)
        if partition.leader_id < 0 or self._closed:
            return
        fetcher = self.fetchers.get(partition.leader_id)
        if fetcher is None:
            fetcher = self.fetchers[partition.leader_id] = ReplicaFetcher(
                broker_id=self.broker_id, leader_id=partition.leader_id, leader_address=self._leader_address,
                security=self._security, on_progress=self._on_progress, on_appended=self._on_appended,
                remote_log_manager=self._remote_log_manager)
        fetcher.add(partition)

    def remove_partition(self, tp: TopicPartition) -> None:
        for fetcher in self.fetchers.values():
            fetcher.remove(tp)

    async def close(self) -> None:
        self._closed = True
        fetchers, self.fetchers = list(self.fetchers.values()), {}
        await asyncio.gather(*(f.close() for f in fetchers))
