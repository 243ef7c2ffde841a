"""Where transactional ids live: `__transaction_state`, its partitions this broker coordinates, and
the cached TransactionMetadata of each (Kafka's TransactionStateManager).

A transactional id lives in partition `partition_for(id)`; the leader of that partition is its
coordinator. Like the group coordinator (coordinator/group_loader.py), this follows leadership:
a partition this broker comes to lead is replayed in a worker thread (COORDINATOR_LOAD_IN_PROGRESS
until then), then owned; one it stops leading has its ids dropped (NOT_COORDINATOR). The leader
epoch at election is the *coordinator epoch*, sent with every transaction marker.

Every change is appended with acks=-1 before it takes effect in memory; the errors are mapped as
Kafka's appendTransactionToLog maps them (COORDINATOR_NOT_AVAILABLE for a missing partition,
too few replicas or a timeout; NOT_COORDINATOR when leadership moved, also while the append
waited). Runs on the event loop; only `load_transactions` runs in a worker thread.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from logbroker.clock import Clock
from logbroker.coordinator.internal_topics import ensure_internal_topic, require_coordinator
from logbroker.coordinator.group_loader import CoordinatedPartitions
from logbroker.coordinator.offsets_log import build_records, replay
from logbroker.coordinator.offsets_schema import UnknownSchemaError
from logbroker.coordinator.transaction_log import (
    TRANSACTION_STATE_TOPIC,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    partition_for,
)
from logbroker.coordinator.transaction_metadata import TransactionMetadata
from logbroker.errors import (
    CoordinatorNotAvailableError,
    InvalidRequestError,
    KafkaError,
    NotCoordinatorError,
    UnknownServerError,
)
from logbroker.storage.log import Log
from logbroker.types import TopicPartition

log = logging.getLogger("kafka.coordinator.transaction.TransactionStateManager")

_UNAVAILABLE = {"UNKNOWN_TOPIC_OR_PARTITION", "NOT_ENOUGH_REPLICAS", "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
                "REQUEST_TIMED_OUT"}
_NOT_COORDINATOR = {"NOT_LEADER_OR_FOLLOWER", "KAFKA_STORAGE_ERROR"}


class TransactionStateManager:
    RETRY_S = 1.0

    def __init__(self, *, config, replica_manager, store, create_topic: Callable[..., object], clock: Clock,
                 live_brokers: Callable[[], int] | None = None,
                 on_loaded: Callable[[int, list[TransactionMetadata]], None] = lambda p, txns: None,
                 on_unloaded: Callable[[int, list[TransactionMetadata]], None] = lambda p, txns: None) -> None:
        self.config = config
        self.replica_manager = replica_manager
        self.store = store
        self._create_topic = create_topic
        self._live_brokers = live_brokers
        self.clock = clock
        self.partitions = CoordinatedPartitions()
        self.transactions: dict[str, TransactionMetadata] = {}
        self._on_loaded = on_loaded
        self._on_unloaded = on_unloaded
        self.load_times_ms: list[int] = []  # partition load durations, for the metrics

    # -- where ids live ---------------------------------------------------------------------------
    @property
    def num_partitions(self) -> int:
        info = self.store.topic(TRANSACTION_STATE_TOPIC)
        return info.num_partitions if info else self.config.transaction_state_log_num_partitions

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    def coordinator_partition(self, transactional_id: str) -> TopicPartition:
        return TopicPartition(TRANSACTION_STATE_TOPIC, self.partition_for(transactional_id))

    def ensure_topic(self) -> None:
        """Create __transaction_state on first use (FindCoordinator of a transactional id), as
        __consumer_offsets: transaction.state.log.replication.factor replicas in a cluster (refused
        with COORDINATOR_NOT_AVAILABLE while fewer brokers are alive), one on a single node — whose
        min.insync.replicas is then capped at 1, or no transaction could ever be written."""
        c = self.config
        ensure_internal_topic(TRANSACTION_STATE_TOPIC, store=self.store, create_topic=self._create_topic,
                              live_brokers=self._live_brokers,
                              num_partitions=c.transaction_state_log_num_partitions,
                              replication_factor=c.transaction_state_log_replication_factor,
                              replication_factor_key="transaction.state.log.replication.factor",
                              configs={"cleanup.policy": "compact", "compression.type": "uncompressed",
                                       "unclean.leader.election.enable": "false",
                                       "segment.bytes": str(c.transaction_state_log_segment_bytes)},
                              min_insync_replicas=c.transaction_state_log_min_isr)

    def check(self, transactional_id: str | None) -> int:
        """Raise unless this broker coordinates `transactional_id` now; return the partition."""
        if not transactional_id:
            raise InvalidRequestError("The transactional id is empty")
        tp = self.coordinator_partition(transactional_id)
        require_coordinator(tp, store=self.store, replica_manager=self.replica_manager,
                            partitions=self.partitions, holds=f"transactional id {transactional_id}")
        return tp.partition

    def coordinator_epoch(self, partition: int) -> int | None:
        """The coordinator epoch of an owned partition, None when it is not owned."""
        return self.partitions.epochs.get(partition) if partition in self.partitions.owned else None

    def get(self, transactional_id: str) -> TransactionMetadata | None:
        self.check(transactional_id)
        return self.transactions.get(transactional_id)

    def owned_transactions(self) -> list[TransactionMetadata]:
        owned = self.partitions.owned
        return [m for m in self.transactions.values() if self.partition_for(m.transactional_id) in owned]

    # -- appending ----------------------------------------------------------------------------------
    async def append(self, metadata: TransactionMetadata, target: TransactionMetadata | None, *,
                     tombstone: bool = False) -> None:
        """Store `target` (or a tombstone) for `metadata`'s id and apply it once every in-sync
        replica has it; on failure forget the pending transition and raise the mapped error."""
        txn_id = metadata.transactional_id
        partition = self.partition_for(txn_id)
        epoch = self.coordinator_epoch(partition)
        tp = TopicPartition(TRANSACTION_STATE_TOPIC, partition)
        value = None if tombstone else encode_value(target.record())
        now_ms = self.clock.time_ms()
        try:
            if epoch is None:
                raise NotCoordinatorError(f"This broker no longer coordinates {txn_id}")
            results = await self.replica_manager.append_records(
                timeout_ms=self.config.request_timeout_ms, required_acks=-1,
                entries={tp: build_records([(encode_key(txn_id), value)], now_ms)})
            error = results[tp].error
            if error is not None:
                raise _map_append_error(error)
            if self.coordinator_epoch(partition) != epoch:
                raise NotCoordinatorError(f"Leadership of {tp} moved while {txn_id} was stored")
        except KafkaError:
            metadata.abort_transition()
            raise
        if tombstone:
            metadata.abort_transition()
            if self.transactions.get(txn_id) is metadata:
                del self.transactions[txn_id]
        else:
            metadata.complete_transition(target)
            self.transactions.setdefault(txn_id, metadata)

    # -- following the leadership of __transaction_state ---------------------------------------
    def load(self) -> None:
        """At startup (blocks on disk): load the partitions led here now, then follow leadership."""
        self.replica_manager.leadership_listeners.append(self.on_leadership_change)
        for tp, partition in list(self.replica_manager.partitions.items()):
            if tp.topic == TRANSACTION_STATE_TOPIC and partition.is_leader:
                if self.partitions.elect(tp.partition, partition.leader_epoch):
                    self._load(partition, in_background=False)

    def on_leadership_change(self, tp: TopicPartition, partition) -> None:
        if tp.topic != TRANSACTION_STATE_TOPIC:
            return
        if partition is not None and partition.is_leader:
            held_at = self.coordinator_epoch(tp.partition)
            if self.partitions.elect(tp.partition, partition.leader_epoch):
                self._load(partition, in_background=True)
            elif held_at is not None and self.coordinator_epoch(tp.partition) != held_at:
                # Elected again at a higher leader epoch (the controller took a dead follower out
                # of the ISR): the transactions held here stay, but completions running under the
                # old coordinator epoch stop; they go on under the new one, as after a load.
                log.info("Elected again for %s at epoch %d: resuming its transactions' completions",
                         tp, partition.leader_epoch)
                self._on_loaded(tp.partition, self._held_in(tp.partition))
        elif self.partitions.resign(tp.partition, partition.leader_epoch if partition is not None else None):
            removed = self._held_in(tp.partition)
            for m in removed:
                del self.transactions[m.transactional_id]
            self._on_unloaded(tp.partition, removed)
            log.info("Finished unloading %s: removed %d cached transactional id(s)", tp, len(removed))

    def _held_in(self, partition: int) -> list[TransactionMetadata]:
        """The transactions cached here whose ids `partition` of __transaction_state holds."""
        return [m for m in self.transactions.values() if self.partition_for(m.transactional_id) == partition]

    def _load(self, partition, *, in_background: bool) -> None:
        epoch, log_ = partition.leader_epoch, partition.log
        end_offset = log_.log_end_offset
        buffer_bytes = self.config.transaction_state_log_load_buffer_size
        started_ms = self.clock.time_ms()
        if not in_background or end_offset <= log_.log_start_offset:
            self._finish(partition, epoch, load_transactions(log_, end_offset, epoch, buffer_bytes), started_ms)
            return
        log.info("Loading transaction metadata from %s at epoch %d", partition.tp, epoch)
        future = asyncio.get_running_loop().run_in_executor(None, load_transactions, log_, end_offset, epoch,
                                                            buffer_bytes)

        def done(f) -> None:
            if f.cancelled():
                return
            if f.exception() is not None:
                log.error("Error loading %s (retrying in %.0f s): %r", partition.tp, self.RETRY_S, f.exception())
                asyncio.get_running_loop().call_later(self.RETRY_S, self._retry, partition, epoch)
                return
            self._finish(partition, epoch, f.result(), started_ms)
        future.add_done_callback(done)

    def _retry(self, partition, epoch: int) -> None:
        if self.partitions.loading.get(partition.tp.partition) == epoch:
            self._load(partition, in_background=True)

    def _finish(self, partition, epoch: int, loaded: dict[str, TransactionMetadata], started_ms: int) -> None:
        if not self.partitions.finish(partition.tp.partition, epoch):
            log.info("Discarded the transactions loaded from %s at epoch %d: leadership moved meanwhile",
                     partition.tp, epoch)
            return
        self.transactions.update(loaded)
        elapsed = self.clock.time_ms() - started_ms
        self.load_times_ms.append(elapsed)
        del self.load_times_ms[:-100]
        log.info("Finished loading %d transaction metadata from %s at epoch %d in %d ms", len(loaded),
                 partition.tp, epoch, elapsed)
        self._on_loaded(partition.tp.partition, list(loaded.values()))


def load_transactions(log_: Log, end_offset: int, coordinator_epoch: int, buffer_bytes: int = 5 * 1024 * 1024
                      ) -> dict[str, TransactionMetadata]:
    """The transactional ids stored in `log_` below `end_offset`, as their last record left them,
    read `buffer_bytes` (transaction.state.log.load.buffer.size) at a time. Blocks on disk;
    touches no coordinator state, so it may run in a worker thread."""
    values = {}
    for key, value in replay(log_, end_offset, buffer_bytes=buffer_bytes):
        try:
            txn_id = decode_key(key)
            values[txn_id] = None if value is None else decode_value(value)
        except (UnknownSchemaError, ValueError, IndexError, UnicodeDecodeError) as exc:
            log.warning("Skipping an unreadable record of %s: %s", log_.topic_partition, exc)
    return {txn_id: TransactionMetadata.from_record(txn_id, v, coordinator_epoch)
            for txn_id, v in values.items() if v is not None}


def _map_append_error(error: KafkaError) -> KafkaError:
    if error.name in _UNAVAILABLE:
        return CoordinatorNotAvailableError(f"Storing transaction state failed with {error.name}; retry")
    if error.name in _NOT_COORDINATOR:
        return NotCoordinatorError(f"Storing transaction state failed with {error.name}: find the coordinator again")
    if error.name in ("MESSAGE_TOO_LARGE", "RECORD_LIST_TOO_LARGE"):
        return UnknownServerError(f"Storing transaction state failed with {error.name}")
    return error
