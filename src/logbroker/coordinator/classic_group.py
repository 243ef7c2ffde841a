"""A classic group (JoinGroup / SyncGroup): its members, its state machine, and its committed offsets.

Kafka's ClassicGroup and ClassicGroupMember (GroupMetadata and MemberMetadata before Kafka 4).
The states and their transitions:

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
from collections.abc import Callable
from dataclasses import dataclass, field

from logbroker.coordinator.group import Group, GroupType
from logbroker.coordinator.offsets_schema import (
    GROUP_METADATA_KEY_VERSION,
    GroupMetadataKey,
    GroupMetadataRecord,
    OffsetAndMetadata,
    decode_group_metadata_value,
    decode_key,
    encode_group_metadata_key,
    subscribed_topics,
)
from logbroker.errors import (
    FencedInstanceIdError,
    IllegalGenerationError,
    NonEmptyGroupError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)


class ClassicGroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS = {
    ClassicGroupState.EMPTY: {ClassicGroupState.PREPARING_REBALANCE},
    ClassicGroupState.PREPARING_REBALANCE: {ClassicGroupState.STABLE, ClassicGroupState.COMPLETING_REBALANCE, ClassicGroupState.EMPTY},
    ClassicGroupState.COMPLETING_REBALANCE: {ClassicGroupState.PREPARING_REBALANCE},
    ClassicGroupState.STABLE: {ClassicGroupState.COMPLETING_REBALANCE},
    ClassicGroupState.DEAD: set(ClassicGroupState),
}


@dataclass(slots=True, eq=False)
class ClassicGroupMember:
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
class ClassicGroup(Group):
    state: ClassicGroupState = ClassicGroupState.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    current_state_timestamp_ms: int = -1
    members: dict[str, ClassicGroupMember] = field(default_factory=dict)
    pending_members: set[str] = field(default_factory=set)
    static_members: dict[str, str] = field(default_factory=dict)
    new_member_added: bool = False
    # The delayed join of the current rebalance (a TimerHandle) and the initial delay's budget.
    join_timer: asyncio.TimerHandle | None = None
    initial_join_delay: bool = False

    GROUP_TYPE = GroupType.CLASSIC

    # -- state --------------------------------------------------------------------------------
    @property
    def state_name(self) -> str:
        return self.state.value

    @property
    def is_dead(self) -> bool:
        return self.state is ClassicGroupState.DEAD

    def is_(self, state: ClassicGroupState) -> bool:
        return self.state is state

    def transition_to(self, state: ClassicGroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise AssertionError(f"group {self.group_id}: illegal transition {self.state.value} → {state.value}")
        self.state = state
        self.current_state_timestamp_ms = now_ms

    @property
    def is_empty(self) -> bool:
        return self.state is ClassicGroupState.EMPTY

    # -- members ------------------------------------------------------------------------------
    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def add(self, member: ClassicGroupMember) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> ClassicGroupMember | None:
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

    def replace_static_member(self, group_instance_id: str, old_member_id: str, new_member_id: str) -> ClassicGroupMember:
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

    def not_yet_rejoined(self) -> list[ClassicGroupMember]:
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
        if self.is_(ClassicGroupState.EMPTY) or not self.members:
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
        """Topics the members subscribe to: none when Empty; for the "consumer" protocol those
        of the members' subscriptions; None when unknown."""
        if self.is_(ClassicGroupState.EMPTY):
            return set()
        if self.protocol_type != "consumer" or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            try:
                topics |= subscribed_topics(m.metadata(self.protocol_name))
            except ValueError:
                return None
        return topics

    # -- offsets (Kafka's ClassicGroup.validateOffsetCommit and friends) -----------------------
    def validate_offset_commit(self, *, member_id: str, group_instance_id: str | None,
                               generation_id_or_member_epoch: int, is_transactional: bool,
                               api_version: int) -> None:
        mapped = self.static_member_id(group_instance_id)
        if mapped is not None and mapped != member_id:
            raise FencedInstanceIdError(f"instance {group_instance_id} is now another member")
        generation_id = generation_id_or_member_epoch
        if is_transactional:
            if member_id and member_id not in self.members:
                raise UnknownMemberIdError(f"member {member_id} is not in group {self.group_id}")
            if generation_id >= 0 and generation_id != self.generation_id:
                raise IllegalGenerationError(
                    f"generation {generation_id} is not group {self.group_id}'s current {self.generation_id}")
            return
        if generation_id < 0 and self.is_(ClassicGroupState.EMPTY):
            return  # a commit from outside group management (a standalone consumer, an admin tool)
        if self.is_(ClassicGroupState.COMPLETING_REBALANCE):
            raise RebalanceInProgressError(f"group {self.group_id} is completing a rebalance")
        if member_id not in self.members:
            raise UnknownMemberIdError(f"member {member_id} is not in group {self.group_id}")
        if generation_id != self.generation_id:
            raise IllegalGenerationError(
                f"generation {generation_id} is not group {self.group_id}'s current {self.generation_id}")

    def validate_offset_delete(self) -> None:
        if self.protocol_type != "consumer":
            raise NonEmptyGroupError(f"group {self.group_id} is not empty")

    def validate_delete_group(self) -> None:
        if not self.is_(ClassicGroupState.EMPTY):
            raise NonEmptyGroupError(f"group {self.group_id} is not empty")

    def tombstones(self) -> list[tuple[bytes, None]]:
        return [(encode_group_metadata_key(self.group_id), None)]

    def offset_expiration_base(self) -> Callable[[OffsetAndMetadata], int] | None:
        """An Empty group's offsets count from when it became Empty (from their commit if it
        never had members); a Stable "consumer" group's from their commit; others' never."""
        if self.is_(ClassicGroupState.EMPTY):
            became_empty_ms = self.current_state_timestamp_ms
            if became_empty_ms >= 0 and self.protocol_type:
                return lambda committed: became_empty_ms
            return lambda committed: committed.commit_timestamp_ms
        if self.protocol_type == "consumer" and self.is_(ClassicGroupState.STABLE):
            return lambda committed: committed.commit_timestamp_ms
        return None


class ClassicGroupRecords:
    """The classic groups of a partition being loaded: the last GroupMetadataValue of each
    (group_loader.GroupRecords)."""

    KEY_VERSIONS = frozenset({GROUP_METADATA_KEY_VERSION})

    def __init__(self) -> None:
        self._records: dict[str, GroupMetadataRecord | None] = {}

    def replay(self, key: bytes, value: bytes | None) -> None:
        decoded = decode_key(key)
        assert isinstance(decoded, GroupMetadataKey)
        self._records[decoded.group] = None if value is None else decode_group_metadata_value(value)

    def groups(self, now_ms: int) -> list[ClassicGroup]:
        return [restore_group(group_id, record) for group_id, record in self._records.items() if record is not None]


def restore_group(group_id: str, record: GroupMetadataRecord) -> ClassicGroup:
    """A group as its latest metadata record left it: Stable with its members, or Empty."""
    group = ClassicGroup(group_id, generation_id=record.generation, protocol_type=record.protocol_type or None,
                         protocol_name=record.protocol, current_state_timestamp_ms=record.current_state_timestamp_ms)
    for m in record.members:
        group.add(ClassicGroupMember(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                     m.rebalance_timeout_ms, m.session_timeout_ms, record.protocol_type,
                                     [(record.protocol or "", m.subscription)], assignment=m.assignment))
    group.leader_id = record.leader if record.leader in group.members else next(iter(group.members), None)
    group.state = ClassicGroupState.STABLE if group.members else ClassicGroupState.EMPTY
    return group
