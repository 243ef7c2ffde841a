"""What a partition remembers of one producer (Kafka's ProducerStateEntry and BatchMetadata).

For every producer id that has written to a partition: its epoch, the coordinator epoch of its
last transaction marker, the first offset of its open transaction (-1: none), the max timestamp
of its last batch and the metadata of its last five batches, which is what lets the leader
recognise a retry (a duplicate) and check that the next batch follows in sequence.

Sequences are int32 and wrap from 2^31-1 to 0 (`in_sequence`, `decrement_sequence`), as Kafka's.

Plain values, no I/O; mutated only by `ProducerStateManager` (producer_state.py).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from logbroker.records.batch import NO_PRODUCER_EPOCH, NO_SEQUENCE, NO_TIMESTAMP, BatchHeader

NUM_BATCHES_TO_RETAIN = 5
INT32_MAX = 0x7FFFFFFF


def decrement_sequence(sequence: int, decrement: int) -> int:
    """`sequence - decrement` in the int32 sequence space that wraps from 2^31-1 to 0."""
    return (sequence - decrement) & INT32_MAX


def in_sequence(last_seq: int, next_seq: int) -> bool:
    """Whether `next_seq` directly follows `last_seq` (wrapping at int32 max, as Kafka does)."""
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """One remembered batch of a producer (Kafka's BatchMetadata).

    `offset_delta` is last offset minus first offset, which for a v2 batch is its lastOffsetDelta
    and also the distance between its first and last sequence. A duplicate answer uses
    `first_offset`, `last_offset` and `timestamp` (Kafka also reports `timestamp` as the
    duplicate's log append time).
    """

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


class ProducerStateEntry:
    """The state of one producer id on one partition (Kafka's ProducerStateEntry).

    `batch_metadata` holds at most five batches, oldest first, all of the current epoch:
    sequences increase along it. Mutated only by ProducerStateManager; read it, don't change it.
    """

    __slots__ = ("producer_id", "producer_epoch", "coordinator_epoch", "last_timestamp",
                 "current_txn_first_offset", "batch_metadata")

    def __init__(self, producer_id: int, *, producer_epoch: int = NO_PRODUCER_EPOCH,
                 coordinator_epoch: int = -1, last_timestamp: int = NO_TIMESTAMP,
                 current_txn_first_offset: int = -1,
                 batch_metadata: Iterable[BatchMetadata] = ()) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.coordinator_epoch = coordinator_epoch
        self.last_timestamp = last_timestamp
        self.current_txn_first_offset = current_txn_first_offset
        self.batch_metadata: deque[BatchMetadata] = deque(batch_metadata,
                                                          maxlen=NUM_BATCHES_TO_RETAIN)

    @property
    def is_empty(self) -> bool:
        return not self.batch_metadata

    @property
    def first_seq(self) -> int:
        return self.batch_metadata[0].first_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self.batch_metadata[-1].last_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def first_data_offset(self) -> int:
        return self.batch_metadata[0].first_offset if self.batch_metadata else -1

    @property
    def last_data_offset(self) -> int:
        return self.batch_metadata[-1].last_offset if self.batch_metadata else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batch_metadata[-1].offset_delta if self.batch_metadata else 0

    def find_duplicate_batch(self, header: BatchHeader) -> BatchMetadata | None:
        """The remembered batch with the same epoch and exactly the same sequence range, if any."""
        if header.producer_epoch != self.producer_epoch:
            return None
        first_seq, last_seq = header.base_sequence, header.last_sequence
        for batch in self.batch_metadata:
            if batch.last_seq == last_seq and batch.first_seq == first_seq:
                return batch
        return None

    def maybe_update_producer_epoch(self, producer_epoch: int) -> None:
        # Sequences restart with each epoch, so batches of an older epoch can never be matched.
        if producer_epoch != self.producer_epoch:
            self.batch_metadata.clear()
            self.producer_epoch = producer_epoch

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ProducerStateEntry):
            return NotImplemented
        return all(getattr(self, s) == getattr(other, s) for s in self.__slots__)

    def __repr__(self) -> str:
        return (f"ProducerStateEntry(producer_id={self.producer_id}, "
                f"producer_epoch={self.producer_epoch}, "
                f"coordinator_epoch={self.coordinator_epoch}, "
                f"last_timestamp={self.last_timestamp}, "
                f"current_txn_first_offset={self.current_txn_first_offset}, "
                f"batch_metadata={list(self.batch_metadata)})")
