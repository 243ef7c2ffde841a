"""ReplicaManager: the partitions this broker hosts, and the produce and fetch paths through them.

Kafka's ReplicaManager (seed 003). Produce: validate acks, append each partition's batch to its
leader, answer at once for acks 0/1, or park an acks=-1 request in the produce purgatory until the
high watermark passes every batch (or the timeout). Fetch: read each partition as a file region
(never the bytes), and when fewer than min.bytes are there, park the fetch in the fetch purgatory
until an append brings enough or max.wait.ms passes (read_committed: until the last stable offset
moves past enough, which an append, a marker or a high watermark move re-checks). Transaction
markers (WriteTxnMarkers) are the leader's own appends, waited for like acks=-1.

Errors stay typed per partition (`KafkaError` in the results); `server/dispatch.py` turns them into
codes. Runs on the event loop; appends are page-cache writes, fsyncs go to the thread executor.
"""

from __future__ import annotations

import asyncio
import inspect
import uuid
import logging
from collections.abc import Awaitable, Callable
from typing import NamedTuple

from logbroker.clock import Clock
from logbroker.errors import (
    InvalidProducerEpochError,
    InvalidRequiredAcksError,
    InvalidTxnStateError,
    KafkaError,
    KafkaStorageError,
    NotEnoughReplicasAfterAppendError,
    NotLeaderOrFollowerError,
    OffsetMovedToTieredStorageError,
    OffsetOutOfRangeError,
    RequestTimedOutError,
    TransactionCoordinatorFencedError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
)
from logbroker.log_limits import RateLimitedLog
from logbroker.metadata.model import PartitionState
from logbroker.records.control import build_end_txn_marker_batch
from logbroker.replication.group_commit import GroupCommit, acknowledged_end
from logbroker.replication.partition import Partition
from logbroker.replication.purgatory import DelayedOperation, Purgatory
from logbroker.remote.remote_read import PendingRemoteRead
from logbroker.storage.log import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
)
from logbroker.storage.log_config import LogConfig
from logbroker.storage.log_manager import LogManager
from logbroker.storage.values import FileRegion, TimestampAndOffset
from logbroker.types import TopicPartition

log = logging.getLogger("kafka.server.ReplicaManager")
_limited = RateLimitedLog(log, burst=10, interval_s=60.0)

# Producer-state refusals worth one log line each (a zombie producer or coordinator, a broken
# transactional client); the other produce errors are routine (leadership moves, sizes).
_TXN_ERRORS = (InvalidProducerEpochError, InvalidTxnStateError, TransactionCoordinatorFencedError)


class ProduceResult(NamedTuple):
    """One partition's answer to a produce (a NamedTuple: one is built per partition appended)."""

    error: KafkaError | None
    base_offset: int = -1
    last_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1


class FetchPartitionRequest(NamedTuple):
    """One partition of a fetch (NamedTuples here and in FetchResult: a consumer's fetch builds
    one of each per partition it asks for, every time)."""

    tp: TopicPartition
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1


class FetchResult(NamedTuple):
    error: KafkaError | None
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: FileRegion | None = None
    # read_committed: (producer_id, first_offset) of the aborted transactions in the range.
    aborted_transactions: tuple[tuple[int, int], ...] | None = None
    preferred_read_replica: int = -1  # KIP-392: fetch from this follower instead (Fetch v11+)


def unexpected(tp: TopicPartition, exc: Exception) -> KafkaError:
    """An exception that is not a KafkaError is a bug: log it (one line, rate-limited, the
    traceback at DEBUG: a client may be able to repeat it), answer UNKNOWN_SERVER_ERROR."""
    _limited.log(logging.ERROR, "unexpected", "Unexpected error on %s: %r", tp, exc, exc=exc)
    return UnknownServerError(str(exc))


class ReplicaManager:
    metrics = None  # server.metrics.BrokerMetrics when metrics.port is set

    def __init__(self, *, broker_id: int, log_manager: LogManager, clock: Clock) -> None:
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.clock = clock
        self.partitions: dict[TopicPartition, Partition] = {}
        self.produce_purgatory = Purgatory("Produce")
        self.fetch_purgatory = Purgatory("Fetch")
        self._background_flushes: set = set()
        self.group_commit = GroupCommit(
            on_flushed=lambda log_: self.produce_purgatory.check_and_complete(log_.topic_partition))
        # Cluster mode only (None on a single node): the fetchers of the partitions this broker
        # follows (replication/fetcher.py), and the write of an ISR change to the metadata store,
        # `alter_isr(partition, new_isr)`, which sets `partition.pending_isr` and later `isr`.
        self.fetcher_manager = None
        self.alter_isr = None
        # KIP-392 (replica.selector.class=RackAwareReplicaSelector): on a leader,
        # `preferred_read_replica(partition, client_metadata, fetch_offset)` names the follower
        # a consumer should fetch from, or None (replication/replica_selector.py).
        self.preferred_read_replica = None
        # Called as listener(tp, partition) after this broker starts or stops leading `tp` (the
        # group coordinator follows __consumer_offsets); partition is None once the replica is stopped.
        self.leadership_listeners: list = []
        # Called as listener(tp, producer_id, commit) after this broker, as leader, appended a
        # transaction marker to tp (the group coordinator's transactional offset commits).
        self._txn_marker_listeners: list[Callable[[TopicPartition, int, bool], None]] = []
        # Whether the cluster has `tp` at all (hosted here or not), from the metadata store; set
        # by the broker. Tells NOT_LEADER_OR_FOLLOWER from UNKNOWN_TOPIC_OR_PARTITION for markers.
        self.partition_exists: Callable[[TopicPartition], bool] = lambda tp: False
        # Tiered storage (remote/remote_log_manager.py), when remote.log.storage.system.enable:
        # fetches below a tiered partition's local log start are read from the remote store.
        self.remote_log_manager = None

    # -- leadership -------------------------------------------------------------------------
    def become_leader(self, tp: TopicPartition, state: PartitionState, replicas: tuple[int, ...], *,
                      config: LogConfig, topic_id: uuid.UUID | None) -> Partition:
        """Host `tp` as its leader at `state.leader_epoch`, creating its log if it has none."""
        partition = self.partitions.get(tp)
        if partition is None:
            log_ = self.log_manager.get_or_create_log(tp, config, topic_id)
            partition = Partition(tp, log=log_, local_broker_id=self.broker_id, clock=self.clock)
            self.partitions[tp] = partition
        if partition.make_leader(state, replicas):
            log.info("Became leader of %s at leader epoch %d", tp, state.leader_epoch)
            if self.fetcher_manager is not None:
                self.fetcher_manager.remove_partition(tp)
            self._notify_leadership(tp, partition)
        return partition

    def become_follower(self, tp: TopicPartition, state: PartitionState, replicas: tuple[int, ...], *,
                        config: LogConfig, topic_id: uuid.UUID | None) -> Partition:
        """Host `tp` as a follower of `state.leader` (-1: no leader yet) at `state.leader_epoch`,
        creating its log if it has none. Produces waiting on it as leader now fail over."""
        partition = self.partitions.get(tp)
        if partition is None:
            log_ = self.log_manager.get_or_create_log(tp, config, topic_id)
            partition = Partition(tp, log=log_, local_broker_id=self.broker_id, clock=self.clock)
            self.partitions[tp] = partition
        if partition.make_follower(state, replicas):
            log.info("Became follower of broker %d for %s at leader epoch %d", state.leader, tp,
                     state.leader_epoch)
            for purgatory in (self.produce_purgatory, self.fetch_purgatory):
                purgatory.check_and_complete(tp)
            if self.fetcher_manager is not None:
                self.fetcher_manager.add_partition(partition)
            self._notify_leadership(tp, partition)
        return partition

    def stop_replica(self, tp: TopicPartition, *, delete: bool) -> None:
        self.stop_replicas([tp], delete=delete)

    def stop_replicas(self, tps: list[TopicPartition], *, delete: bool) -> None:
        """Stop hosting `tps`; with `delete`, remove their logs (checkpoints rewritten once)."""
        for tp in tps:
            partition = self.partitions.pop(tp, None)
            if self.fetcher_manager is not None:
                self.fetcher_manager.remove_partition(tp)
            if partition is not None:
                for purgatory in (self.produce_purgatory, self.fetch_purgatory):
                    purgatory.check_and_complete(tp)
                self._notify_leadership(tp, None)
        if delete:
            self.log_manager.delete_logs(tps)

    def _notify_leadership(self, tp: TopicPartition, partition: Partition | None) -> None:
        for listener in self.leadership_listeners:
            try:
                listener(tp, partition)
            except Exception:  # noqa: BLE001 - a listener's bug must not undo the leadership change
                log.exception("Leadership listener failed for %s", tp)

    def hosted_partition(self, tp: TopicPartition) -> Partition:
        partition = self.partitions.get(tp)
        if partition is None:
            if self.log_manager.is_offline(tp):
                raise KafkaStorageError(f"The log dir of {tp} on this broker is offline")
            raise UnknownTopicOrPartitionError(f"This server does not host {tp}")
        return partition

    def leader_partition(self, tp: TopicPartition) -> Partition:
        partition = self.hosted_partition(tp)
        partition.require_leader()
        return partition

    # -- produce ----------------------------------------------------------------------------
    async def append_records(self, *, timeout_ms: int, required_acks: int,
                             entries: dict[TopicPartition, bytes | bytearray],
                             **kwargs) -> dict[TopicPartition, ProduceResult]:
        """`append_records_now`, awaited: for callers that wait anyway (the group coordinator)."""
        results = self.append_records_now(timeout_ms=timeout_ms, required_acks=required_acks,
                                          entries=entries, **kwargs)
        return await results if inspect.isawaitable(results) else results

    def append_records_now(self, *, timeout_ms: int, required_acks: int,
                           entries: dict[TopicPartition, bytes | bytearray],
                           is_from_client: bool = True,
                           on_appended: Callable[[TopicPartition], None] | None = None) -> dict[TopicPartition, ProduceResult] | Awaitable[dict[TopicPartition, ProduceResult]]:
        """Append now, in the caller's order; return the results, or an awaitable of them when the
        answer must wait (acks=-1 until the high watermark passes, an fsync that flush.messages
        or flush.ms asks for, or flush.before.ack's group commit). Appending before any await
        keeps requests on one connection taking effect in the order they arrived, as Kafka's
        one-request-at-a-time channel does. `is_from_client=False` for the broker's own batches;
        `on_appended(tp)` runs right after each successful append."""
        if required_acks not in (-1, 0, 1):
            error = InvalidRequiredAcksError(f"acks must be -1, 0 or 1, got {required_acks}")
            return {tp: ProduceResult(error) for tp in entries}
        results: dict[TopicPartition, ProduceResult] = {}
        to_flush = []
        pending: dict[TopicPartition, ProduceResult] = {}  # answers that wait (see below)
        now_ms = -1
        for tp, records in entries.items():
            try:
                partition = self.hosted_partition(tp)  # the leader check is the append's own
                if self.remote_log_manager is not None:  # an empty tiered log awaiting its store
                    self.remote_log_manager.check_appendable(tp, partition)
                info = partition.append_records_to_leader(records, required_acks=required_acks,
                                                          is_from_client=is_from_client)
            except KafkaError as exc:
                if isinstance(exc, _TXN_ERRORS):
                    log.warning("Append to %s refused: %s: %s", tp, exc.name, exc)
                elif isinstance(exc, KafkaStorageError) and tp in self.partitions:
                    # an I/O error (not a full disk) takes the log dir offline
                    self.log_manager.maybe_fail_dir(self.partitions[tp].log.dir.parent, exc)
                results[tp] = ProduceResult(exc)
                continue
            except Exception as exc:  # noqa: BLE001 - a bug must not take the broker down
                results[tp] = ProduceResult(unexpected(tp, exc))
                continue
            result = results[tp] = ProduceResult(None, info.first_offset, info.last_offset,
                                                 info.log_append_time_ms, info.log_start_offset)
            log_ = partition.log
            if now_ms < 0:
                now_ms = self.clock.time_ms()
            flush_due = log_.needs_flush(now_ms)
            if flush_due and log_.flush_policy_due(now_ms):
                to_flush.append(log_)  # flush.messages / flush.ms: before the answer
            else:
                self._after_append(log_, now_ms, flush_due)
            # The answer waits for flush.before.ack's fsync (acks=1 or -1), or with acks=-1 for
            # the ISR — unless the append already moved the high watermark past the batch (a
            # leader alone in its ISR). Then it is answered now: nothing has run since the append
            # checked that ISR against min.insync.replicas.
            if log_.config.flush_before_ack:
                self.group_commit.request(log_)
                pending[tp] = result
            elif required_acks == -1 and partition.high_watermark <= info.last_offset:
                pending[tp] = result
            self.fetch_purgatory.check_and_complete(tp)
            if on_appended is not None:
                on_appended(tp)
        if self.metrics is not None and is_from_client:
            self.metrics.on_produce(entries, results)
        if not to_flush and not pending:
            return results  # without the coroutine, future and purgatory entry a wait costs
        return self._complete_produce(results, pending, to_flush, timeout_ms=timeout_ms,
                                      required_acks=required_acks)

    # -- transaction markers ------------------------------------------------------------------
    def add_txn_marker_listener(self, callback: Callable[[TopicPartition, int, bool], None]) -> None:
        """Call `callback(tp, producer_id, commit)` on the event loop after each transaction
        marker this broker appends as leader."""
        self._txn_marker_listeners.append(callback)

    async def write_txn_markers(self, *, producer_id: int, producer_epoch: int,
                                coordinator_epoch: int, commit: bool,
                                partitions: list[TopicPartition],
                                timeout_ms: int) -> dict[TopicPartition, KafkaError | None]:
        """WriteTxnMarkers for one producer: append a COMMIT or ABORT control batch to each of
        `partitions` this broker leads (ending the transaction there, indexing an abort), then
        wait as acks=-1 until the high watermark passes each marker or `timeout_ms`. Per
        partition None or the error: NotLeaderOrFollowerError, UnknownTopicOrPartitionError,
        InvalidProducerEpochError, TransactionCoordinatorFencedError, RequestTimedOutError, …"""
        now_ms = self.clock.time_ms()
        errors: dict[TopicPartition, KafkaError | None] = {
            tp: NotLeaderOrFollowerError(f"This broker does not host {tp}") for tp in partitions
            if tp not in self.partitions and self.partition_exists(tp)}
        entries = {tp: build_end_txn_marker_batch(
            commit=commit, producer_id=producer_id, producer_epoch=producer_epoch,
            coordinator_epoch=coordinator_epoch, timestamp_ms=now_ms)
            for tp in partitions if tp not in errors}

        def appended(tp: TopicPartition) -> None:
            for listener in self._txn_marker_listeners:
                try:
                    listener(tp, producer_id, commit)
                except Exception:  # noqa: BLE001 - a listener's bug must not fail the marker
                    log.exception("Transaction marker listener failed for %s", tp)

        results = await self.append_records(timeout_ms=timeout_ms, required_acks=-1,
                                            entries=entries, is_from_client=False,
                                            on_appended=appended)
        errors.update((tp, result.error) for tp, result in results.items())
        return {tp: errors[tp] for tp in partitions}

    def after_follower_append(self, log_) -> None:
        """After a follower's append (replication/fetcher.py): what `_after_append` says, as
        for a leader — Kafka's follower flushes its rolled segments too, which bounds what
        recovery must scan after a crash."""
        now_ms = self.clock.time_ms()
        self._after_append(log_, now_ms, log_.needs_flush(now_ms))

    def _after_append(self, log_, now_ms: int, flush_due: bool) -> None:
        """The background work an append calls for when no answer waits for it, in a worker
        thread: the fsync `log_.needs_flush` asked for (`flush_due`: a rolled segment, or a
        follower's flush policy), else a recovery checkpoint of the active segment when it is
        due, else the start of its writeback, so that the roll's fsync is short."""
        if flush_due:
            self._in_background(log_, log_.flush_if_needed, now_ms)
        elif log_.recovery_checkpoint_due():
            self._in_background(log_, self._checkpoint_active_segment, log_)
        elif log_.writeback_due():
            self._in_background(log_, log_.start_writeback)

    def _checkpoint_active_segment(self, log_) -> None:
        """A recovery checkpoint of `log_` (log_flush.py), then its log dir's
        recovery-point-offset-checkpoint, so that a crash from now on recovers from there.
        Worker thread."""
        if log_.checkpoint_active_segment():
            self.log_manager.checkpoint_recovery_points(log_.dir.parent)

    def _in_background(self, log_, work, *args) -> None:
        """Run `work(*args)` for `log_` in a worker thread without holding any produce answer for
        it — the fsync of a rolled segment, as Kafka's scheduler does after a roll, or the start
        of a segment's writeback; one such job per log at a time."""
        if log_ in self._background_flushes:
            return
        self._background_flushes.add(log_)
        future = asyncio.get_running_loop().run_in_executor(None, work, *args)
        future.add_done_callback(lambda f: self._background_flushed(log_, f))

    def _background_flushed(self, log_, future) -> None:
        """A background job ended. The log may have rolled again while it ran, with no append
        since to notice (the producer stopped, a follower caught up): flush that now too."""
        self._background_flushes.discard(log_)
        if future.cancelled():
            return
        if future.exception() is not None:
            log.error("Background flush of %s failed: %r", log_.topic_partition, future.exception())
            return  # retried on the next append, not in a loop against a failing disk
        now_ms = self.clock.time_ms()
        if log_.needs_flush(now_ms):
            self._in_background(log_, log_.flush_if_needed, now_ms)

    def _produce_acknowledged(self, results, pending, required_acks: int) -> dict[TopicPartition, ProduceResult] | None:
        """The answers of a produce whose `pending` partitions are all acknowledged (or failed)
        now; None while one still waits."""
        done = dict(results)
        for tp, r in pending.items():
            partition = self.partitions.get(tp)
            if partition is None or not partition.is_leader:
                done[tp] = ProduceResult(NotLeaderOrFollowerError(f"Leadership of {tp} moved"))
            elif acknowledged_end(partition, required_acks) <= r.last_offset:
                return None
            elif required_acks == -1 and len(partition.isr) < partition.log.config.min_insync_replicas:
                done[tp] = ProduceResult(NotEnoughReplicasAfterAppendError(
                    f"{tp}: written, but the ISR shrank below min.insync.replicas"))
        return done

    async def _complete_produce(self, results, pending, to_flush, *, timeout_ms: int,
                                required_acks: int) -> dict[TopicPartition, ProduceResult]:
        if to_flush:
            # flush.messages / flush.ms: Kafka fsyncs before answering; we do it off the loop.
            loop = asyncio.get_running_loop()
            await asyncio.gather(*(loop.run_in_executor(None, l.flush) for l in to_flush))
        if not pending:
            return results

        def check() -> dict[TopicPartition, ProduceResult] | None:
            return self._produce_acknowledged(results, pending, required_acks)

        def expire() -> dict[TopicPartition, ProduceResult]:
            done = dict(results)
            for tp, r in pending.items():
                partition = self.partitions.get(tp)
                if partition is None or acknowledged_end(partition, required_acks) <= r.last_offset:
                    who = "the in-sync replicas" if required_acks == -1 else "the leader's fsync"
                    done[tp] = ProduceResult(RequestTimedOutError(
                        f"{tp}: {who} did not acknowledge within {timeout_ms} ms"))
            return done

        op = DelayedOperation(try_complete=check, on_expiration=expire, keys=pending)
        return await self.produce_purgatory.wait(op, timeout_ms)

    # -- fetch ------------------------------------------------------------------------------
    def fetch_messages(self, *, replica_id: int, max_wait_ms: int, min_bytes: int, max_bytes: int,
                       partitions: list[FetchPartitionRequest], isolation_level: int = 0,
                       client_metadata=None,
                       ) -> dict[TopicPartition, FetchResult] | Awaitable[dict[TopicPartition, FetchResult]]:
        """Read now; return the results, or an awaitable of them when fewer than `min_bytes` are
        there and the fetch must wait in the purgatory (up to `max_wait_ms`). A consumer's
        `isolation_level` 1 (READ_COMMITTED) reads below the last stable offset; its
        `client_metadata` (Fetch v11+, KIP-392) lets it read from a follower, and lets a leader
        send it to a follower in its rack."""
        fetch_only_committed = replica_id < 0
        read_committed = fetch_only_committed and isolation_level == 1
        if not fetch_only_committed:
            client_metadata = None
        if not fetch_only_committed:
            for request in partitions:
                self._record_follower_fetch(replica_id, request)

        def read_all() -> tuple[dict[TopicPartition, FetchResult], int, bool]:
            results: dict[TopicPartition, FetchResult] = {}
            total, limit, any_error = 0, max_bytes, False
            for request in partitions:
                result = self._read_partition(request, max_bytes=min(request.partition_max_bytes, limit),
                                              fetch_only_committed=fetch_only_committed,
                                              min_one_message=total == 0,
                                              read_committed=read_committed, client_metadata=client_metadata)
                results[request.tp] = result
                if (result.error is not None or result.preferred_read_replica >= 0
                        or type(result.records) is PendingRemoteRead):
                    any_error = True  # answered at once, as Kafka (hasPreferredReadReplica, remote reads too)
                size = result.records.size if result.records else 0
                total += size
                limit = max(limit - size, 0)
            return results, total, any_error

        def has_news() -> bool:
            return self._fetch_has_news(partitions, fetch_only_committed=fetch_only_committed,
                                        read_committed=read_committed, from_leader=client_metadata is None)

        if max_wait_ms <= 0 or min_bytes <= 0 or not partitions:
            return self._with_remote_reads(read_all()[0])
        # A consumer at the end of the log (the long poll every idle consumer sends) waits without
        # reading first when the offsets say a read would find nothing and no error: the check the
        # purgatory makes before each read again (Kafka reads first and then waits, to the same
        # answer). Not for followers (a diverging epoch is found by reading), nor where a replica
        # selector may send the consumer elsewhere, nor for a negative max_bytes.
        if (not fetch_only_committed or max_bytes < 0
                or (client_metadata is not None and self.preferred_read_replica is not None)
                or has_news()):
            results, total, any_error = read_all()
            if total >= min_bytes or any_error:
                return self._with_remote_reads(results)

        def try_complete() -> dict[TopicPartition, FetchResult] | None:
            if not has_news():
                return None
            again, again_total, again_error = read_all()
            return again if again_total >= min_bytes or again_error else None

        op = DelayedOperation(try_complete=try_complete, on_expiration=lambda: read_all()[0],
                              keys=[p.tp for p in partitions])
        waiting = self.fetch_purgatory.watch(op, max_wait_ms)  # just checked (or read): no try first
        return waiting if self.remote_log_manager is None else self._remote_reads_after(waiting)

    def _with_remote_reads(self, results: dict[TopicPartition, FetchResult]):
        """The results, or an awaitable of them when some partition reads from the remote store."""
        if self.remote_log_manager is None or not any(
                type(r.records) is PendingRemoteRead for r in results.values()):
            return results
        return self.remote_log_manager.complete_reads(results)

    async def _remote_reads_after(self, waiting: Awaitable[dict[TopicPartition, FetchResult]]):
        return await self.remote_log_manager.complete_reads(await waiting)

    def _fetch_has_news(self, requests: list[FetchPartitionRequest], *, fetch_only_committed: bool,
                        read_committed: bool, from_leader: bool) -> bool:
        """Whether reading again could answer a waiting fetch differently: some partition has
        records past its fetch offset below the bound a read stops at (the log end for a
        follower, else the high watermark, or the last stable offset under read_committed), or
        is gone, has lost leadership, a new leader epoch or a log start past the fetch offset.
        Offsets only, no read: a produce wakes every fetch watching its partition, and with
        followers (or an open transaction) its append has not yet moved what a consumer sees
        (Kafka's DelayedFetch.tryComplete looks at offsets too before reading). A negative
        partition_max_bytes is news too: the read answers it with an error."""
        partitions = self.partitions
        for request in requests:
            partition = partitions.get(request.tp)
            if (partition is None or (from_leader and not partition.is_leader)
                    or request.partition_max_bytes < 0):
                return True
            epoch = request.current_leader_epoch
            if epoch != -1 and epoch != partition.leader_epoch:
                return True
            offset = request.fetch_offset
            if (partition.last_fetchable_offset(fetch_only_committed, read_committed) != offset
                    or partition.log.log_start_offset > offset):
                return True
        return False

    def _record_follower_fetch(self, replica_id: int, request: FetchPartitionRequest) -> None:
        """A follower's fetch offset is its log end offset: maybe move the high watermark (and
        answer the produces waiting on it) and re-admit the follower to the ISR."""
        partition = self.partitions.get(request.tp)
        if partition is None or not partition.is_leader:
            return
        try:
            partition.check_leader_epoch(request.current_leader_epoch)
        except KafkaError:
            # A fetch at another leader epoch proves nothing (Kafka checks the epoch before it
            # updates a follower's state): a broker that left the cluster fetches on at the epoch
            # it last knew, and counting that would put a dead broker back into the ISR.
            return
        if partition.update_follower_fetch(replica_id, request.fetch_offset):
            self.produce_purgatory.check_and_complete(request.tp)
            self.fetch_purgatory.check_and_complete(request.tp)
        if self.alter_isr is not None:
            expanded = partition.isr_to_expand()
            if expanded is not None:
                self.alter_isr(partition, expanded)

    def maybe_shrink_isr(self, max_lag_ms: int) -> None:
        """Drop from the ISR of each partition led here the followers lagging over `max_lag_ms`
        (replica.lag.time.max.ms). Runs on the event loop, periodically."""
        if self.alter_isr is None:
            return
        for partition in list(self.partitions.values()):
            shrunk = partition.isr_to_shrink(max_lag_ms)
            if shrunk is not None:
                log.info("Shrinking ISR of %s from %s to %s", partition.tp, list(partition.isr), list(shrunk))
                self.alter_isr(partition, shrunk)

    def on_isr_changed(self, partition: Partition) -> None:
        """The ISR of a led partition changed: the high watermark may move, and acks=-1 produces
        may now be answerable (or fail with NOT_ENOUGH_REPLICAS_AFTER_APPEND)."""
        partition.maybe_increment_high_watermark()
        self.produce_purgatory.check_and_complete(partition.tp)
        self.fetch_purgatory.check_and_complete(partition.tp)

    def _read_partition(self, request: FetchPartitionRequest, *, max_bytes: int,
                        fetch_only_committed: bool, min_one_message: bool,
                        read_committed: bool = False, client_metadata=None) -> FetchResult:
        partition = self.partitions.get(request.tp)
        try:
            if partition is None:
                raise UnknownTopicOrPartitionError(f"This server does not host {request.tp}")
            if max_bytes < 0:
                # A negative partition_max_bytes (or max_bytes) from the client: Kafka's segment
                # read throws and the partition is answered UNKNOWN_SERVER_ERROR; so here, but
                # with no stack trace in the log, since any client can send it.
                raise UnknownServerError(f"Invalid max size {max_bytes} for a read of {request.tp}")
            if client_metadata is not None and self.preferred_read_replica and partition.is_leader:
                preferred = self.preferred_read_replica(partition, client_metadata, request.fetch_offset)
                if preferred is not None:  # no read here: the consumer goes to that follower
                    partition.check_leader_epoch(request.current_leader_epoch)
                    return FetchResult(None, partition.high_watermark, partition.last_stable_offset,
                                       partition.log.log_start_offset, preferred_read_replica=preferred)
            remote = self._remote_read(partition, request, max_bytes=max_bytes, min_one_message=min_one_message,
                                       fetch_only_committed=fetch_only_committed, read_committed=read_committed)
            if remote is not None:
                return remote
            try:
                info = partition.read_records(request.fetch_offset, max_bytes=max_bytes,
                                              current_leader_epoch=request.current_leader_epoch,
                                              fetch_only_committed=fetch_only_committed,
                                              min_one_message=min_one_message,
                                              read_committed=read_committed,
                                              fetch_only_from_leader=client_metadata is None)
            except OffsetOutOfRangeError:
                # Local retention may have deleted the segment since `_remote_read` looked.
                remote = self._remote_read(partition, request, max_bytes=max_bytes,
                                           min_one_message=min_one_message,
                                           fetch_only_committed=fetch_only_committed,
                                           read_committed=read_committed)
                if remote is None:
                    raise
                return remote
        except KafkaError as exc:
            if partition is None or isinstance(exc, NotLeaderOrFollowerError):
                return FetchResult(exc)
            return FetchResult(exc, partition.high_watermark, partition.last_stable_offset,
                               self.log_start_offset(partition))
        except Exception as exc:  # noqa: BLE001
            return FetchResult(unexpected(request.tp, exc))
        # Fetch v3+: a first batch cut short by the byte limit is not sent at all; the client
        # makes progress on a later fetch (Kafka's readFromLocalLog).
        region = None if info.first_entry_incomplete else info.region
        aborted = info.aborted_transactions
        if aborted:
            aborted = tuple((t.producer_id, t.first_offset) for t in aborted) if region is not None else ()
        log_ = partition.log
        return FetchResult(None, log_.high_watermark, log_.last_stable_offset, self.log_start_offset(partition),
                           region, aborted)

    def _remote_read(self, partition: Partition, request: FetchPartitionRequest, *, max_bytes: int,
                     min_one_message: bool, fetch_only_committed: bool,
                     read_committed: bool) -> FetchResult | None:
        """For an offset below the local log start of a tiered partition: a consumer's result
        with the remote read still to do (PendingRemoteRead); OFFSET_MOVED_TO_TIERED_STORAGE for
        a follower. None for an offset the local log has."""
        rlm = self.remote_log_manager
        if rlm is None or not rlm.serves(request.tp, partition.log, request.fetch_offset):
            return None
        if not fetch_only_committed:  # a follower rebuilds from the store instead
            raise OffsetMovedToTieredStorageError(
                f"Offset {request.fetch_offset} of {request.tp} is below the local log start "
                f"offset {partition.log.log_start_offset}: it is in tiered storage")
        partition.require_leader()
        partition.check_leader_epoch(request.current_leader_epoch)
        return FetchResult(None, partition.high_watermark, partition.last_stable_offset,
                           rlm.log_start_offset(request.tp, partition.log),
                           PendingRemoteRead(request.fetch_offset, max_bytes, min_one_message, read_committed))

    def log_start_offset(self, partition: Partition) -> int:
        """Kafka's logStartOffset: on a tiered partition the earliest offset in the remote store
        (the log's own is then the local log start offset)."""
        rlm = self.remote_log_manager
        log_ = partition.log
        return log_.log_start_offset if rlm is None else rlm.log_start_offset(partition.tp, log_)

    # -- offsets ----------------------------------------------------------------------------
    def fetch_offset_for_timestamp(self, tp: TopicPartition, timestamp: int, *,
                                   current_leader_epoch: int = -1,
                                   only_committed: bool = True,
                                   isolation_level: int = 0) -> TimestampAndOffset | None:
        """ListOffsets: -1 latest (for consumers the high watermark, or under READ_COMMITTED
        (`isolation_level` 1) the last stable offset), -2 earliest (with tiered storage the first
        offset in the remote store), -4 the earliest local, -3 the max timestamp (of the local
        log), -5 the last offset copied to remote storage (-1/-1: none), else the first offset
        whose timestamp is at least `timestamp` below that bound — an awaitable of it when the
        remote segments may hold it."""
        partition = self.leader_partition(tp)
        partition.check_leader_epoch(current_leader_epoch)
        last_fetchable = partition.last_fetchable_offset(only_committed, isolation_level == 1)
        if timestamp == LATEST_TIMESTAMP:
            return TimestampAndOffset(-1, last_fetchable, partition.leader_epoch)
        rlm = self.remote_log_manager
        if timestamp in (EARLIEST_TIMESTAMP, LATEST_TIERED_TIMESTAMP) and rlm is not None \
                and rlm.awaits_listing(tp):
            return self._offset_once_listed(tp, timestamp, dict(current_leader_epoch=current_leader_epoch,
                                            only_committed=only_committed, isolation_level=isolation_level))
        if timestamp == EARLIEST_TIMESTAMP and rlm is not None:
            start = rlm.log_start_offset(tp, partition.log)
            if start < partition.log.log_start_offset:
                return TimestampAndOffset(-1, start, rlm.epoch_for_offset(tp, start))
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):  # -4: the local log's start
            start = partition.log.log_start_offset
            return TimestampAndOffset(-1, start, partition.log.leader_epoch_cache.epoch_for_offset(start))
        if timestamp == LATEST_TIERED_TIMESTAMP and rlm is not None:
            highest = rlm.highest_offset(tp)
            return TimestampAndOffset(-1, highest, -1 if highest < 0 else rlm.epoch_for_offset(tp, highest))
        if timestamp >= 0 and rlm is not None and rlm.may_hold_timestamp(tp, partition.log, timestamp):
            return self._offset_for_timestamp_from_remote(partition, timestamp, last_fetchable)
        found = partition.log.fetch_offset_by_timestamp(timestamp)
        if found is None or found.offset >= last_fetchable:
            return None
        return found

    async def _offset_once_listed(self, tp: TopicPartition, timestamp: int, request: dict) -> TimestampAndOffset:
        """ListOffsets -2 / -5 of a tiered partition whose remote segments are not listed yet:
        answered once they are (OffsetNotAvailableError, retriable, while the store fails)."""
        await self.remote_log_manager.listed(tp)
        return self.fetch_offset_for_timestamp(tp, timestamp, **request)

    async def _offset_for_timestamp_from_remote(self, partition: Partition, timestamp: int,
                                                last_fetchable: int) -> TimestampAndOffset | None:
        """A timestamp the remote segments may reach: search them first, then the local log."""
        found = await self.remote_log_manager.find_offset_by_timestamp(partition.tp, partition.log, timestamp)
        if found is None:
            found = partition.log.fetch_offset_by_timestamp(timestamp)
        return None if found is None or found.offset >= last_fetchable else found

    def delete_records(self, tp: TopicPartition, offset: int) -> int:
        """DeleteRecords: move the log start offset up to `offset` (-1: the high watermark).
        Returns the new low watermark."""
        partition = self.leader_partition(tp)
        hw = partition.high_watermark
        if offset == -1:
            offset = hw
        if offset < 0 or offset > hw:
            raise OffsetOutOfRangeError(
                f"{tp}: cannot delete records below offset {offset}; the high watermark is {hw}")
        partition.log.maybe_increment_log_start_offset(offset)
        if self.remote_log_manager is not None:
            self.remote_log_manager.delete_records(tp, offset)
        return self.log_start_offset(partition)
