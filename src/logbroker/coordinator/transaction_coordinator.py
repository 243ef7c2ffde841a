"""The transaction coordinator: InitProducerId with a transactional id, AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn, and the admin views (Kafka's TransactionCoordinator).

The shape of a transaction, as in Kafka: InitProducerId bumps the id's producer epoch (fencing any
older producer with the same transactional id) and leaves it Empty; AddPartitionsToTxn and
AddOffsetsToTxn make it Ongoing; EndTxn stores PrepareCommit or PrepareAbort, answers the client,
then has the markers written to every partition (coordinator/transaction_marker_channel.py) and
stores CompleteCommit or CompleteAbort. A request that arrives while a transition is in flight,
or while markers are being written, gets CONCURRENT_TRANSACTIONS and the client retries.

Two background tasks, as Kafka's: every transaction.abort.timed.out.transaction.cleanup.interval.ms
an Ongoing transaction older than its timeout is aborted with its epoch bumped first
(PrepareEpochFence), so the producer that stalled is fenced; every
transaction.remove.expired.transaction.cleanup.interval.ms an id idle (Empty or Complete*) for
transactional.id.expiration.ms gets a tombstone. When this broker takes over a partition of
`__transaction_state`, transactions found in Prepare* resume their markers; Ongoing ones are left
to time out.

Errors are raised as KafkaError (PRODUCER_FENCED where Kafka raises it; the API modules turn it into
INVALID_PRODUCER_EPOCH for the request versions older than KIP-588). Runs on the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable

from logbroker.clock import Clock
from logbroker.coordinator.offsets_schema import OFFSETS_TOPIC
from logbroker.coordinator.offsets_schema import partition_for as group_partition_for
from logbroker.coordinator.transaction_marker_channel import TransactionMarkerChannel
from logbroker.coordinator.transaction_metadata import (
    NO_PRODUCER_EPOCH,
    TransactionMetadata,
    TransactionState,
    is_epoch_exhausted,
)
from logbroker.coordinator.transaction_state_manager import TransactionStateManager
from logbroker.errors import (
    ConcurrentTransactionsError,
    CoordinatorNotAvailableError,
    InvalidProducerIdMappingError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    KafkaError,
    ProducerFencedError,
    TransactionalIdNotFoundError,
)
from logbroker.types import TopicPartition

log = logging.getLogger("kafka.coordinator.transaction.TransactionCoordinator")

S = TransactionState
COMPLETE_RETRY_S = 0.5


def _refused(error: KafkaError) -> KafkaError:
    """Bad input from a client (a stale epoch, an unknown id, an EndTxn out of order): one line."""
    log.info("Refused with %s: %s", error.name, error)
    return error


class TransactionCoordinator:
    def __init__(self, *, broker_id: int, config, replica_manager, store, producer_ids,
                 create_topic: Callable[..., object], clock: Clock,
                 live_brokers: Callable[[], int] | None = None,
                 marker_channel: TransactionMarkerChannel | None = None) -> None:
        self.broker_id = broker_id
        self.config = config
        self.clock = clock
        self.producer_ids = producer_ids
        self.state_manager = TransactionStateManager(
            config=config, replica_manager=replica_manager, store=store, create_topic=create_topic, clock=clock,
            live_brokers=live_brokers, on_loaded=self._resume_transactions)
        self.marker_channel = marker_channel or TransactionMarkerChannel(
            broker_id=broker_id, replica_manager=replica_manager, store=store,
            request_timeout_ms=config.request_timeout_ms)
        self._background: set[asyncio.Task] = set()
        self._tasks: list[asyncio.Task] = []

    def _now(self) -> int:
        return self.clock.time_ms()

    # -- InitProducerId ----------------------------------------------------------------------------
    async def init_producer_id(self, *, transactional_id: str, transaction_timeout_ms: int,
                               expected_producer_id: int = -1, expected_producer_epoch: int = -1
                               ) -> tuple[int, int]:
        """(producer id, epoch) for a transactional producer; raises the errors Kafka answers."""
        sm = self.state_manager
        sm.check(transactional_id)
        if not 0 < transaction_timeout_ms <= self.config.transaction_max_timeout_ms:
            raise InvalidTransactionTimeoutError(
                f"transaction.timeout.ms {transaction_timeout_ms} is not in (0, transaction.max.timeout.ms="
                f"{self.config.transaction_max_timeout_ms}]")
        md = sm.transactions.get(transactional_id)
        if md is None:
            md = TransactionMetadata(transactional_id, self.producer_ids.generate_producer_id(), NO_PRODUCER_EPOCH,
                                     transaction_timeout_ms, S.EMPTY, txn_last_update_timestamp_ms=self._now(),
                                     coordinator_epoch=sm.coordinator_epoch(sm.partition_for(transactional_id)) or 0)
            sm.transactions[transactional_id] = md
        expected = expected_producer_id >= 0
        if md.pending_state is not None:
            raise ConcurrentTransactionsError(f"{transactional_id} is completing a transaction; retry")
        if expected and not (md.producer_epoch == NO_PRODUCER_EPOCH or expected_producer_id == md.producer_id
                             or (expected_producer_id == md.last_producer_id
                                 and is_epoch_exhausted(expected_producer_epoch))):
            raise _refused(ProducerFencedError(
                f"producer id {expected_producer_id} is not the current one of {transactional_id}"))
        if md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT, S.PREPARE_EPOCH_FENCE):
            raise ConcurrentTransactionsError(f"{transactional_id} is completing a transaction; retry")
        if md.state == S.ONGOING:
            # Fence the producer that began it and abort it; the client retries and then gets
            # the next epoch once the abort is complete.
            log.info("Aborting the ongoing transaction of %s (producer id %d, epoch %d) for a new "
                     "InitProducerId", transactional_id, md.producer_id, md.producer_epoch)
            await self._fence_and_abort(md)
            raise ConcurrentTransactionsError(f"{transactional_id} had an ongoing transaction, now aborting; retry")
        if md.state == S.DEAD:
            raise ConcurrentTransactionsError(f"{transactional_id} is being removed; retry")
        now = self._now()
        if md.is_producer_epoch_exhausted and (not expected or expected_producer_epoch == md.producer_epoch):
            # Kafka's prepareProducerIdRotation: a new id; the old one is remembered for a retry.
            target = md.prepare_transition(
                S.EMPTY, now_ms=now, producer_id=self.producer_ids.generate_producer_id(), producer_epoch=0,
                txn_timeout_ms=transaction_timeout_ms, last_producer_id=md.producer_id,
                last_producer_epoch=md.producer_epoch if expected else NO_PRODUCER_EPOCH)
        else:
            # Kafka's prepareIncrementProducerEpoch: a fresh init forgets the last epoch; a KIP-360
            # init naming the current epoch remembers it, so its retry gets the same answer.
            if not expected:
                epoch, last_epoch = md.producer_epoch + 1, NO_PRODUCER_EPOCH
            elif md.producer_epoch == NO_PRODUCER_EPOCH or expected_producer_epoch == md.producer_epoch:
                epoch, last_epoch = md.producer_epoch + 1, md.producer_epoch
            elif expected_producer_epoch == md.last_producer_epoch:
                epoch, last_epoch = md.producer_epoch, md.last_producer_epoch  # a retry: same answer again
            else:
                raise _refused(ProducerFencedError(
                    f"epoch {expected_producer_epoch} of {transactional_id} is neither the current nor the last one"))
            target = md.prepare_transition(S.EMPTY, now_ms=now, producer_epoch=epoch,
                                           txn_timeout_ms=transaction_timeout_ms, last_producer_epoch=last_epoch)
        await sm.append(md, target)
        log.info("Initialized transactional id %s with producer id %d and epoch %d", transactional_id,
                 md.producer_id, md.producer_epoch)
        return md.producer_id, md.producer_epoch

    # -- AddPartitionsToTxn / AddOffsetsToTxn -----------------------------------------------------
    def _checked(self, transactional_id: str, producer_id: int, producer_epoch: int) -> TransactionMetadata:
        md = self.state_manager.get(transactional_id)
        if md is None:
            raise _refused(InvalidProducerIdMappingError(f"transactional id {transactional_id} is not known here"))
        if md.producer_id != producer_id:
            raise _refused(InvalidProducerIdMappingError(
                f"producer id {producer_id} is not the one of {transactional_id} ({md.producer_id})"))
        if md.producer_epoch != producer_epoch:
            raise _refused(ProducerFencedError(
                f"epoch {producer_epoch} of {transactional_id} is not the current one ({md.producer_epoch})"))
        return md

    async def add_partitions(self, *, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: Iterable[TopicPartition]) -> None:
        md = self._checked(transactional_id, producer_id, producer_epoch)
        partitions = set(partitions)
        if md.pending_state is not None or md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            raise ConcurrentTransactionsError(f"{transactional_id} is completing a transaction; retry")
        if md.state == S.ONGOING and partitions <= md.partitions:
            return
        if md.state not in (S.EMPTY, S.ONGOING, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            raise _refused(InvalidTxnStateError(f"{transactional_id} is {md.state.kafka_name}"))
        now = self._now()
        start = md.txn_start_timestamp_ms if md.state == S.ONGOING else now
        target = md.prepare_transition(S.ONGOING, now_ms=now, partitions=md.partitions | partitions,
                                       txn_start_timestamp_ms=start)
        await self.state_manager.append(md, target)
        log.debug("Added %s to the transaction of %s", sorted(partitions), transactional_id)

    def verify_partitions(self, *, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: Iterable[TopicPartition]) -> dict[TopicPartition, KafkaError | None]:
        """KIP-890's verify-only AddPartitionsToTxn: is each partition in the ongoing transaction?"""
        partitions = list(partitions)
        try:
            md = self._checked(transactional_id, producer_id, producer_epoch)
        except KafkaError as exc:
            return {tp: exc for tp in partitions}
        if md.pending_state is not None and md.state != S.ONGOING:
            error = ConcurrentTransactionsError(f"{transactional_id} is completing a transaction")
            return {tp: error for tp in partitions}
        ongoing = md.state == S.ONGOING
        return {tp: None if ongoing and tp in md.partitions else InvalidTxnStateError(
            f"{tp} is not in the ongoing transaction of {transactional_id}") for tp in partitions}

    def group_partition(self, group_id: str) -> TopicPartition:
        """The `__consumer_offsets` partition AddOffsetsToTxn adds: the group coordinator's."""
        info = self.state_manager.store.topic(OFFSETS_TOPIC)
        count = info.num_partitions if info else self.config.offsets_topic_num_partitions
        return TopicPartition(OFFSETS_TOPIC, group_partition_for(group_id, count))

    # -- EndTxn ------------------------------------------------------------------------------------
    async def end_transaction(self, *, transactional_id: str, producer_id: int, producer_epoch: int,
                              commit: bool, from_client: bool = True) -> None:
        md = self.state_manager.get(transactional_id)
        if md is None or md.producer_id != producer_id:
            raise _refused(InvalidProducerIdMappingError(
                f"producer id {producer_id} is not the one of {transactional_id}"))
        if (from_client and producer_epoch != md.producer_epoch) or producer_epoch < md.producer_epoch:
            raise _refused(ProducerFencedError(
                f"epoch {producer_epoch} of {transactional_id} is not the current one ({md.producer_epoch})"))
        if md.pending_state is not None and md.pending_state != S.PREPARE_EPOCH_FENCE:
            raise ConcurrentTransactionsError(f"{transactional_id} is completing a transaction; retry")
        what = "commit" if commit else "abort"
        if md.state == S.ONGOING:
            pass
        elif md.state == (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT):
            return  # a retry of an EndTxn that completed
        elif md.state == (S.PREPARE_COMMIT if commit else S.PREPARE_ABORT):
            raise ConcurrentTransactionsError(f"{transactional_id} is completing its {what}; retry")
        else:
            raise _refused(InvalidTxnStateError(
                f"cannot {what}: the transaction of {transactional_id} is {md.state.kafka_name}"))
        target = md.prepare_transition(S.PREPARE_COMMIT if commit else S.PREPARE_ABORT, now_ms=self._now())
        await self.state_manager.append(md, target)
        log.debug("%s the transaction of %s (producer id %d, epoch %d) on %d partition(s)",
                 "Committing" if commit else "Aborting", transactional_id, md.producer_id, md.producer_epoch,
                 len(md.partitions))
        self._spawn(self._complete(md))

    async def _fence_and_abort(self, md: TransactionMetadata) -> None:
        old_epoch, old_last_epoch = md.producer_epoch, md.last_producer_epoch
        md.fence_producer_epoch()
        try:
            await self.end_transaction(transactional_id=md.transactional_id, producer_id=md.producer_id,
                                       producer_epoch=md.producer_epoch, commit=False, from_client=False)
        except KafkaError:
            if md.state == S.ONGOING:
                md.producer_epoch, md.last_producer_epoch = old_epoch, old_last_epoch
                md.abort_transition()
            raise

    async def _complete(self, md: TransactionMetadata) -> None:
        """Markers, then Complete*. Stops if this broker stops coordinating the id (the new
        coordinator resumes from the Prepare* state it loads) or its coordinator epoch moves (this
        broker elected again: a new completion runs under the new epoch), and once the
        transaction left Prepare* (another completion of it finished first)."""
        prepared = md.state
        commit = prepared == S.PREPARE_COMMIT
        sm = self.state_manager
        partition = sm.partition_for(md.transactional_id)
        epoch = sm.coordinator_epoch(partition)
        if epoch is None:
            return

        def still_valid() -> bool:
            return sm.coordinator_epoch(partition) == epoch and sm.transactions.get(md.transactional_id) is md

        written = await self.marker_channel.send_markers(
            transactional_id=md.transactional_id, producer_id=md.producer_id, producer_epoch=md.producer_epoch,
            coordinator_epoch=epoch, commit=commit, partitions=set(md.partitions), still_valid=still_valid)
        while written and still_valid() and md.state == prepared:
            if md.pending_state is not None:
                await asyncio.sleep(COMPLETE_RETRY_S)
                continue
            target = md.prepare_transition(S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT, now_ms=self._now())
            try:
                await sm.append(md, target)
            except CoordinatorNotAvailableError as exc:
                log.warning("Storing the completion of %s failed (%s); retrying", md.transactional_id, exc)
                await asyncio.sleep(COMPLETE_RETRY_S)
                continue
            except KafkaError as exc:
                log.info("Stopped completing %s: %s", md.transactional_id, exc)
                return
            log.debug("Completed the %s of %s (producer id %d, epoch %d)", "commit" if commit else "abort",
                     md.transactional_id, md.producer_id, md.producer_epoch)
            return

    def _resume_transactions(self, partition: int, loaded: list[TransactionMetadata]) -> None:
        for md in loaded:
            if md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                log.info("Resuming the markers of %s (%s) after loading", md.transactional_id, md.state.kafka_name)
                self._spawn(self._complete(md))

    def _spawn(self, coroutine) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._background.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("Completing a transaction failed", exc_info=task.exception())

    # -- timeouts and expiry ------------------------------------------------------------------------
    async def abort_timed_out_transactions(self) -> int:
        now = self._now()
        aborted = 0
        for md in self.state_manager.owned_transactions():
            if md.state != S.ONGOING or md.pending_state is not None:
                continue
            if md.txn_start_timestamp_ms + md.txn_timeout_ms > now:
                continue
            log.info("Aborting the transaction of %s (producer id %d, epoch %d): it exceeded its timeout of %d ms",
                     md.transactional_id, md.producer_id, md.producer_epoch, md.txn_timeout_ms)
            try:
                await self._fence_and_abort(md)
                aborted += 1
            except KafkaError as exc:
                log.warning("Aborting the timed-out transaction of %s failed: %s", md.transactional_id, exc)
        return aborted

    async def remove_expired_transactional_ids(self) -> int:
        now = self._now()
        expiration_ms = self.config.transactional_id_expiration_ms
        removed = 0
        for md in self.state_manager.owned_transactions():
            if md.pending_state is not None or md.state not in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
                continue
            if md.txn_last_update_timestamp_ms + expiration_ms > now:
                continue
            md.prepare_transition(S.DEAD, now_ms=now)
            try:
                await self.state_manager.append(md, None, tombstone=True)
            except KafkaError as exc:
                log.warning("Removing expired transactional id %s failed: %s", md.transactional_id, exc)
                continue
            log.info("Removed expired transactional id %s (idle for %d ms)", md.transactional_id,
                     now - md.txn_last_update_timestamp_ms)
            removed += 1
        return removed

    def start(self) -> None:
        """Load the partitions led here (blocks on disk) and start the cleanup tasks."""
        self.state_manager.load()
        c = self.config
        self._every(c.transaction_abort_timed_out_transaction_cleanup_interval_ms, self.abort_timed_out_transactions,
                    "abort timed-out transactions")
        self._every(c.transaction_remove_expired_transaction_cleanup_interval_ms,
                    self.remove_expired_transactional_ids, "remove expired transactional ids")

    def _every(self, interval_ms: int, work, name: str) -> None:
        async def loop() -> None:
            while True:
                await asyncio.sleep(interval_ms / 1000)
                try:
                    await work()
                except Exception:  # noqa: BLE001 - retried next round
                    log.exception("%s failed", name)
        self._tasks.append(asyncio.get_running_loop().create_task(loop(), name=name))

    async def shutdown(self) -> None:
        for task in (*self._tasks, *self._background):
            task.cancel()
        await asyncio.gather(*self._tasks, *self._background, return_exceptions=True)
        await self.marker_channel.close()

    # -- admin views ---------------------------------------------------------------------------------
    def describe(self, transactional_id: str) -> dict:
        md = self.state_manager.get(transactional_id)
        if md is None:
            raise TransactionalIdNotFoundError(f"transactional id {transactional_id} is not known")
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(md.partitions):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        return {"transaction_state": md.state.kafka_name, "transaction_timeout_ms": md.txn_timeout_ms,
                "transaction_start_time_ms": md.txn_start_timestamp_ms, "producer_id": md.producer_id,
                "producer_epoch": md.producer_epoch,
                "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]}

    def list_transactions(self, *, states: set[TransactionState] | None, producer_ids: set[int] | None,
                          min_duration_ms: int = -1) -> list[dict]:
        now = self._now()
        result = []
        for md in self.state_manager.owned_transactions():
            if md.state == S.DEAD:
                continue
            if states and md.state not in states:
                continue
            if producer_ids and md.producer_id not in producer_ids:
                continue
            if min_duration_ms >= 0 and now - md.txn_start_timestamp_ms <= min_duration_ms:
                continue
            result.append({"transactional_id": md.transactional_id, "producer_id": md.producer_id,
                           "transaction_state": md.state.kafka_name})
        return result
