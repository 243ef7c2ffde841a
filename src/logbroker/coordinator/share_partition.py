"""A share-partition: one share group's delivery state of one topic partition (KIP-932).

Kafka's SharePartition. Many members of a share group read the same partition; each record is
handed to one of them at a time. The share-partition keeps a window of in-flight records,
`[start_offset, end_offset)`:

- every offset below `start_offset` is settled (acknowledged or archived) and never delivered
  again; `end_offset` is the first offset never yet fetched;
- each offset inside the window has a state: AVAILABLE (may be acquired), ACQUIRED (held by one
  member until `lock_deadline_ms`), ACKNOWLEDGED or ARCHIVED (settled), and a delivery count — how
  often it was acquired;
- `start_offset` only moves forward, over a run of settled offsets (which are then dropped).

Transitions: ShareFetch acquires AVAILABLE records (delivery count + 1; a record acquired when its
count has reached `delivery_count_limit` is ARCHIVED instead, as Kafka's delivery limit);
ShareAcknowledge settles ACQUIRED records of the acknowledging member: ACCEPT → ACKNOWLEDGED,
RELEASE → AVAILABLE, REJECT → ARCHIVED. Acknowledging an offset that is not ACQUIRED by that member
(never acquired, already settled, another member's, or its lock expired) raises
InvalidRecordStateError and changes nothing of that request. A lock that expires, or a member
that leaves, releases the records it held.

Settling and releasing take two steps, so that a change becomes visible only once it is
persisted: `acknowledge`, `expire_locks` and `release_member` check the request and return a
Transition (the records' new states) without applying it; its offsets are then *pending* — no
other acknowledgement, acquisition or lock expiry touches them. The caller persists
`persisted_state(transition)` and then calls `commit(transition)`, or `abort(transition)` when
the write failed, which leaves the records exactly as they were.

`persisted_state()` is what is persisted (`__share_group_state`, coordinator/share_state_log.py):
the start offset and runs of (first, last, state, delivery count), ACQUIRED written as AVAILABLE,
so a broker restart redelivers everything not settled and nothing settled.

Plain synchronous code with an injected Clock; it runs on the event loop and never blocks.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from logbroker.clock import Clock
from logbroker.errors import InvalidRecordStateError
from logbroker.types import TopicPartition


class RecordState(enum.IntEnum):
    """A record's delivery state; the persisted ids are Kafka's (0 Available, 2 Acked, 4 Archived)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AcknowledgeType(enum.IntEnum):
    """ShareFetch/ShareAcknowledge acknowledge types."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


_SETTLED = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


@dataclass(slots=True)
class InFlightRecord:
    state: RecordState
    delivery_count: int = 0
    member_id: str | None = None
    lock_deadline_ms: int = 0


@dataclass(frozen=True, slots=True)
class StateBatch:
    """A persisted run of offsets sharing a state and a delivery count (last offset inclusive)."""

    first_offset: int
    last_offset: int
    state: int
    delivery_count: int


@dataclass(slots=True)
class Transition:
    """New states of some records of one share-partition, not applied yet: `states` maps each
    offset to its record as it will be once the transition is committed. `state_epoch` is the
    share-partition's when it was made (a reset in between makes it moot)."""

    state_epoch: int
    states: dict[int, InFlightRecord]


@dataclass(frozen=True, slots=True)
class LogBatch:
    """A log batch as acquisition sees it: its offsets, and whether its records go to clients
    (False for a control batch, and under read_committed for a batch of an aborted transaction)."""

    base_offset: int
    last_offset: int
    deliverable: bool = True


@dataclass(frozen=True, slots=True)
class AcquiredRecords:
    first_offset: int
    last_offset: int
    delivery_count: int


class SharePartition:
    def __init__(self, *, group_id: str, tp: TopicPartition, start_offset: int,
                 state_batches: list[StateBatch] = (), state_epoch: int = 0, leader_epoch: int = -1,
                 delivery_count_limit: int, max_in_flight_records: int, lock_duration_ms: int,
                 clock: Clock) -> None:
        self.group_id = group_id
        self.tp = tp
        self.state_epoch = state_epoch
        self.leader_epoch = leader_epoch  # of the partition, when this broker came to lead it
        self.delivery_count_limit = delivery_count_limit
        self.max_in_flight_records = max_in_flight_records
        self.lock_duration_ms = lock_duration_ms
        self.clock = clock
        self.start_offset = start_offset
        self.end_offset = start_offset
        self.records: dict[int, InFlightRecord] = {}
        self.pending: set[int] = set()  # the offsets of uncommitted Transitions
        for batch in state_batches:
            for offset in range(max(batch.first_offset, start_offset), batch.last_offset + 1):
                self.records[offset] = InFlightRecord(RecordState(batch.state), batch.delivery_count)
            self.end_offset = max(self.end_offset, batch.last_offset + 1)
        for offset in range(start_offset, self.end_offset):
            self.records.setdefault(offset, InFlightRecord(RecordState.AVAILABLE))
        self._advance_start()

    # -- reading the state ------------------------------------------------------------------
    def next_fetch_offset(self) -> int:
        """The first offset a fetch may acquire: the first AVAILABLE one in the window, else
        the window's end."""
        for offset in range(self.start_offset, self.end_offset):
            if self.records[offset].state == RecordState.AVAILABLE:
                return offset
        return self.end_offset

    def acquired_count(self) -> int:
        return sum(1 for r in self.records.values() if r.state == RecordState.ACQUIRED)

    def can_acquire(self) -> bool:
        """True when a fetch could acquire something (an AVAILABLE record in the window, or room
        for new records past it)."""
        if any(r.state == RecordState.AVAILABLE for r in self.records.values()):
            return True
        return self.end_offset - self.start_offset < self.max_in_flight_records

    def next_lock_deadline_ms(self) -> int | None:
        deadlines = [r.lock_deadline_ms for offset, r in self.records.items()
                     if r.state == RecordState.ACQUIRED and offset not in self.pending]
        return min(deadlines) if deadlines else None

    def persisted_state(self, transition: Transition | None = None) -> tuple[int, list[StateBatch]]:
        """(start offset, runs of (state, delivery count)) of the window as it is, or as it will be
        once `transition` is committed; ACQUIRED is written as AVAILABLE."""
        states = transition.states if transition is not None else {}
        start = self.start_offset
        while start < self.end_offset and states.get(start, self.records[start]).state in _SETTLED:
            start += 1
        runs: list[StateBatch] = []
        for offset in range(start, self.end_offset):
            record = states.get(offset, self.records[offset])
            state = RecordState.AVAILABLE if record.state == RecordState.ACQUIRED else record.state
            last = runs[-1] if runs else None
            if last and last.last_offset == offset - 1 and last.state == state \
                    and last.delivery_count == record.delivery_count:
                runs[-1] = StateBatch(last.first_offset, offset, state, record.delivery_count)
            else:
                runs.append(StateBatch(offset, offset, int(state), record.delivery_count))
        return start, runs

    # -- acquiring ----------------------------------------------------------------------------
    def acquire(self, member_id: str, batches: list[LogBatch], *, max_records: int,
                record_limit: bool = False) -> list[AcquiredRecords]:
        """Acquire for `member_id` the AVAILABLE records of `batches` — the log batches a read
        returned, in offset order — and the new offsets past the window. Returns the acquired
        ranges in offset order.

        `max_records` is a soft limit aligned to batch boundaries, as Kafka's batch-optimized
        acquire mode: batches are taken whole, and no further batch is started once
        `max_records` records are acquired (so one batch larger than the limit is acquired
        whole). With `record_limit` (Kafka's record-limit mode) it is strict: a batch may be
        acquired in part. `group.share.partition.max.record.locks` bounds the window the same
        way: no new batch starts past it. Offsets between batches (compacted away) and the
        records of batches that are not to be delivered (control batches; under read_committed,
        those of aborted transactions) are archived: no client sees them."""
        now_ms = self.clock.monotonic_ms()
        deadline_ms = now_ms + self.lock_duration_ms
        acquired: list[AcquiredRecords] = []
        count = 0
        for batch in batches:
            if count >= max_records:
                break
            if batch.last_offset < self.start_offset:
                continue
            first_new = max(batch.base_offset, self.end_offset)
            if batch.last_offset >= first_new and first_new - self.start_offset >= self.max_in_flight_records:
                break
            for offset in range(self.end_offset, batch.base_offset):
                self.records[offset] = InFlightRecord(RecordState.ARCHIVED)  # a gap in the log
            self.end_offset = max(self.end_offset, batch.base_offset)
            for offset in range(max(batch.base_offset, self.start_offset), batch.last_offset + 1):
                if record_limit and count >= max_records:
                    break
                record = self.records.get(offset)
                if record is None:
                    record = self.records[offset] = InFlightRecord(RecordState.AVAILABLE)
                    self.end_offset = offset + 1
                if record.state != RecordState.AVAILABLE or offset in self.pending:
                    continue
                if not batch.deliverable or record.delivery_count >= self.delivery_count_limit:
                    record.state = RecordState.ARCHIVED
                    continue
                record.state = RecordState.ACQUIRED
                record.delivery_count += 1
                record.member_id = member_id
                record.lock_deadline_ms = deadline_ms
                count += 1
                prev = acquired[-1] if acquired else None
                if prev and prev.last_offset == offset - 1 and prev.delivery_count == record.delivery_count:
                    acquired[-1] = AcquiredRecords(prev.first_offset, offset, prev.delivery_count)
                else:
                    acquired.append(AcquiredRecords(offset, offset, record.delivery_count))
        self._advance_start()
        return acquired

    # -- settling -----------------------------------------------------------------------------
    def acknowledge(self, member_id: str, batches: list[tuple[int, int, list[int]]]) -> Transition | None:
        """The transition of acknowledgements: (first offset, last offset, acknowledge types) —
        one type for the whole range, or one per offset. Every offset must be ACQUIRED by
        `member_id` with its lock still held and no transition pending (GAP: any offset not
        settled); else InvalidRecordStateError and nothing changes. RENEW extends the lock. None
        when nothing would change (GAPs over settled offsets only)."""
        now_ms = self.clock.monotonic_ms()
        states: dict[int, InFlightRecord] = {}
        for first, last, types in batches:
            if last < first or not types or (len(types) != 1 and len(types) != last - first + 1):
                raise InvalidRecordStateError(f"Malformed acknowledgement batch {first}-{last} on {self.tp}")
            for offset in range(first, last + 1):
                ack_type = types[0] if len(types) == 1 else types[offset - first]
                record = self.records.get(offset)
                if offset in self.pending or offset in states:
                    raise InvalidRecordStateError(
                        f"Offset {offset} of {self.tp} is being acknowledged already in share group {self.group_id}")
                if ack_type == AcknowledgeType.GAP:
                    if record is not None and record.state not in _SETTLED:
                        states[offset] = InFlightRecord(RecordState.ARCHIVED, record.delivery_count)
                    continue
                if record is None or record.state != RecordState.ACQUIRED or record.member_id != member_id:
                    raise InvalidRecordStateError(
                        f"Offset {offset} of {self.tp} is not acquired by member {member_id} in share group "
                        f"{self.group_id}")
                if record.lock_deadline_ms <= now_ms:
                    raise InvalidRecordStateError(
                        f"The acquisition lock of offset {offset} of {self.tp} has expired")
                if ack_type == AcknowledgeType.ACCEPT:
                    states[offset] = InFlightRecord(RecordState.ACKNOWLEDGED, record.delivery_count)
                elif ack_type == AcknowledgeType.REJECT:
                    states[offset] = InFlightRecord(RecordState.ARCHIVED, record.delivery_count)
                elif ack_type == AcknowledgeType.RELEASE:
                    states[offset] = self._released(record)
                elif ack_type == AcknowledgeType.RENEW:
                    states[offset] = InFlightRecord(RecordState.ACQUIRED, record.delivery_count, member_id,
                                                    now_ms + self.lock_duration_ms)
                else:
                    raise InvalidRecordStateError(f"Unknown acknowledge type {ack_type}")
        return self._begin(states)

    def release_member(self, member_id: str) -> Transition | None:
        """The transition releasing every record `member_id` holds (it left, or closed its share
        session); None when it holds none."""
        return self._begin({offset: self._released(record) for offset, record in self.records.items()
                            if record.state == RecordState.ACQUIRED and record.member_id == member_id
                            and offset not in self.pending})

    def expire_locks(self) -> Transition | None:
        """The transition releasing the records whose acquisition lock has expired; None when
        there are none."""
        now_ms = self.clock.monotonic_ms()
        return self._begin({offset: self._released(record) for offset, record in self.records.items()
                            if record.state == RecordState.ACQUIRED and record.lock_deadline_ms <= now_ms
                            and offset not in self.pending})

    def _begin(self, states: dict[int, InFlightRecord]) -> Transition | None:
        if not states:
            return None
        self.pending.update(states)
        return Transition(self.state_epoch, states)

    def commit(self, transition: Transition) -> None:
        """Apply `transition` (its state is persisted)."""
        self.pending.difference_update(transition.states)
        if transition.state_epoch != self.state_epoch:
            return
        for offset, record in transition.states.items():
            if offset in self.records:
                self.records[offset] = record
        self._advance_start()

    def abort(self, transition: Transition) -> None:
        """Drop `transition` (persisting it failed): its records stay as they were."""
        self.pending.difference_update(transition.states)

    def reset(self, start_offset: int) -> None:
        """Start over at `start_offset` (AlterShareGroupOffsets on an empty group)."""
        self.records.clear()
        self.pending.clear()
        self.start_offset = self.end_offset = start_offset
        self.state_epoch += 1

    def _released(self, record: InFlightRecord) -> InFlightRecord:
        # A record released after its last allowed delivery is archived (the delivery limit).
        return InFlightRecord(RecordState.ARCHIVED if record.delivery_count >= self.delivery_count_limit
                              else RecordState.AVAILABLE, record.delivery_count)

    def _advance_start(self) -> None:
        while self.start_offset < self.end_offset and self.records[self.start_offset].state in _SETTLED:
            del self.records[self.start_offset]
            self.start_offset += 1
