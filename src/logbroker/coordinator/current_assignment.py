"""Reconciliation: the next step of one member from its current assignment towards its target.

Kafka's CurrentAssignmentBuilder. A member never holds a partition another member still holds
(KIP-848's guarantee, which replaces the stop-the-world rebalance): moving a partition from A
to B takes three heartbeats,

    A: STABLE ─target drops p─▶ UNREVOKED_PARTITIONS (p pending revocation, A's epoch unchanged)
    A: its heartbeat no longer lists p ─▶ next epoch, p released
    B: target adds p, p held by A ─▶ UNRELEASED_PARTITIONS (B's epoch moves on, p withheld)
    B: p released ─▶ p assigned, STABLE

`reconcile` is a pure function of the member's assignment, its target at the assignment epoch,
who holds each partition, and what the member reported owning (None when its heartbeat did not
say, which counts as still owning everything pending revocation).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable

from logbroker.coordinator.assignors import Assignment
from logbroker.coordinator.consumer_group import MemberAssignment, MemberState
from logbroker.errors import FencedMemberEpochError


def reconcile(current: MemberAssignment, *, member_id: str, target_epoch: int, target: Assignment,
              owner: Callable[[uuid.UUID, int], str | None],
              owned: Iterable[tuple[uuid.UUID, Iterable[int]]] | None) -> MemberAssignment:
    """The member's next assignment (Kafka's CurrentAssignmentBuilder.build)."""
    owned_list = None if owned is None else [(t, frozenset(ps)) for t, ps in owned]

    def owns_any(assignment: Assignment) -> bool:
        if owned_list is None:
            return True
        return any(assignment.get(t, frozenset()) & ps for t, ps in owned_list)

    def next_assignment(member_epoch: int, assigned: Assignment) -> MemberAssignment:
        kept: dict[uuid.UUID, frozenset[int]] = {}
        revoking: dict[uuid.UUID, frozenset[int]] = {}
        adding: dict[uuid.UUID, frozenset[int]] = {}
        unreleased = False
        for topic_id in target.keys() | assigned.keys():
            wanted = target.get(topic_id, frozenset())
            held = assigned.get(topic_id, frozenset())
            keep = held & wanted
            new = wanted - keep
            free = frozenset(p for p in new if owner(topic_id, p) in (None, member_id))
            unreleased = unreleased or free != new
            if keep:
                kept[topic_id] = keep
            if held - keep:
                revoking[topic_id] = held - keep
            if free:
                adding[topic_id] = free
        if revoking and owns_any(revoking):
            # Revoke first: the member stays at its epoch until it has let these go.
            return MemberAssignment(member_epoch, current.member_epoch, MemberState.UNREVOKED_PARTITIONS,
                                    kept, revoking)
        for topic_id, ps in adding.items():
            kept[topic_id] = kept.get(topic_id, frozenset()) | ps
        state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
        return MemberAssignment(target_epoch, current.member_epoch, state, kept, {})

    state = current.state
    if state is MemberState.STABLE:
        if current.member_epoch == target_epoch:
            return current
        return next_assignment(current.member_epoch, current.assigned)
    if state is MemberState.UNREVOKED_PARTITIONS:
        if owns_any(current.pending_revocation):
            return current
        return next_assignment(current.member_epoch + 1, current.assigned)
    if state is MemberState.UNRELEASED_PARTITIONS:
        return next_assignment(current.member_epoch, current.assigned)
    # UNKNOWN: a state of a newer Kafka; start the member over from nothing.
    if owned_list is None or any(ps for _, ps in owned_list):
        raise FencedMemberEpochError("The consumer group member is in an unknown state. "
                                     "The member must abandon all its partitions and rejoin.")
    return next_assignment(target_epoch, current.assigned)
