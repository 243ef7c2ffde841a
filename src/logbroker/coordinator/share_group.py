"""Share groups: membership and assignment (KIP-932's ShareGroupHeartbeat side).

Kafka's ShareGroup in the group coordinator. A share group lives where a consumer group of the
same id would (its `__consumer_offsets` partition's leader) and shares the group id space with
them: a classic group's id used by a share consumer is INCONSISTENT_GROUP_PROTOCOL, a share
group's id described as another type is GROUP_ID_NOT_FOUND.

Membership: a member joins with member epoch 0 and its own member id (ShareGroupHeartbeat v1:
the client makes the id), leaves with epoch -1, and heartbeats in between with the epoch it was
given; any other epoch is FENCED_MEMBER_EPOCH, an unknown member id UNKNOWN_MEMBER_ID. Every
change of membership or subscriptions bumps the group epoch. Share groups need no revocation —
records, not partitions, are handed out — so the assignment is computed at once: as Kafka's
simple assignor with more partitions than it needs to spread, every member gets every partition
of the topics it subscribes to, and its member epoch is the group epoch.
A member not heard from for group.share.session.timeout.ms is removed (its share sessions close
and its acquired records are released, through `on_member_removed`).

Invariants: member_epoch == group_epoch for every member after it has heartbeated once since the
last bump; `group_epoch` only increases. Runs on the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from logbroker.clock import Clock
from logbroker.errors import (
    FencedMemberEpochError,
    GroupIdNotFoundError,
    InconsistentGroupProtocolError,
    InvalidRequestError,
    NonEmptyGroupError,
    UnknownMemberIdError,
)

log = logging.getLogger("kafka.coordinator.group.GroupMetadataManager")

SHARE_GROUP_TYPE = "share"
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


@dataclass(slots=True)
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareGroupMember] = field(default_factory=dict)

    @property
    def state(self) -> str:
        """Kafka's ShareGroupState names: Empty, Stable (Dead once deleted)."""
        return "Stable" if self.members else "Empty"

    def subscribed_topics(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed_topic_names}


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: dict[str, list[int]] | None  # topic name → partitions; None: unchanged


class ShareGroupCoordinator:
    def __init__(self, *, config, clock: Clock, partitions_of: Callable[[str], list[int] | None],
                 classic_group_exists: Callable[[str], bool],
                 on_member_removed: Callable[[str, str], None] = lambda group_id, member_id: None) -> None:
        """`partitions_of(topic)` lists a topic's partitions (None: no such topic);
        `classic_group_exists(group_id)` says whether a consumer group already uses the id."""
        self.config = config
        self.clock = clock
        self._partitions_of = partitions_of
        self._classic_group_exists = classic_group_exists
        self._on_member_removed = on_member_removed
        self.groups: dict[str, ShareGroup] = {}

    # -- ShareGroupHeartbeat ------------------------------------------------------------------
    def heartbeat(self, *, group_id: str, member_id: str, member_epoch: int, rack_id: str | None,
                  subscribed_topic_names: tuple[str, ...] | None, client_id: str, client_host: str
                  ) -> HeartbeatResult:
        if not member_id:
            raise InvalidRequestError("MemberId can't be empty.")
        if self._classic_group_exists(group_id):
            raise InconsistentGroupProtocolError(f"Group {group_id} is not a share group")
        interval_ms = self.config.group_share_heartbeat_interval_ms
        group = self.groups.get(group_id)
        if member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
            if group is None or member_id not in group.members:
                raise UnknownMemberIdError(f"Member {member_id} is not in share group {group_id}")
            self.remove_member(group, member_id, "the member left")
            return HeartbeatResult(member_id, LEAVE_GROUP_MEMBER_EPOCH, interval_ms, None)
        if member_epoch == 0:
            if subscribed_topic_names is None:
                raise InvalidRequestError("SubscribedTopicNames must be set in the first heartbeat.")
            if group is None:
                group = self.groups[group_id] = ShareGroup(group_id)
            member = group.members.get(member_id)
            if member is None:
                member = group.members[member_id] = ShareGroupMember(
                    member_id, 0, client_id, client_host, rack_id, tuple(subscribed_topic_names))
                group.group_epoch += 1
                log.info("Member %s joined share group %s (epoch %d)", member_id, group_id, group.group_epoch)
        else:
            member = group.members.get(member_id) if group is not None else None
            if member is None:
                raise UnknownMemberIdError(f"Member {member_id} is not in share group {group_id}")
            if member_epoch != member.member_epoch and member_epoch != group.group_epoch:
                raise FencedMemberEpochError(
                    f"Member {member_id} of share group {group_id} sent epoch {member_epoch}, "
                    f"its epoch is {member.member_epoch}")
        if subscribed_topic_names is not None and tuple(subscribed_topic_names) != member.subscribed_topic_names:
            member.subscribed_topic_names = tuple(subscribed_topic_names)
            group.group_epoch += 1
        self._arm_session_timer(group, member)
        changed = member.member_epoch != group.group_epoch or member_epoch == 0
        member.member_epoch = group.group_epoch
        group.assignment_epoch = group.group_epoch
        return HeartbeatResult(member.member_id, member.member_epoch, interval_ms,
                               self.assignment(member) if changed else None)

    def assignment(self, member: ShareGroupMember) -> dict[str, list[int]]:
        """Every partition of each subscribed topic that exists (Kafka's simple assignor with
        members sharing partitions)."""
        result = {}
        for topic in member.subscribed_topic_names:
            partitions = self._partitions_of(topic)
            if partitions:
                result[topic] = partitions
        return result

    def _arm_session_timer(self, group: ShareGroup, member: ShareGroupMember) -> None:
        if member.timer is not None:
            member.timer.cancel()
        timeout_s = self.config.group_share_session_timeout_ms / 1000
        member.timer = asyncio.get_running_loop().call_later(
            timeout_s, self.remove_member, group, member.member_id, "its session timed out")

    def remove_member(self, group: ShareGroup, member_id: str, reason: str) -> None:
        member = group.members.pop(member_id, None)
        if member is None:
            return
        if member.timer is not None:
            member.timer.cancel()
        group.group_epoch += 1
        log.info("Member %s left share group %s: %s (epoch %d)", member_id, group.group_id, reason, group.group_epoch)
        self._on_member_removed(group.group_id, member_id)

    # -- ShareGroupDescribe, ListGroups, DeleteGroups -----------------------------------------
    def describe(self, group_id: str) -> ShareGroup:
        group = self.groups.get(group_id)
        if group is None:
            raise GroupIdNotFoundError(f"Group {group_id} not found.")
        return group

    def is_member(self, group_id: str, member_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and member_id in group.members

    def delete(self, group_id: str) -> None:
        group = self.describe(group_id)
        if group.members:
            raise NonEmptyGroupError(f"Share group {group_id} has members")
        del self.groups[group_id]

    def shutdown(self) -> None:
        for group in self.groups.values():
            for member in group.members.values():
                if member.timer is not None:
                    member.timer.cancel()
