"""metadata/reassignment.py: Kafka's reassignment arithmetic (RS = TRS + ORS, adding, removing)
and when and how a reassignment completes."""

from __future__ import annotations

import pytest

from logbroker.errors import InvalidReplicaAssignmentError
from logbroker.metadata.model import PartitionState
from logbroker.metadata.reassignment import ReplicaAssignment, completed_state, validate_target


def test_reassign_puts_the_target_first_and_records_adding_and_removing():
    moving = ReplicaAssignment((1,)).reassign_to((2, 3))
    assert moving == ReplicaAssignment((2, 3, 1), adding=(2, 3), removing=(1,))
    assert (moving.origin_replicas, moving.target_replicas) == ((1,), (2, 3))


def test_a_new_target_replaces_an_ongoing_reassignment_from_the_original_replicas():
    moving = ReplicaAssignment((1, 2)).reassign_to((3, 4))
    assert moving.reassign_to((2, 5)) == ReplicaAssignment((2, 5, 1), adding=(5,), removing=(1,))


def test_cancelling_reassigns_to_the_original_replicas_and_needs_no_step_b():
    moving = ReplicaAssignment((1,)).reassign_to((1, 3))
    assert moving == ReplicaAssignment((1, 3), adding=(3,), removing=())
    cancelled = moving.reassign_to(moving.origin_replicas)
    assert cancelled == ReplicaAssignment((1,))
    assert not cancelled.is_being_reassigned


def test_completion_waits_for_every_target_replica_in_the_isr():
    moving = ReplicaAssignment((2, 3, 1), adding=(2, 3), removing=(1,))
    assert completed_state(moving, PartitionState(1, 4, (1, 2)), live={1, 2, 3}) is None


def test_completion_moves_leadership_to_a_target_replica_and_drops_removed_ones_from_the_isr():
    moving = ReplicaAssignment((2, 3, 1), adding=(2, 3), removing=(1,))
    state = completed_state(moving, PartitionState(1, 4, (1, 3, 2), controller_epoch=7), live={1, 2, 3})
    assert state == PartitionState(2, 5, (3, 2), 7)
    assert completed_state(moving, PartitionState(3, 4, (1, 3, 2)), live={1, 2, 3}).leader == 3


@pytest.mark.parametrize("target, message", [
    ((), "Empty replica list"),
    ((2, 2), "Duplicate replica ids"),
    ((-1,), "Invalid broker id"),
    ((2, 9), "brokers that are not alive"),
])
def test_invalid_targets_are_refused(target, message):
    with pytest.raises(InvalidReplicaAssignmentError, match=message):
        validate_target(target, brokers=[1, 2, 3])
