"""A classic consumer group: its members, its state machine, and its committed offsets.

Kafka's GroupMetadata and MemberMetadata. The states and their transitions:

    Empty ──join──▶ PreparingRebalance ──all joined / timeout──▶ CompletingRebalance
      ▲                   ▲      │                                   │ leader's SyncGroup
      │                   │      └──no member left──▶ Empty          ▼
      │                   └────── join / leave / expiry ─────────── Stable
    Dead ◀── DeleteGroups (from Empty) or the group's partition leaves this broker

Invariants: `leader_id` is a member's id or None; a member is in `members` or in
`pending_members` (a v4+ joiner given its id by MEMBER_ID_REQUIRED), never both;
`static_members` maps each group.instance.id to the member id holding it; the generation only
grows. Plain data: no I/O, no timers (the coordinator owns those), runs on the event loop.
"""

from __future__ import annotations

import asyncio
import enum
from collections import Counter
from dataclasses import dataclass, field

from logbroker.coordinator.offsets_schema import OffsetAndMetadata
from logbroker.types import TopicPartition


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS = {
    GroupState.EMPTY: {GroupState.PREPARING_REBALANCE},
    GroupState.PREPARING_REBALANCE: {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY},
    GroupState.COMPLETING_REBALANCE: {GroupState.PREPARING_REBALANCE},
    GroupState.STABLE: {GroupState.COMPLETING_REBALANCE},
    GroupState.DEAD: set(GroupState),
}


@dataclass(slots=True, eq=False)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    # The pending JoinGroup / SyncGroup of this member: resolved with the response dict.
    join_future: asyncio.Future | None = None
    sync_future: asyncio.Future | None = None
    heartbeat_timer: asyncio.TimerHandle | None = None
    is_new: bool = False

    @property
    def is_awaiting_join(self) -> bool:
        return self.join_future is not None and not self.join_future.done()

    @property
    def is_awaiting_sync(self) -> bool:
        return self.sync_future is not None and not self.sync_future.done()

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    def metadata(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise ValueError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        """The first of this member's protocols (in its order of preference) in `candidates`."""
        return next(name for name, _ in self.protocols if name in candidates)


@dataclass(slots=True, eq=False)
class GroupMetadata:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    current_state_timestamp_ms: int = -1
    members: dict[str, MemberMetadata] = field(default_factory=dict)
    pending_members: set[str] = field(default_factory=set)
    static_members: dict[str, str] = field(default_factory=dict)
    offsets: dict[TopicPartition, OffsetAndMetadata] = field(default_factory=dict)
    # Offsets committed inside a transaction (TxnOffsetCommit), by producer id: in the log, but
    # visible to OffsetFetch only once the transaction's COMMIT marker lands (dropped on ABORT).
    pending_txn_offsets: dict[int, dict[TopicPartition, OffsetAndMetadata]] = field(default_factory=dict)
    new_member_added: bool = False
    # The delayed join of the current rebalance (a TimerHandle) and the initial delay's budget.
    join_timer: asyncio.TimerHandle | None = None
    initial_join_delay: bool = False

    # -- state --------------------------------------------------------------------------------
    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise AssertionError(f"group {self.group_id}: illegal transition {self.state.value} → {state.value}")
        self.state = state
        self.current_state_timestamp_ms = now_ms

    @property
    def is_empty(self) -> bool:
        return not self.members

    # -- members ------------------------------------------------------------------------------
    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def add(self, member: MemberMetadata) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> MemberMetadata | None:
        member = self.members.pop(member_id, None)
        self.pending_members.discard(member_id)
        if member is None:
            return None
        if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def static_member_id(self, group_instance_id: str | None) -> str | None:
        return None if group_instance_id is None else self.static_members.get(group_instance_id)

    def replace_static_member(self, group_instance_id: str, old_member_id: str, new_member_id: str) -> MemberMetadata:
        member = self.members.pop(old_member_id)
        member.member_id = new_member_id
        self.members[new_member_id] = member
        self.static_members[group_instance_id] = new_member_id
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        return member

    def has_all_members_joined(self) -> bool:
        return (all(m.is_awaiting_join for m in self.members.values())
                and not self.pending_members)

    def not_yet_rejoined(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # -- protocols ----------------------------------------------------------------------------
    def candidate_protocols(self) -> set[str]:
        counts = Counter(name for m in self.members.values() for name, _ in m.protocols)
        return {name for name, n in counts.items() if n == len(self.members)}

    def supports_protocols(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        """Kafka's supportsProtocols: an empty group takes any non-empty protocol list; otherwise
        the type must match and one protocol must be supported by every current member."""
        if self.is_(GroupState.EMPTY) or not self.members:
            return bool(protocol_type) and bool(protocols)
        counts = Counter(name for m in self.members.values() for name, _ in m.protocols)
        return (self.protocol_type == protocol_type
                and any(counts[name] == len(self.members) for name, _ in protocols))

    def select_protocol(self) -> str:
        """The protocol every member supports that gets the most first-choice votes."""
        candidates = self.candidate_protocols()
        votes = Counter(m.vote(candidates) for m in self.members.values())
        return max(votes.items(), key=lambda kv: kv[1])[0]

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to, for the "consumer" protocol; None when unknown."""
        from logbroker.coordinator.offsets_schema import subscribed_topics

        if self.protocol_type != "consumer" or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            try:
                topics |= subscribed_topics(m.metadata(self.protocol_name))
            except ValueError:
                return None
        return topics
