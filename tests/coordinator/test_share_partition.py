"""SharePartition: the in-flight window of one share group on one partition (KIP-932)."""

from __future__ import annotations

import pytest

from logbroker.clock import ManualClock
from logbroker.coordinator.share_partition import (
    AcknowledgeType,
    AcquiredRecords,
    LogBatch,
    RecordState,
    SharePartition,
    StateBatch,
)
from logbroker.errors import InvalidRecordStateError
from logbroker.types import TopicPartition

ACCEPT, RELEASE, REJECT, GAP = AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT, AcknowledgeType.GAP


def share_partition(clock, *, start=0, batches=(), limit=5, locks=100, lock_ms=30_000):
    return SharePartition(group_id="g", tp=TopicPartition("t", 0), start_offset=start, state_batches=list(batches),
                          delivery_count_limit=limit, max_in_flight_records=locks, lock_duration_ms=lock_ms,
                          clock=clock)


def settle(sp, transition):
    """Commit a transition as the manager does once its state is persisted."""
    assert transition is not None
    sp.commit(transition)
    return len(transition.states)


def test_acquire_hands_each_record_to_one_member():
    sp = share_partition(ManualClock())
    assert sp.acquire("a", [LogBatch(0, 4)], max_records=3, record_limit=True) == [AcquiredRecords(0, 2, 1)]
    assert sp.acquire("b", [LogBatch(0, 4)], max_records=10) == [AcquiredRecords(3, 4, 1)]
    assert sp.acquire("c", [LogBatch(0, 4)], max_records=10) == []
    assert sp.next_fetch_offset() == 5


def test_accept_settles_and_moves_the_start_offset():
    sp = share_partition(ManualClock())
    sp.acquire("a", [LogBatch(0, 4)], max_records=10)
    settle(sp, sp.acknowledge("a", [(0, 1, [ACCEPT]), (2, 2, [REJECT])]))
    assert sp.start_offset == 3
    assert sp.records[3].state == RecordState.ACQUIRED


def test_release_redelivers_with_a_higher_delivery_count():
    sp = share_partition(ManualClock())
    sp.acquire("a", [LogBatch(0, 1)], max_records=10)
    settle(sp, sp.acknowledge("a", [(0, 1, [RELEASE])]))
    assert sp.next_fetch_offset() == 0
    assert sp.acquire("b", [LogBatch(0, 1)], max_records=10) == [AcquiredRecords(0, 1, 2)]


def test_acknowledging_another_members_record_is_invalid_record_state_and_changes_nothing():
    sp = share_partition(ManualClock())
    sp.acquire("a", [LogBatch(0, 1)], max_records=10)
    with pytest.raises(InvalidRecordStateError):
        sp.acknowledge("b", [(0, 0, [ACCEPT])])
    with pytest.raises(InvalidRecordStateError):
        sp.acknowledge("a", [(0, 0, [ACCEPT]), (5, 5, [ACCEPT])])  # 5 was never acquired
    assert sp.records[0].state == RecordState.ACQUIRED and sp.start_offset == 0


def test_an_expired_lock_releases_the_record_and_its_acknowledgement_fails():
    clock = ManualClock()
    sp = share_partition(clock, lock_ms=1000)
    sp.acquire("a", [LogBatch(0, 0)], max_records=10)
    clock.advance(1000)
    with pytest.raises(InvalidRecordStateError):
        settle(sp, sp.acknowledge("a", [(0, 0, [ACCEPT])]))
    assert settle(sp, sp.expire_locks()) == 1
    assert sp.records[0].state == RecordState.AVAILABLE


def test_the_delivery_limit_archives_the_record():
    clock = ManualClock()
    sp = share_partition(clock, limit=2)
    for member in ("a", "b"):
        assert sp.acquire(member, [LogBatch(0, 0), LogBatch(1, 1)], max_records=1) == [AcquiredRecords(0, 0, 1 if member == "a" else 2)]
        settle(sp, sp.acknowledge(member, [(0, 0, [RELEASE])]))
    assert sp.start_offset == 1  # offset 0 archived after its second delivery
    assert sp.acquire("c", [LogBatch(0, 0), LogBatch(1, 1)], max_records=5) == [AcquiredRecords(1, 1, 1)]


def test_control_batches_and_log_gaps_are_archived_not_delivered():
    sp = share_partition(ManualClock())
    assert sp.acquire("a", [LogBatch(0, 1), LogBatch(2, 2, deliverable=False), LogBatch(5, 6)], max_records=10) == [
        AcquiredRecords(0, 1, 1), AcquiredRecords(5, 6, 1)]
    settle(sp, sp.acknowledge("a", [(0, 1, [ACCEPT])]))
    assert sp.start_offset == 5


def test_member_leaving_releases_its_records_only():
    sp = share_partition(ManualClock())
    sp.acquire("a", [LogBatch(0, 1)], max_records=1, record_limit=True)
    sp.acquire("b", [LogBatch(0, 1)], max_records=1, record_limit=True)
    assert settle(sp, sp.release_member("a")) == 1
    assert sp.records[0].state == RecordState.AVAILABLE and sp.records[1].member_id == "b"


def test_state_batches_persist_acquired_as_available_and_reload_the_same_window():
    sp = share_partition(ManualClock())
    sp.acquire("a", [LogBatch(0, 5)], max_records=10)
    settle(sp, sp.acknowledge("a", [(1, 2, [ACCEPT]), (4, 4, [RELEASE])]))
    start, batches = sp.persisted_state()
    assert start == 0 and batches == [StateBatch(0, 0, 0, 1), StateBatch(1, 2, 2, 1), StateBatch(3, 5, 0, 1)]
    again = share_partition(ManualClock(), start=sp.start_offset, batches=batches)
    assert again.next_fetch_offset() == 0 and again.end_offset == 6
    assert again.acquire("b", [LogBatch(0, 5)], max_records=10) == [AcquiredRecords(0, 0, 2), AcquiredRecords(3, 5, 2)]


def test_gap_acknowledgement_archives_offsets_without_records():
    sp = share_partition(ManualClock())
    sp.acquire("a", [LogBatch(0, 2)], max_records=10)
    settle(sp, sp.acknowledge("a", [(0, 2, [ACCEPT, GAP, ACCEPT])]))
    assert sp.start_offset == 3


def test_max_records_is_a_soft_limit_on_batch_boundaries():
    sp = share_partition(ManualClock())
    batches = [LogBatch(0, 9), LogBatch(10, 19), LogBatch(20, 29)]
    assert sp.acquire("a", batches, max_records=3) == [AcquiredRecords(0, 9, 1)], "one batch, whole"
    assert sp.acquire("b", batches, max_records=11) == [AcquiredRecords(10, 29, 1)], "no batch split"
    settle(sp, sp.release_member("a"))
    assert sp.acquire("c", batches, max_records=3, record_limit=True) == [AcquiredRecords(0, 2, 2)]


def test_no_new_batch_starts_past_max_in_flight_records():
    sp = share_partition(ManualClock(), locks=100)
    acquired = sp.acquire("a", [LogBatch(0, 59), LogBatch(60, 119), LogBatch(120, 179)], max_records=500)
    assert acquired == [AcquiredRecords(0, 119, 1)]
    assert not sp.can_acquire()


def test_a_transition_is_visible_only_once_committed_and_abort_leaves_the_records_as_they_were():
    sp = share_partition(ManualClock())
    sp.acquire("a", [LogBatch(0, 3)], max_records=10)
    transition = sp.acknowledge("a", [(0, 1, [ACCEPT]), (2, 2, [RELEASE])])
    # What would be persisted, while nothing has changed yet.
    assert sp.persisted_state(transition) == (2, [StateBatch(2, 3, 0, 1)])
    assert sp.start_offset == 0 and all(sp.records[o].state == RecordState.ACQUIRED for o in range(4))
    assert sp.acquire("b", [LogBatch(0, 3)], max_records=10) == []  # the RELEASE is not applied yet
    with pytest.raises(InvalidRecordStateError):
        sp.acknowledge("a", [(0, 0, [ACCEPT])])  # pending already
    sp.abort(transition)
    assert sp.start_offset == 0 and [sp.records[o].member_id for o in range(4)] == ["a"] * 4
    assert not sp.pending
    settle(sp, sp.acknowledge("a", [(0, 1, [ACCEPT]), (2, 2, [RELEASE])]))
    assert sp.start_offset == 2 and sp.records[2].state == RecordState.AVAILABLE


def test_lock_expiry_skips_records_whose_acknowledgement_is_being_persisted():
    clock = ManualClock()
    sp = share_partition(clock, lock_ms=1000)
    sp.acquire("a", [LogBatch(0, 1)], max_records=10)
    transition = sp.acknowledge("a", [(0, 0, [ACCEPT])])
    clock.advance(1000)
    expired = sp.expire_locks()
    assert list(expired.states) == [1]
    assert sp.next_lock_deadline_ms() is None  # both offsets pending
    settle(sp, transition)
    settle(sp, expired)
    assert sp.start_offset == 1 and sp.records[1].state == RecordState.AVAILABLE
