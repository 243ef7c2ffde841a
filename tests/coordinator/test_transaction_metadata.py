"""TransactionMetadata's state machine: Kafka's valid previous states, the two-step transition,
and the epoch fence of an abort on the producer's behalf."""

from __future__ import annotations

import pytest

from logbroker.coordinator.transaction_metadata import (
    IllegalTransitionError,
    TransactionMetadata,
    TransactionState as S,
)
from logbroker.types import TopicPartition

TP = TopicPartition("t", 0)


def metadata(state: S = S.EMPTY, **kw) -> TransactionMetadata:
    return TransactionMetadata("tx", 7, 3, 60_000, state, **kw)


def test_begin_prepare_complete_commit_clears_partitions_and_keeps_the_start():
    md = metadata()
    target = md.prepare_transition(S.ONGOING, now_ms=100, partitions={TP}, txn_start_timestamp_ms=100)
    assert md.pending_state == S.ONGOING and md.state == S.EMPTY  # nothing applied before the append
    md.complete_transition(target)
    assert (md.state, md.partitions, md.txn_start_timestamp_ms, md.pending_state) == (S.ONGOING, {TP}, 100, None)
    md.complete_transition(md.prepare_transition(S.PREPARE_COMMIT, now_ms=200))
    md.complete_transition(md.prepare_transition(S.COMPLETE_COMMIT, now_ms=300))
    assert (md.state, md.partitions, md.txn_start_timestamp_ms, md.txn_last_update_timestamp_ms) == (
        S.COMPLETE_COMMIT, set(), 100, 300)


@pytest.mark.parametrize("state, new_state", [
    (S.EMPTY, S.PREPARE_COMMIT), (S.EMPTY, S.COMPLETE_ABORT), (S.ONGOING, S.COMPLETE_COMMIT),
    (S.PREPARE_COMMIT, S.PREPARE_ABORT), (S.PREPARE_ABORT, S.ONGOING), (S.COMPLETE_COMMIT, S.PREPARE_ABORT),
    (S.ONGOING, S.DEAD)])
def test_transitions_kafka_refuses_are_refused(state, new_state):
    md = metadata(state)
    with pytest.raises(IllegalTransitionError):
        md.prepare_transition(new_state, now_ms=1)
    assert md.pending_state is None


def test_a_pending_transition_blocks_another():
    md = metadata()
    md.prepare_transition(S.ONGOING, now_ms=1, partitions={TP})
    with pytest.raises(IllegalTransitionError):
        md.prepare_transition(S.EMPTY, now_ms=2)
    md.abort_transition()
    assert md.prepare_transition(S.EMPTY, now_ms=3).state == S.EMPTY


def test_epoch_fence_bumps_the_epoch_and_allows_prepare_abort_only():
    md = metadata(S.ONGOING, partitions={TP})
    md.fence_producer_epoch()
    assert (md.producer_epoch, md.pending_state) == (4, S.PREPARE_EPOCH_FENCE)
    target = md.prepare_transition(S.PREPARE_ABORT, now_ms=5)
    md.complete_transition(target)
    assert (md.state, md.producer_epoch, md.partitions) == (S.PREPARE_ABORT, 4, {TP})


def test_last_producer_id_and_epoch_change_only_when_given():
    md = metadata()
    md.complete_transition(md.prepare_transition(S.EMPTY, now_ms=1, producer_epoch=4, last_producer_epoch=3))
    assert (md.producer_id, md.producer_epoch, md.last_producer_id, md.last_producer_epoch) == (7, 4, -1, 3)
    md.complete_transition(md.prepare_transition(S.EMPTY, now_ms=2, producer_id=8, producer_epoch=0,
                                                 last_producer_id=7))
    assert (md.producer_id, md.producer_epoch, md.last_producer_id, md.last_producer_epoch) == (8, 0, 7, 3)
    md.complete_transition(md.prepare_transition(S.ONGOING, now_ms=3, partitions={TP}))
    md.fence_producer_epoch()
    assert (md.producer_epoch, md.last_producer_epoch) == (1, -1)


def test_names_are_kafkas():
    assert [s.kafka_name for s in S] == ["Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
                                         "CompleteAbort", "Dead", "PrepareEpochFence"]
    assert S.from_name("PrepareAbort") == S.PREPARE_ABORT and S.from_name("Nope") is None
