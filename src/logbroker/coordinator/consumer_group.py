"""A consumer group on the KIP-848 protocol: its members, its epochs, its target assignment.

Kafka's ConsumerGroup and ConsumerGroupMember (modern/consumer/). The group has three epochs:

- the group epoch, bumped whenever its members or their subscriptions (or the partitions of the
  subscribed topics) change;
- the assignment epoch: the group epoch the target assignment was computed at — smaller than the
  group epoch while a new target is owed (state Assigning);
- each member's epoch: the assignment epoch the member has reconciled to. A member reaches the
  target only by revoking first: partitions it must give up are *pending revocation* until its
  heartbeat no longer reports them, and it gets a partition another member still holds only once
  that member has let it go (`owners`).

State is `Empty` without members, `Assigning` while the group epoch is ahead of the assignment
epoch, `Reconciling` while a member has not reached the assignment epoch, else `Stable`.

Every change is a record in `__consumer_offsets` (Kafka 4's record types, key versions 3-8), and
the in-memory group is only ever changed by replaying those records (`replay`): the same code
rebuilds a group at load and applies a heartbeat's records once they are in the log, so memory
never holds what the log does not. Plain data and pure functions, event loop only (loading runs
in a worker thread on groups no other thread sees).
"""

from __future__ import annotations

import asyncio
import enum
import functools
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from logbroker.coordinator.assignors import Assignment
from logbroker.coordinator.group import Group, GroupType
from logbroker.coordinator.modern_group import ModernGroup, TopicMetadata
from logbroker.coordinator.record_schema import CoordinatorRecord, ReplayedGroups, record_type
from logbroker.errors import StaleMemberEpochError, UnsupportedVersionError

GROUP_METADATA = record_type("ConsumerGroupMetadata")  # key 3: the group epoch
PARTITION_METADATA = record_type("ConsumerGroupPartitionMetadata")  # key 4: the subscribed topics
MEMBER_METADATA = record_type("ConsumerGroupMemberMetadata")  # key 5: a member's subscription
TARGET_METADATA = record_type("ConsumerGroupTargetAssignmentMetadata")  # key 6: the assignment epoch
TARGET_MEMBER = record_type("ConsumerGroupTargetAssignmentMember")  # key 7: a member's target
CURRENT_ASSIGNMENT = record_type("ConsumerGroupCurrentMemberAssignment")  # key 8: a member's epoch
# Kafka 4.0's resolved regular expressions (ConsumerGroupRegularExpression): we resolve a
# member's regex from the metadata on every heartbeat instead, and skip Kafka's records of it.
REGULAR_EXPRESSION_KEY_VERSION = 16

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class MemberState(enum.IntEnum):
    """Kafka's MemberState, stored as its int8 value."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class MemberSubscription:
    """What a member told the coordinator about itself (the ConsumerGroupMemberMetadata record)."""

    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None

    def subscribes_to(self, topic: str) -> bool:
        if topic in self.subscribed_topic_names:
            return True
        return self.subscribed_topic_regex is not None and compile_regex(self.subscribed_topic_regex) \
            .fullmatch(topic) is not None


@dataclass(frozen=True, slots=True)
class MemberAssignment:
    """Where a member is in its reconciliation (the ConsumerGroupCurrentMemberAssignment record).
    `assigned` excludes `pending_revocation`; both leave out empty partition sets."""

    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)

    def partitions(self) -> Iterator[tuple[uuid.UUID, int]]:
        """Every partition the member holds: assigned or not yet revoked."""
        for assignment in (self.assigned, self.pending_revocation):
            for topic_id, ps in assignment.items():
                for p in ps:
                    yield topic_id, p


@dataclass(slots=True, eq=False)
class ConsumerGroupMember:
    member_id: str
    subscription: MemberSubscription = field(default_factory=MemberSubscription)
    assignment: MemberAssignment = field(default_factory=MemberAssignment)
    # Timers (not stored): the session, and the deadline to revoke partitions pending revocation.
    session_timer: asyncio.TimerHandle | None = None
    rebalance_timer: asyncio.TimerHandle | None = None
    rebalance_timer_epoch: int | None = None  # the member epoch the revocation deadline is for

    @property
    def instance_id(self) -> str | None:
        return self.subscription.instance_id

    @property
    def member_epoch(self) -> int:
        return self.assignment.member_epoch

    def is_reconciled_to(self, assignment_epoch: int) -> bool:
        return self.assignment.state is MemberState.STABLE and self.member_epoch == assignment_epoch


@dataclass(slots=True, eq=False)
class ConsumerGroup(ModernGroup):
    """A consumer group (its group epoch, members, dead flag and lock are ModernGroup's, the
    members ConsumerGroupMembers). See the module docstring."""

    assignment_epoch: int = 0
    target_assignment: dict[str, Assignment] = field(default_factory=dict)
    subscription_metadata: dict[str, TopicMetadata] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id → member id
    # Who holds each partition (assigned or pending revocation), derived from the members.
    owners: dict[tuple[uuid.UUID, int], str] = field(default_factory=dict)
    # The empty classic group this one takes the place of, until this one's first records are in
    # the log (with the classic group's tombstone).
    takes_over: Group | None = None

    GROUP_TYPE = GroupType.CONSUMER

    # -- what ListGroups and DescribeGroups show ----------------------------------------------
    @property
    def state(self) -> ConsumerGroupState:
        if self.dead:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    @property
    def state_name(self) -> str:
        return self.state.value

    @property
    def protocol_type(self) -> str:
        return "consumer"

    def static_member(self, instance_id: str | None) -> ConsumerGroupMember | None:
        member_id = self.static_members.get(instance_id) if instance_id is not None else None
        return self.members.get(member_id) if member_id is not None else None

    def owner(self, topic_id: uuid.UUID, partition: int) -> str | None:
        return self.owners.get((topic_id, partition))

    def preferred_assignor(self) -> str | None:
        return preferred_assignor(m.subscription for m in self.members.values())

    # -- offsets (Kafka's ConsumerGroup.validateOffsetCommit and friends) ---------------------
    def validate_offset_commit(self, *, member_id: str, group_instance_id: str | None,
                               generation_id_or_member_epoch: int, is_transactional: bool,
                               api_version: int) -> None:
        if generation_id_or_member_epoch < 0 and not self.members:
            return  # an admin tool or a consumer outside group management, into an empty group
        member = self.member(member_id)
        if not is_transactional and api_version < 9:
            raise UnsupportedVersionError("OffsetCommit version 9 or above must be used by members using "
                                          "the consumer group protocol")
        self._validate_member_epoch(member, generation_id_or_member_epoch)

    def validate_offset_fetch(self, *, member_id: str | None, member_epoch: int) -> None:
        if member_id is None and member_epoch < 0:
            return
        self._validate_member_epoch(self.member(member_id or ""), member_epoch)

    @staticmethod
    def _validate_member_epoch(member: ConsumerGroupMember, epoch: int) -> None:
        if epoch != member.member_epoch:
            raise StaleMemberEpochError(f"The member epoch {epoch} is stale; the current one is "
                                        f"{member.member_epoch}.")

    def subscribed_topics(self) -> set[str] | None:
        topics = set(self.subscription_metadata)
        for m in self.members.values():
            topics.update(m.subscription.subscribed_topic_names)
        return topics

    # -- records --------------------------------------------------------------------------------
    def replay(self, record: CoordinatorRecord) -> None:
        """Apply one of the group's records (Kafka's GroupMetadataManager.replay)."""
        rtype, key, value = record.type, record.key, record.value
        if rtype is GROUP_METADATA:
            if value is None:
                self.dead = True
            else:
                self.group_epoch = value.epoch
        elif rtype is PARTITION_METADATA:
            self.subscription_metadata = {} if value is None else {
                t.topic_name: TopicMetadata(t.topic_id, t.topic_name, t.num_partitions) for t in value.topics}
        elif rtype is MEMBER_METADATA:
            self._replay_member(key.member_id, value)
        elif rtype is TARGET_METADATA:
            self.assignment_epoch = 0 if value is None else value.assignment_epoch
        elif rtype is TARGET_MEMBER:
            if value is None:
                self.target_assignment.pop(key.member_id, None)
            else:
                self.target_assignment[key.member_id] = _assignment(value.topic_partitions)
        elif rtype is CURRENT_ASSIGNMENT:
            member = self.members.get(key.member_id)
            if member is None:
                if value is None:
                    return
                member = self.members[key.member_id] = ConsumerGroupMember(key.member_id)
            self._release(member)
            if value is None:
                member.assignment = MemberAssignment()
                return
            state = MemberState(value.state) if value.state in MemberState._value2member_map_ else MemberState.UNKNOWN
            member.assignment = MemberAssignment(value.member_epoch, value.previous_member_epoch, state,
                                                 _assignment(value.assigned_partitions),
                                                 _assignment(value.partitions_pending_revocation))
            for tp in member.assignment.partitions():
                self.owners[tp] = member.member_id
        else:
            raise ValueError(f"not a consumer group record: {rtype.key_schema.name}")

    def _replay_member(self, member_id: str, value) -> None:
        member = self.members.get(member_id)
        if value is None:
            if member is not None:
                self._release(member)
                del self.members[member_id]
                if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
                    del self.static_members[member.instance_id]
            return
        if member is None:
            member = self.members[member_id] = ConsumerGroupMember(member_id)
        if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]
        member.subscription = MemberSubscription(
            value.instance_id, value.rack_id, value.client_id, value.client_host,
            tuple(value.subscribed_topic_names), value.subscribed_topic_regex or None,
            value.rebalance_timeout_ms, value.server_assignor)
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member_id

    def _release(self, member: ConsumerGroupMember) -> None:
        for tp in member.assignment.partitions():
            if self.owners.get(tp) == member.member_id:
                del self.owners[tp]

    def tombstones(self) -> list[tuple[bytes, None]]:
        return [r.encode() for r in self.tombstone_records()]

    def tombstone_records(self) -> list[CoordinatorRecord]:
        """The records that delete the group, in Kafka's order (createGroupTombstoneRecords)."""
        records = []
        for member_id in self.members:
            records.append(current_assignment_tombstone(self.group_id, member_id))
        for member_id in self.target_assignment:
            records.append(target_member_record(self.group_id, member_id, None))
        records.append(CoordinatorRecord(TARGET_METADATA, TARGET_METADATA.Key(group_id=self.group_id), None))
        for member_id in self.members:
            records.append(member_record(self.group_id, member_id, None))
        records.append(CoordinatorRecord(PARTITION_METADATA, PARTITION_METADATA.Key(group_id=self.group_id), None))
        records.append(CoordinatorRecord(GROUP_METADATA, GROUP_METADATA.Key(group_id=self.group_id), None))
        return records


def preferred_assignor(subscriptions: Iterable[MemberSubscription]) -> str | None:
    """The server assignor most members ask for, None if none asks (Kafka's
    computePreferredServerAssignor; ties go to the first name in order)."""
    votes: dict[str, int] = {}
    for s in subscriptions:
        if s.server_assignor:
            votes[s.server_assignor] = votes.get(s.server_assignor, 0) + 1
    return max(sorted(votes), key=votes.__getitem__) if votes else None


def _assignment(topic_partitions: Iterable) -> Assignment:
    return {tp.topic_id: frozenset(tp.partitions) for tp in topic_partitions if tp.partitions}


def _topic_partitions(cls, assignment: Mapping[uuid.UUID, frozenset[int]]) -> tuple:
    return tuple(cls(topic_id=topic_id, partitions=tuple(sorted(ps)))
                 for topic_id, ps in sorted(assignment.items()) if ps)


# -- record builders (Kafka's GroupCoordinatorRecordHelpers) -----------------------------------
def group_epoch_record(group_id: str, epoch: int) -> CoordinatorRecord:
    return CoordinatorRecord(GROUP_METADATA, GROUP_METADATA.Key(group_id=group_id),
                             GROUP_METADATA.Value(epoch=epoch))


def partition_metadata_record(group_id: str, metadata: Mapping[str, TopicMetadata]) -> CoordinatorRecord:
    value = PARTITION_METADATA.Value(topics=tuple(
        PARTITION_METADATA.Value.TopicMetadata(topic_id=t.topic_id, topic_name=t.name,
                                               num_partitions=t.num_partitions)
        for _, t in sorted(metadata.items())))
    return CoordinatorRecord(PARTITION_METADATA, PARTITION_METADATA.Key(group_id=group_id), value)


def member_record(group_id: str, member_id: str, subscription: MemberSubscription | None) -> CoordinatorRecord:
    value = None
    if subscription is not None:
        s = subscription
        value = MEMBER_METADATA.Value(
            instance_id=s.instance_id, rack_id=s.rack_id, client_id=s.client_id, client_host=s.client_host,
            subscribed_topic_names=s.subscribed_topic_names, subscribed_topic_regex=s.subscribed_topic_regex,
            rebalance_timeout_ms=s.rebalance_timeout_ms, server_assignor=s.server_assignor)
    return CoordinatorRecord(MEMBER_METADATA, MEMBER_METADATA.Key(group_id=group_id, member_id=member_id), value)


def target_metadata_record(group_id: str, assignment_epoch: int) -> CoordinatorRecord:
    return CoordinatorRecord(TARGET_METADATA, TARGET_METADATA.Key(group_id=group_id),
                             TARGET_METADATA.Value(assignment_epoch=assignment_epoch))


def target_member_record(group_id: str, member_id: str, target: Assignment | None) -> CoordinatorRecord:
    value = None if target is None else TARGET_MEMBER.Value(
        topic_partitions=_topic_partitions(TARGET_MEMBER.Value.TopicPartition, target))
    return CoordinatorRecord(TARGET_MEMBER, TARGET_MEMBER.Key(group_id=group_id, member_id=member_id), value)


def current_assignment_record(group_id: str, member_id: str, assignment: MemberAssignment) -> CoordinatorRecord:
    cls = CURRENT_ASSIGNMENT.Value.TopicPartitions
    value = CURRENT_ASSIGNMENT.Value(
        member_epoch=assignment.member_epoch, previous_member_epoch=assignment.previous_member_epoch,
        state=int(assignment.state), assigned_partitions=_topic_partitions(cls, assignment.assigned),
        partitions_pending_revocation=_topic_partitions(cls, assignment.pending_revocation))
    return CoordinatorRecord(CURRENT_ASSIGNMENT, CURRENT_ASSIGNMENT.Key(group_id=group_id, member_id=member_id),
                             value)


def current_assignment_tombstone(group_id: str, member_id: str) -> CoordinatorRecord:
    return CoordinatorRecord(CURRENT_ASSIGNMENT, CURRENT_ASSIGNMENT.Key(group_id=group_id, member_id=member_id),
                             None)


def member_tombstones(group_id: str, member_id: str) -> list[CoordinatorRecord]:
    """The records that remove a member, in Kafka's order (removeMember)."""
    return [current_assignment_tombstone(group_id, member_id), target_member_record(group_id, member_id, None),
            member_record(group_id, member_id, None)]


# -- regular expressions ----------------------------------------------------------------------
_REGEX_CACHE: dict[str, object] = {}


@functools.cache
def _re2():  # -> (the re2 module, its options)
    """RE2, loaded with the first regex subscription: its C++ library is ~8 ms of import that a
    group subscribing by topic names never needs."""
    import re2

    options = re2.Options()
    options.log_errors = False  # a client's bad pattern is its error, not a line on our stderr
    return re2, options


class RegexError(ValueError):
    """A subscription's regular expression that does not compile."""


def compile_regex(pattern: str):
    """A subscription's regular expression, compiled by RE2 as Kafka's RE2/J does: the same
    syntax, and matching in time linear in the topic name, so no pattern a client sends can stall
    the broker. Matched against whole topic names (`fullmatch`). Raises RegexError."""
    compiled = _REGEX_CACHE.get(pattern)
    if compiled is None:
        re2, options = _re2()
        try:
            compiled = re2.compile(pattern, options=options)
        except re2.error as exc:
            reason = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
            raise RegexError(reason) from None
        if len(_REGEX_CACHE) > 1000:
            _REGEX_CACHE.clear()
        _REGEX_CACHE[pattern] = compiled
    return compiled


# -- loading ------------------------------------------------------------------------------------
class ConsumerGroupRecords(ReplayedGroups):
    """The consumer groups of a partition being loaded (group_loader.GroupRecords): each record
    replayed into its group as the live path does; a group whose ConsumerGroupMetadata was
    deleted is dropped."""

    _TYPES = {t.key_version: t for t in (GROUP_METADATA, PARTITION_METADATA, MEMBER_METADATA, TARGET_METADATA,
                                         TARGET_MEMBER, CURRENT_ASSIGNMENT)}
    KEY_VERSIONS = frozenset(_TYPES) | {REGULAR_EXPRESSION_KEY_VERSION}

    # A resolved regular expression (key 16) is not kept: it is recomputed from the metadata.

    def _new_group(self, group_id: str) -> ConsumerGroup:
        return ConsumerGroup(group_id)

    def _apply(self, group: ConsumerGroup, record: CoordinatorRecord) -> None:
        group.replay(record)
