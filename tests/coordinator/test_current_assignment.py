"""Reconciliation of one member (Kafka's CurrentAssignmentBuilder): revoke before assign."""

from __future__ import annotations

import uuid

import pytest

from logbroker.coordinator.consumer_group import MemberAssignment, MemberState
from logbroker.coordinator.current_assignment import reconcile
from logbroker.errors import FencedMemberEpochError

T = uuid.UUID(int=7)


def ps(*partitions: int) -> dict:
    return {T: frozenset(partitions)}


def nobody(topic_id, partition):
    return None


def test_a_stable_member_at_the_target_epoch_stays_as_it_is():
    current = MemberAssignment(3, 2, MemberState.STABLE, ps(0, 1))
    assert reconcile(current, member_id="m", target_epoch=3, target=ps(0), owner=nobody, owned=None) is current


def test_partitions_leaving_the_target_are_revoked_first_at_the_same_epoch():
    current = MemberAssignment(3, 2, MemberState.STABLE, ps(0, 1, 2))
    step = reconcile(current, member_id="m", target_epoch=4, target=ps(0, 3), owner=nobody, owned=[(T, [0, 1, 2])])
    assert step == MemberAssignment(3, 3, MemberState.UNREVOKED_PARTITIONS, ps(0), ps(1, 2))
    # Until the member stops reporting them, nothing moves.
    assert reconcile(step, member_id="m", target_epoch=4, target=ps(0, 3), owner=nobody,
                     owned=[(T, [0, 2])]) is step
    assert reconcile(step, member_id="m", target_epoch=4, target=ps(0, 3), owner=nobody, owned=None) is step
    done = reconcile(step, member_id="m", target_epoch=4, target=ps(0, 3), owner=nobody, owned=[(T, [0])])
    assert done == MemberAssignment(4, 3, MemberState.STABLE, ps(0, 3), {})


def test_a_partition_another_member_still_holds_is_withheld():
    current = MemberAssignment(1, 0, MemberState.STABLE, {})
    holder = {(T, 1): "other"}
    step = reconcile(current, member_id="m", target_epoch=2, target=ps(0, 1),
                     owner=lambda t, p: holder.get((t, p)), owned=[])
    assert step == MemberAssignment(2, 1, MemberState.UNRELEASED_PARTITIONS, ps(0), {})
    holder.clear()
    released = reconcile(step, member_id="m", target_epoch=2, target=ps(0, 1), owner=nobody, owned=[(T, [0])])
    assert released == MemberAssignment(2, 2, MemberState.STABLE, ps(0, 1), {})


def test_a_member_in_an_unknown_state_must_give_everything_up():
    current = MemberAssignment(1, 0, MemberState.UNKNOWN, ps(0))
    with pytest.raises(FencedMemberEpochError):
        reconcile(current, member_id="m", target_epoch=2, target=ps(0), owner=nobody, owned=[(T, [0])])
    assert reconcile(current, member_id="m", target_epoch=2, target=ps(0), owner=nobody,
                     owned=[]).state is MemberState.STABLE
