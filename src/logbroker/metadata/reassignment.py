"""Partition reassignment as Kafka's ZooKeeper-era controller computes it (KIP-455), pure functions.

A reassignment of a partition from its original replicas (ORS) to target replicas (TRS) runs in
two steps (KafkaController.onPartitionReassignment):

- A: the assignment becomes RS = TRS + ORS (target first, without duplicates), recorded with
  adding = RS - ORS and removing = RS - TRS, and the leader epoch is bumped so every replica
  acts on it: the new replicas create their log and follow.
- B, once every target replica is in the ISR: leadership moves to a live in-sync target replica if
  the leader is not one, the ISR drops the removed replicas, the assignment becomes TRS, and the
  removed replicas stop and delete their copy.

Invariant while a reassignment runs: ORS = RS - adding and TRS = RS - removing, so the znode alone
says how to finish or cancel it (cancelling reassigns to ORS). No I/O here: the controller in
server/partition_reassignment.py reads and writes ZooKeeper.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from logbroker.errors import InvalidReplicaAssignmentError
from logbroker.metadata.model import PartitionState


@dataclass(frozen=True, slots=True)
class ReplicaAssignment:
    """One partition's replicas (RS) and, during a reassignment, those being added and removed."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def is_being_reassigned(self) -> bool:
        return bool(self.adding or self.removing)

    @property
    def origin_replicas(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.adding)

    @property
    def target_replicas(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing)

    def reassign_to(self, target: tuple[int, ...]) -> ReplicaAssignment:
        """Step A toward `target` from the original replicas (Kafka's ReplicaAssignment.reassignTo;
        a new target replaces an ongoing reassignment's)."""
        origin = self.origin_replicas
        replicas = tuple(dict.fromkeys(target + origin))
        return ReplicaAssignment(replicas, tuple(r for r in replicas if r not in origin),
                                 tuple(r for r in replicas if r not in target))


def validate_target(target: tuple[int, ...], brokers: Iterable[int]) -> None:
    """Raise InvalidReplicaAssignmentError unless `target` is a non-empty list of distinct
    registered brokers (KafkaController.validateReplicas)."""
    live = set(brokers)
    if not target:
        raise InvalidReplicaAssignmentError("Empty replica list specified in partition reassignment.")
    if len(set(target)) != len(target):
        raise InvalidReplicaAssignmentError(
            f"Duplicate replica ids in partition reassignment replica list: {list(target)}")
    if any(r < 0 for r in target):
        raise InvalidReplicaAssignmentError(f"Invalid broker id in replica list: {list(target)}")
    if not set(target) <= live:
        raise InvalidReplicaAssignmentError(
            f"Replica assignment has brokers that are not alive. Replica list: {list(target)}, "
            f"live broker list: {sorted(live)}")


def completed_state(assignment: ReplicaAssignment, state: PartitionState,
                    live: set[int]) -> PartitionState | None:
    """Step B's partition state — leader kept if it is a live target replica, else the first live
    in-sync target replica; ISR without the removed replicas; epoch bumped — or None while some
    target replica is not in the ISR yet (or no target replica can lead)."""
    target = assignment.target_replicas
    if not set(target) <= set(state.isr):
        return None
    leader = state.leader if state.leader in target and state.leader in live else next(
        (r for r in target if r in live and r in state.isr), None)
    if leader is None:
        return None
    return PartitionState(leader, state.leader_epoch + 1,
                          tuple(r for r in state.isr if r in target), state.controller_epoch)
