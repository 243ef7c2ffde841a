"""Whom the controller makes leader, and which partitions it moves back to their preferred replica.

Kafka's PartitionLeaderElectionAlgorithms and KafkaController.checkAndTriggerAutoLeaderRebalance,
as pure functions of the assignment, the ISR and the live brokers (no I/O; the controller in
server/ reads ZooKeeper and writes the result). The preferred replica of a partition is the first
of its assignment: round-robin assignment spreads those over the brokers, so leadership is
balanced exactly when every partition is led by its preferred replica.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping

from logbroker.metadata.model import PartitionState
from logbroker.types import TopicPartition


class ElectionType(enum.IntEnum):
    """ElectLeaders' election_type (Kafka's ElectionType)."""

    PREFERRED = 0
    UNCLEAN = 1


def preferred_replica_leader(assignment: tuple[int, ...], isr: Iterable[int],
                             live: set[int]) -> int | None:
    """The preferred replica if it is alive and in the ISR, else None (no election possible)."""
    if assignment and assignment[0] in live and assignment[0] in set(isr):
        return assignment[0]
    return None


def offline_partition_leader(assignment: tuple[int, ...], isr: Iterable[int], live: set[int], *,
                             unclean: bool) -> int | None:
    """The first live ISR member in assignment order; with `unclean`, failing that, the first live
    replica (which may lack acknowledged records). None when there is no candidate."""
    in_sync = set(isr)
    clean = next((r for r in assignment if r in live and r in in_sync), None)
    if clean is not None or not unclean:
        return clean
    return next((r for r in assignment if r in live), None)


def election_needed(election_type: ElectionType, assignment: tuple[int, ...],
                    state: PartitionState, live: set[int]) -> bool:
    """PREFERRED: the leader is not the preferred replica. UNCLEAN: the partition has no live leader."""
    if election_type == ElectionType.PREFERRED:
        return bool(assignment) and state.leader != assignment[0]
    return state.leader == -1 or state.leader not in live


def partitions_to_rebalance(assignments: Mapping[TopicPartition, tuple[int, ...]],
                            states: Mapping[TopicPartition, PartitionState], live: set[int], *,
                            imbalance_percentage: int) -> list[TopicPartition]:
    """The partitions to move back to their preferred replica: for each broker, the share of the
    partitions it prefers that are led elsewhere is its imbalance; above `imbalance_percentage`
    (leader.imbalance.per.broker.percentage), every such partition whose preferred replica is
    alive and in the ISR. Partitions without a state are not counted, as in Kafka."""
    by_preferred: dict[int, list[TopicPartition]] = {}
    for tp, assignment in assignments.items():
        if assignment and tp in states:
            by_preferred.setdefault(assignment[0], []).append(tp)
    moves = []
    for preferred, tps in sorted(by_preferred.items()):
        elsewhere = [tp for tp in tps if states[tp].leader != preferred]
        if len(elsewhere) / len(tps) <= imbalance_percentage / 100:
            continue
        moves += [tp for tp in elsewhere
                  if preferred_replica_leader(assignments[tp], states[tp].isr, live) is not None]
    return sorted(moves)
