"""Server-side partition assignors (KIP-848): the coordinator, not a member, computes who gets what.

Kafka's ConsumerGroupPartitionAssignor interface with its two built-in assignors, selected by
`group.consumer.assignors` (the first is the default; a member may ask for another by name):

- `uniform` (Kafka's UniformAssignor): every member gets the same number of partitions, ±1, over
  all the topics it subscribes to; partitions stay where they were as far as that balance allows,
  so a member joining or leaving moves as few partitions as possible.
- `range` (Kafka's RangeAssignor): per topic, the members subscribed to it in member-id order get
  consecutive ranges, the first ones one partition more; topics with the same partition count
  are co-partitioned (partition p of each goes to the same member).

An assignor is a pure function of the group's members (their subscribed topic ids and their
previous target assignment) and the partition count of each topic; it keeps no state. Share
groups can bring their own assignor behind the same interface.
"""

from __future__ import annotations

import heapq
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

Assignment = dict[uuid.UUID, frozenset[int]]  # topic id → partitions; empty sets are left out


@dataclass(frozen=True, slots=True)
class MemberSpec:
    """What an assignor knows of a member: the topics it subscribes to (by id, existing ones
    only) and its previous target assignment."""

    member_id: str
    topic_ids: frozenset[uuid.UUID]
    current: Mapping[uuid.UUID, frozenset[int]] = field(default_factory=dict)
    rack_id: str | None = None


class PartitionAssignor(Protocol):
    name: str

    def assign(self, members: list[MemberSpec], partitions: Mapping[uuid.UUID, int]) -> dict[str, Assignment]:
        """The target assignment of every member of `members` (all of them keys of the result),
        given the partition count of each subscribed topic. Every partition of a topic that a
        member subscribes to is assigned to exactly one member."""


def _freeze(assigned: dict[uuid.UUID, set[int]]) -> Assignment:
    return {topic_id: frozenset(ps) for topic_id, ps in assigned.items() if ps}


class UniformAssignor:
    """Balanced and sticky. Invariant of the result: every partition whose topic has a
    subscriber goes to one of its subscribers; when all members subscribe to the same topics,
    the counts differ by at most one.

    Why two passes: first every member keeps what it had and may still have, up to its quota
    (the members that had more than the floor keep one extra while the remainder lasts, in order
    of how much they had, so the fewest partitions move); then each free partition goes to the
    eligible member with the fewest partitions. With
    different subscriptions the quota is a soft bound: a partition only some members subscribe
    to goes to the least loaded of those."""

    name = "uniform"

    def assign(self, members: list[MemberSpec], partitions: Mapping[uuid.UUID, int]) -> dict[str, Assignment]:
        subscribers: dict[uuid.UUID, list[str]] = {}
        for m in sorted(members, key=lambda m: m.member_id):
            for topic_id in m.topic_ids:
                if partitions.get(topic_id, 0) > 0:
                    subscribers.setdefault(topic_id, []).append(m.member_id)
        total = sum(partitions[t] for t in subscribers)
        active = [m for m in members if any(t in subscribers for t in m.topic_ids)]
        assigned: dict[str, dict[uuid.UUID, set[int]]] = {m.member_id: {} for m in members}
        counts = dict.fromkeys(assigned, 0)
        if not active:
            return {member_id: {} for member_id in assigned}
        floor, extra = divmod(total, len(active))
        taken: set[tuple[uuid.UUID, int]] = set()

        # 1. Stickiness: keep what is still valid, the biggest previous owners first.
        def previous(m: MemberSpec) -> list[tuple[uuid.UUID, int]]:
            return sorted((t, p) for t, ps in m.current.items() if t in m.topic_ids and t in subscribers
                          for p in ps if p < partitions[t])
        for m in sorted(active, key=lambda m: (-len(previous(m)), m.member_id)):
            keep = previous(m)
            quota = floor
            if len(keep) > floor and extra > 0:
                quota, extra = floor + 1, extra - 1
            for t, p in keep[:quota]:
                assigned[m.member_id].setdefault(t, set()).add(p)
                taken.add((t, p))
            counts[m.member_id] = min(len(keep), quota)

        # 2. Each free partition to the least loaded eligible member.
        for topic_id in sorted(subscribers):
            eligible = subscribers[topic_id]
            heap = [(counts[mid], mid) for mid in eligible]
            heapq.heapify(heap)
            for p in range(partitions[topic_id]):
                if (topic_id, p) in taken:
                    continue
                _, mid = heapq.heappop(heap)
                assigned[mid].setdefault(topic_id, set()).add(p)
                counts[mid] += 1
                heapq.heappush(heap, (counts[mid], mid))
        return {mid: _freeze(a) for mid, a in assigned.items()}


class RangeAssignor:
    name = "range"

    def assign(self, members: list[MemberSpec], partitions: Mapping[uuid.UUID, int]) -> dict[str, Assignment]:
        assigned: dict[str, dict[uuid.UUID, set[int]]] = {m.member_id: {} for m in members}
        ordered = sorted(members, key=lambda m: m.member_id)
        for topic_id, count in partitions.items():
            subscribed = [m.member_id for m in ordered if topic_id in m.topic_ids]
            if not subscribed or count <= 0:
                continue
            each, extra = divmod(count, len(subscribed))
            start = 0
            for i, member_id in enumerate(subscribed):
                n = each + (1 if i < extra else 0)
                if n:
                    assigned[member_id][topic_id] = set(range(start, start + n))
                start += n
        return {mid: _freeze(a) for mid, a in assigned.items()}


ASSIGNORS: dict[str, PartitionAssignor] = {a.name: a for a in (UniformAssignor(), RangeAssignor())}


def assignors_from_config(names: list[str]) -> dict[str, PartitionAssignor]:
    """group.consumer.assignors: names ("uniform", "range") or Kafka's class names, first the
    default. Unknown ones raise ValueError."""
    chosen = {}
    for name in names:
        short = name.rsplit(".", 1)[-1].removesuffix("Assignor").lower()
        if short not in ASSIGNORS:
            raise ValueError(f"unknown assignor {name!r}; known: {', '.join(ASSIGNORS)}")
        chosen[short] = ASSIGNORS[short]
    return chosen
