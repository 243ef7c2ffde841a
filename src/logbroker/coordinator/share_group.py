"""Share groups (KIP-932): the third group type, beside classic and consumer groups.

Kafka's ShareGroup and the share-group part of its GroupMetadataManager. A share group lives
where any group of its id lives (the leader of its `__consumer_offsets` partition, the group
coordinator shell, coordinator/group_coordinator.py) and shares the id space with the other
types: ShareGroupHeartbeat for a group of another type is GROUP_ID_NOT_FOUND, and a classic
JoinGroup for a share group INCONSISTENT_GROUP_PROTOCOL (classic_group_manager's take-over
refuses it), as Kafka.

Membership: a member joins with member epoch 0 and its own member id (ShareGroupHeartbeat v1:
the client makes the id), leaves with epoch -1, and heartbeats in between with the epoch it was
given; any other epoch is FENCED_MEMBER_EPOCH, an unknown member id UNKNOWN_MEMBER_ID. Every
change of membership or subscriptions bumps the group epoch, and so does every change of the
subscribed topics' metadata (modern_group.py: a topic created after the subscription, deleted,
created again under a new id, or given partitions), found at the next heartbeat; the members then
get the new assignment at their next heartbeats. Share groups need no revocation —
records, not partitions, are handed out — so the assignment is computed at once: as Kafka's
simple assignor does when members may share partitions, every member gets every partition of
the topics it subscribes to, and its member epoch is the group epoch.

Durable state, Kafka's records in `__consumer_offsets`: ShareGroupMetadata (key version 11: the
group epoch, and the hash of the subscribed topics' metadata it was bumped for) and
ShareGroupMemberMetadata (10: a member's client, host, rack and subscription), appended before
the heartbeat is answered; a restart (or a new coordinator) replays them, so the group and its
members come back with their epochs, and members that do not heartbeat again within
group.share.session.timeout.ms are removed. The in-memory group changes only after its
records are in the log.

Invariants: `group_epoch` only increases; a member's epoch is the group epoch once it has
heartbeated since the last bump. Event loop only (loading runs in a worker thread on groups no
other thread sees).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from logbroker.coordinator.group import GroupType
from logbroker.coordinator.modern_group import ModernGroup, ModernGroupManager, topics_hash
from logbroker.coordinator.record_schema import CoordinatorRecord, ReplayedGroups, record_type
from logbroker.errors import (
    FencedMemberEpochError,
    GroupIdNotFoundError,
    InvalidRequestError,
    KafkaError,
    UnknownMemberIdError,
)

log = logging.getLogger("kafka.coordinator.group.GroupMetadataManager")

GROUP_METADATA = record_type("ShareGroupMetadata")  # key 11: the group epoch
MEMBER_METADATA = record_type("ShareGroupMemberMetadata")  # key 10: a member and its subscription
# Kafka's other share-group records (partition metadata 9, target assignment 12/13, current
# assignment 14, state partition metadata 15): the assignment here follows from the
# subscriptions, so they are not written, and skipped when read.
OTHER_SHARE_KEY_VERSIONS = frozenset({9, 12, 13, 14, 15})

LEAVE_GROUP_MEMBER_EPOCH = -1


@dataclass(slots=True)
class ShareGroupMember:
    member_id: str
    member_epoch: int
    client_id: str
    client_host: str
    rack_id: str | None
    subscribed_topic_names: tuple[str, ...]
    timer: asyncio.TimerHandle | None = None


@dataclass(slots=True, eq=False)
class ShareGroup(ModernGroup):
    """A share group (its group epoch, members, dead flag and lock are ModernGroup's, the members
    ShareGroupMembers). See the module docstring."""

    GROUP_TYPE = GroupType.SHARE
    KIND = "Share group"

    # modern_group.topics_hash of the subscribed topics when the group epoch was last bumped.
    metadata_hash: int = 0

    @property
    def assignment_epoch(self) -> int:
        return self.group_epoch  # the assignment follows the subscriptions at once

    @property
    def state_name(self) -> str:
        """Kafka's ShareGroupState: Empty, Stable, Dead."""
        return "Dead" if self.dead else "Stable" if self.members else "Empty"

    @property
    def protocol_type(self) -> str:
        return "share"

    def validate_offset_commit(self, *, member_id: str, group_instance_id: str | None,
                               generation_id_or_member_epoch: int, is_transactional: bool,
                               api_version: int) -> None:
        raise GroupIdNotFoundError(f"Group {self.group_id} is a share group; it has no committed offsets.")

    def validate_offset_delete(self) -> None:
        raise GroupIdNotFoundError(f"Group {self.group_id} is a share group; use DeleteShareGroupOffsets.")

    def subscribed_topics(self) -> set[str] | None:
        return {t for m in self.members.values() for t in m.subscribed_topic_names}

    def offset_expiration_base(self):
        return None

    # -- records --------------------------------------------------------------------------------
    def apply(self, record: CoordinatorRecord) -> None:
        """Replay one of the group's records (at load, and after the live path appended it)."""
        if record.type is GROUP_METADATA:
            if record.value is None:
                self.dead = True
            else:
                self.group_epoch = record.value.epoch
                self.metadata_hash = record.value.metadata_hash
        elif record.type is MEMBER_METADATA:
            member_id = record.key.member_id
            if record.value is None:
                self.members.pop(member_id, None)
                return
            v = record.value
            member = self.members.get(member_id)
            if member is None:
                self.members[member_id] = ShareGroupMember(member_id, self.group_epoch, v.client_id, v.client_host,
                                                           v.rack_id, tuple(v.subscribed_topic_names))
            else:
                member.client_id, member.client_host, member.rack_id = v.client_id, v.client_host, v.rack_id
                member.subscribed_topic_names = tuple(v.subscribed_topic_names)

    def tombstones(self) -> list[tuple[bytes, None]]:
        records = [member_record(self.group_id, member_id, None) for member_id in self.members]
        records.append(CoordinatorRecord(GROUP_METADATA, GROUP_METADATA.Key(group_id=self.group_id), None))
        return [r.encode() for r in records]


def epoch_record(group_id: str, epoch: int, metadata_hash: int = 0) -> CoordinatorRecord:
    return CoordinatorRecord(GROUP_METADATA, GROUP_METADATA.Key(group_id=group_id),
                             GROUP_METADATA.Value(epoch=epoch, metadata_hash=metadata_hash))


def member_record(group_id: str, member_id: str, member: ShareGroupMember | None) -> CoordinatorRecord:
    key = MEMBER_METADATA.Key(group_id=group_id, member_id=member_id)
    if member is None:
        return CoordinatorRecord(MEMBER_METADATA, key, None)
    return CoordinatorRecord(MEMBER_METADATA, key, MEMBER_METADATA.Value(
        rack_id=member.rack_id, client_id=member.client_id, client_host=member.client_host,
        subscribed_topic_names=tuple(member.subscribed_topic_names)))


class ShareGroupRecords(ReplayedGroups):
    """The share groups of a partition being loaded (group_loader.GroupRecords)."""

    _TYPES = {t.key_version: t for t in (GROUP_METADATA, MEMBER_METADATA)}
    KEY_VERSIONS = frozenset(_TYPES) | OTHER_SHARE_KEY_VERSIONS

    def _new_group(self, group_id: str) -> ShareGroup:
        return ShareGroup(group_id)

    def _apply(self, group: ShareGroup, record: CoordinatorRecord) -> None:
        group.apply(record)


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: dict[str, list[int]] | None  # topic name → partitions; None: unchanged


class ShareGroupManager(ModernGroupManager):
    """ShareGroupHeartbeat and ShareGroupDescribe, and the group coordinator's GroupTypeManager
    for share groups (session timers)."""

    GROUP_CLASS = ShareGroup
    NOUN = "share"

    def __init__(self, coordinator) -> None:
        self.coordinator = coordinator
        self.config = coordinator.config
        # The coordinator's: they outlive this manager's creation on first use (group_coordinator.py).
        self.member_listeners: list[Callable[[str, str], None]] = coordinator.share_member_listeners

    def _partitions_of(self, topic: str) -> list[int] | None:
        info = self.coordinator.store.topic(topic)
        return sorted(info.assignment) if info is not None else None

    def share_group(self, group_id: str) -> ShareGroup:
        """The live share group `group_id` (GROUP_ID_NOT_FOUND for none, or another type)."""
        return self._live_group(group_id)

    async def ensure_group(self, group_id: str) -> ShareGroup:
        """The share group `group_id`, created empty (its ShareGroupMetadata record written) when
        no group has the id: AlterShareGroupOffsets may set offsets before the first member."""
        group = self.coordinator.groups.get(group_id)
        if isinstance(group, ShareGroup) and not group.dead:
            return group
        if group is not None and not group.is_dead:
            raise GroupIdNotFoundError(f"Group {group_id} is not a share group.")
        group = ShareGroup(group_id)
        record = epoch_record(group_id, 0)
        await self.coordinator.append(group_id, [record.encode()], for_offsets=False)
        group.apply(record)
        self.coordinator.groups.setdefault(group_id, group)
        return self.coordinator.groups[group_id]

    # -- ShareGroupHeartbeat ------------------------------------------------------------------
    async def heartbeat(self, *, group_id: str, member_id: str, member_epoch: int, rack_id: str | None,
                        subscribed_topic_names: tuple[str, ...] | None, client_id: str, client_host: str
                        ) -> HeartbeatResult:
        self.coordinator.check_group(group_id)
        if not member_id:
            raise InvalidRequestError("MemberId can't be empty.")
        existing = self.coordinator.groups.get(group_id)
        if existing is not None and not existing.is_dead and not isinstance(existing, ShareGroup):
            raise GroupIdNotFoundError(f"Group {group_id} is not a share group.")
        if member_epoch == 0 and subscribed_topic_names is None:
            raise InvalidRequestError("SubscribedTopicNames must be set in the first heartbeat.")
        interval_ms = self.config.group_share_heartbeat_interval_ms
        group = existing if isinstance(existing, ShareGroup) and not existing.dead else None
        if group is None:
            if member_epoch != 0:
                raise UnknownMemberIdError(f"Member {member_id} is not in share group {group_id}")
            group = self.coordinator.groups[group_id] = ShareGroup(group_id)
        async with group.lock:
            if self.coordinator.groups.get(group_id) is not group:
                raise GroupIdNotFoundError(f"Share group {group_id} was removed meanwhile; retry")
            member = group.members.get(member_id)
            if member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
                if member is None:
                    raise UnknownMemberIdError(f"Member {member_id} is not in share group {group_id}")
                await self._remove(group, member, "the member left")
                return HeartbeatResult(member_id, LEAVE_GROUP_MEMBER_EPOCH, interval_ms, None)
            if member is None and member_epoch != 0:
                raise UnknownMemberIdError(f"Member {member_id} is not in share group {group_id}")
            if member is not None and member_epoch not in (0, member.member_epoch, group.group_epoch):
                raise FencedMemberEpochError(
                    f"Member {member_id} of share group {group_id} sent epoch {member_epoch}, its epoch is "
                    f"{member.member_epoch}")
            wanted = ShareGroupMember(
                member_id, group.group_epoch, client_id, client_host, rack_id,
                tuple(subscribed_topic_names) if subscribed_topic_names is not None
                else member.subscribed_topic_names)
            records = []
            if member is None or (wanted.subscribed_topic_names, wanted.rack_id) != (
                    member.subscribed_topic_names, member.rack_id):
                records.append(member_record(group_id, member_id, wanted))
            metadata_hash = self._metadata_hash(group, wanted)
            if records or metadata_hash != group.metadata_hash:
                records.append(epoch_record(group_id, group.group_epoch + 1, metadata_hash))
                await self.coordinator.append(group_id, [r.encode() for r in records], for_offsets=False)
                for record in records:
                    group.apply(record)
                if member is None:
                    log.info("Member %s joined share group %s (epoch %d)", member_id, group_id, group.group_epoch)
                elif len(records) == 1:
                    log.info("The subscribed topics of share group %s changed; bumped the group epoch to %d",
                             group_id, group.group_epoch)
            member = group.members[member_id]
            self._arm_session_timer(group, member)
            changed = member.member_epoch != group.group_epoch or member_epoch == 0
            member.member_epoch = group.group_epoch
            return HeartbeatResult(member_id, member.member_epoch, interval_ms,
                                   self.assignment(member) if changed else None)

    def _metadata_hash(self, group: ShareGroup, changed: ShareGroupMember | None = None,
                       removed: ShareGroupMember | None = None) -> int:
        """topics_hash of what the members subscribe to now, `changed` as it will be and
        without `removed`."""
        members = {m.member_id: m for m in group.members.values() if m is not removed}
        if changed is not None:
            members[changed.member_id] = changed
        return topics_hash(self.subscription_metadata(t for m in members.values() for t in m.subscribed_topic_names))

    def assignment(self, member: ShareGroupMember) -> dict[str, list[int]]:
        """Every partition of each subscribed topic that exists."""
        result = {}
        for topic in member.subscribed_topic_names:
            partitions = self._partitions_of(topic)
            if partitions:
                result[topic] = partitions
        return result

    async def _remove(self, group: ShareGroup, member: ShareGroupMember, reason: str) -> None:
        """Remove a member (caller holds the group's lock): its tombstone and a new epoch first."""
        records = [member_record(group.group_id, member.member_id, None),
                   epoch_record(group.group_id, group.group_epoch + 1, self._metadata_hash(group, removed=member))]
        await self.coordinator.append(group.group_id, [r.encode() for r in records], for_offsets=False)
        self._stop_member(member)
        for record in records:
            group.apply(record)
        log.info("Member %s left share group %s: %s (epoch %d)", member.member_id, group.group_id, reason,
                 group.group_epoch)
        for listener in self.member_listeners:
            listener(group.group_id, member.member_id)

    def _arm_session_timer(self, group: ShareGroup, member: ShareGroupMember) -> None:
        self._stop_member(member)
        timeout_s = self.config.group_share_session_timeout_ms / 1000
        member.timer = asyncio.get_running_loop().call_later(timeout_s, self._session_expired, group, member)

    def _session_expired(self, group: ShareGroup, member: ShareGroupMember) -> None:
        member.timer = None

        async def expire() -> None:
            async with group.lock:
                if group.members.get(member.member_id) is not member or group.dead:
                    return
                try:
                    await self._remove(group, member, "its session timed out")
                except KafkaError as exc:
                    log.warning("Failed to remove member %s of share group %s: %s", member.member_id,
                                group.group_id, exc)
        asyncio.get_running_loop().create_task(expire())

    def _stop_member(self, member: ShareGroupMember) -> None:
        if member.timer is not None:
            member.timer.cancel()
            member.timer = None

    # -- the GroupTypeManager interface (the rest is ModernGroupManager's) ----------------------
    def installed(self, group: ShareGroup) -> None:
        for member in group.members.values():
            member.member_epoch = group.group_epoch
            self._arm_session_timer(group, member)
