"""One transactional id's state, and the state machine it moves through (Kafka's
TransactionMetadata and TransactionState).

States and their ids in `__transaction_state` (TransactionLogValue.transaction_status):
Empty 0, Ongoing 1, PrepareCommit 2, PrepareAbort 3, CompleteCommit 4, CompleteAbort 5, Dead 6,
PrepareEpochFence 7. A transition is two steps, as in Kafka: `prepare_transition` checks it is
allowed, sets `pending_state` and returns the record to append; once the append is on every
in-sync replica, `complete_transition` applies it (or `abort_transition` forgets it). While a
transition is pending, every other request for the id gets CONCURRENT_TRANSACTIONS, so two
changes of one id never race — the event loop runs one handler at a time between awaits.

Invariants: partitions are non-empty only in Ongoing, PrepareCommit and PrepareAbort;
`txn_start_timestamp_ms` is -1 in Empty; `producer_epoch` never decreases for one producer id.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from logbroker.coordinator.transaction_log import TransactionLogValue
from logbroker.types import TopicPartition

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_PRODUCER_EPOCH = 32767  # Short.MaxValue


def is_epoch_exhausted(producer_epoch: int) -> bool:
    """Kafka keeps one epoch in reserve, so a fenced producer's epoch + 1 always fits."""
    return producer_epoch >= MAX_PRODUCER_EPOCH - 1


class TransactionState(enum.IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name Kafka's admin APIs use (DescribeTransactions, ListTransactions filters)."""
        return _NAMES[self]

    @classmethod
    def from_name(cls, name: str) -> TransactionState | None:
        return _BY_NAME.get(name)

    @property
    def is_complete(self) -> bool:
        return self in (TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT)


_NAMES = {
    TransactionState.EMPTY: "Empty", TransactionState.ONGOING: "Ongoing",
    TransactionState.PREPARE_COMMIT: "PrepareCommit", TransactionState.PREPARE_ABORT: "PrepareAbort",
    TransactionState.COMPLETE_COMMIT: "CompleteCommit", TransactionState.COMPLETE_ABORT: "CompleteAbort",
    TransactionState.DEAD: "Dead", TransactionState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {name: state for state, name in _NAMES.items()}

S = TransactionState
VALID_PREVIOUS_STATES: dict[TransactionState, frozenset[TransactionState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}


class IllegalTransitionError(Exception):
    """A bug: the coordinator asked for a transition the state machine does not allow."""


@dataclass(slots=True)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState = TransactionState.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    txn_start_timestamp_ms: int = -1
    txn_last_update_timestamp_ms: int = -1
    last_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    pending_state: TransactionState | None = None
    # The leader epoch of the __transaction_state partition when this coordinator took it over:
    # sent with the markers, so a partition leader can refuse those of a deposed coordinator.
    coordinator_epoch: int = 0

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    def record(self) -> TransactionLogValue:
        return TransactionLogValue(self.producer_id, self.producer_epoch, self.txn_timeout_ms,
                                   int(self.state), tuple(sorted(self.partitions)),
                                   self.txn_last_update_timestamp_ms, self.txn_start_timestamp_ms)

    def prepare_transition(self, new_state: TransactionState, *, now_ms: int, producer_id: int | None = None,
                           producer_epoch: int | None = None, txn_timeout_ms: int | None = None,
                           partitions: set[TopicPartition] | None = None,
                           txn_start_timestamp_ms: int | None = None, last_producer_id: int | None = None,
                           last_producer_epoch: int | None = None) -> TransactionMetadata:
        """The metadata after the transition, to append; sets `pending_state`. Raises
        IllegalTransitionError for a transition Kafka's state machine refuses. The last producer
        id and epoch (what a KIP-360 InitProducerId may name besides the current ones) change only
        when given, as Kafka's InitProducerId sets them."""
        if self.pending_state is not None and self.pending_state != S.PREPARE_EPOCH_FENCE:
            raise IllegalTransitionError(f"{self.transactional_id}: {self.pending_state.kafka_name} is pending")
        if self.state not in VALID_PREVIOUS_STATES[new_state]:
            raise IllegalTransitionError(
                f"{self.transactional_id}: {self.state.kafka_name} -> {new_state.kafka_name} is not allowed")
        if new_state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT, S.DEAD):
            partitions = set()
        target = TransactionMetadata(
            self.transactional_id,
            self.producer_id if producer_id is None else producer_id,
            self.producer_epoch if producer_epoch is None else producer_epoch,
            self.txn_timeout_ms if txn_timeout_ms is None else txn_timeout_ms,
            new_state,
            set(self.partitions) if partitions is None else set(partitions),
            self.txn_start_timestamp_ms if txn_start_timestamp_ms is None else txn_start_timestamp_ms,
            now_ms, self.last_producer_id if last_producer_id is None else last_producer_id,
            self.last_producer_epoch if last_producer_epoch is None else last_producer_epoch,
            coordinator_epoch=self.coordinator_epoch)
        if new_state == S.EMPTY:
            target.txn_start_timestamp_ms = -1
        self.pending_state = new_state
        return target

    def complete_transition(self, target: TransactionMetadata) -> None:
        """Apply a prepared transition whose record is now stored."""
        for name in ("producer_id", "producer_epoch", "txn_timeout_ms", "state", "partitions",
                     "txn_start_timestamp_ms", "txn_last_update_timestamp_ms", "last_producer_id",
                     "last_producer_epoch"):
            setattr(self, name, getattr(target, name))
        self.partitions = set(target.partitions)
        self.pending_state = None

    def abort_transition(self) -> None:
        self.pending_state = None

    def fence_producer_epoch(self) -> None:
        """Kafka's prepareFenceProducerEpoch: bump the epoch in memory before aborting an ongoing
        transaction on the producer's behalf (a timeout, or a new InitProducerId), so the abort
        markers carry an epoch the old producer cannot write with any more. The last epoch is
        forgotten: the fenced producer cannot get the id back by naming its epoch (KIP-360)."""
        if not self.is_producer_epoch_exhausted:
            self.producer_epoch += 1
        self.last_producer_epoch = NO_PRODUCER_EPOCH
        self.pending_state = S.PREPARE_EPOCH_FENCE

    @classmethod
    def from_record(cls, transactional_id: str, value: TransactionLogValue, coordinator_epoch: int
                    ) -> TransactionMetadata:
        return cls(transactional_id, value.producer_id, value.producer_epoch, value.transaction_timeout_ms,
                   TransactionState(value.state), set(value.partitions), value.start_timestamp_ms,
                   value.last_update_timestamp_ms, value.previous_producer_id,
                   coordinator_epoch=coordinator_epoch)
