"""What consumer groups (KIP-848) and share groups (KIP-932) have in common, as Kafka's
ModernGroup is for its ConsumerGroup and ShareGroup.

Both are driven by the coordinator through heartbeats, not by a leader member: the group has a
group epoch, bumped by every change of its members or their subscriptions, and its members by
member id; a member is in the group from the heartbeat that adds it until its tombstone (it
left, its session timed out, or the group was deleted). Each type's records in
`__consumer_offsets` are replayed into the group, so memory changes only after the log does; the
group's `lock` serializes the heartbeats and expirations that compute, append and replay them.

- `ModernGroup`: that common state and what follows from it alone (`is_empty`, `is_dead`,
  `member`, `validate_delete_group`).
- `ModernGroupManager`: the coordinator shell's hooks (group.GroupTypeManager) that both
  managers answer the same way; each type says how to stop one member (`_stop_member`: cancel
  its timers) and how to arm them on load (`installed`). And how both follow the topics: on
  every heartbeat the members' subscriptions are resolved against the current metadata
  (`subscription_metadata`: each subscribed topic that exists, with its id and partition count);
  when that differs from what the group last recorded — a subscribed topic created, deleted,
  created again under a new id, or given more partitions — the group epoch is bumped and the
  assignments follow, as Kafka's GroupMetadataManager does on metadata changes.

Invariants: `group_epoch` never decreases; `dead` only ever goes from False to True (the group's
metadata tombstone, or its removal), after which the coordinator no longer serves the group.
Event loop only (loading replays into groups no other thread sees, in a worker thread).
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import struct
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from logbroker.coordinator.group import Group
from logbroker.coordinator.offsets_schema import OFFSETS_TOPIC
from logbroker.errors import GroupIdNotFoundError, KafkaError, NonEmptyGroupError, UnknownMemberIdError


INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, "__transaction_state", "__share_group_state"})


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    topic_id: uuid.UUID
    name: str
    num_partitions: int


def topics_hash(metadata: Mapping[str, TopicMetadata]) -> int:
    """A signed 64-bit digest of the subscribed topics' names, ids and partition counts (0 for
    none), what a share group records as its metadata hash. Kafka 4.1+ records an XXH3 digest
    there; a group written by Kafka therefore gets one epoch bump on its first heartbeat here,
    which is harmless (the assignment is sent again)."""
    if not metadata:
        return 0
    digest = hashlib.blake2b(digest_size=8)
    for name in sorted(metadata):
        topic = metadata[name]
        encoded = name.encode()
        digest.update(struct.pack(">H", len(encoded)) + encoded + topic.topic_id.bytes
                      + struct.pack(">i", topic.num_partitions))
    return struct.unpack(">q", digest.digest())[0]


@dataclass(slots=True, eq=False)
class ModernGroup(Group):
    """A group whose members heartbeat to the coordinator; see the module docstring."""

    group_epoch: int = 0
    # member id → the type's member (ConsumerGroupMember, ShareGroupMember).
    members: dict[str, Any] = field(default_factory=dict)
    dead: bool = False
    # Serializes the heartbeats and expirations of the group: each computes its records from the
    # group as the last one left it, appends them, then replays them.
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    # How DeleteGroups' NON_EMPTY_GROUP message names the group ("Group", "Share group").
    KIND = "Group"

    @property
    def is_dead(self) -> bool:
        return self.dead

    @property
    def is_empty(self) -> bool:
        return not self.members

    def member(self, member_id: str):
        """The member `member_id`; UnknownMemberIdError when the group has no such member."""
        member = self.members.get(member_id)
        if member is None:
            raise UnknownMemberIdError(f"Member {member_id} is not a member of group {self.group_id}.")
        return member

    def validate_delete_group(self) -> None:
        if self.members:
            raise NonEmptyGroupError(f"{self.KIND} {self.group_id} is not empty.")


class ModernGroupManager:
    """The GroupTypeManager hooks a consumer or share group manager answers alike, and the lookup
    of a live group of its type; see the module docstring. Subclasses set `coordinator`,
    `GROUP_CLASS` and `NOUN`, and define `installed` and `_stop_member`."""

    GROUP_CLASS: type[ModernGroup] = ModernGroup
    NOUN = ""  # "consumer", "share": in GROUP_ID_NOT_FOUND's message
    coordinator: Any

    def _live_group(self, group_id: str):
        """The group `group_id`, of this manager's type and not dead. The coordinator's checks of
        the id first (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, …), then GroupIdNotFoundError
        when there is no such group or it is of another type."""
        self.coordinator.check_group(group_id)
        group = self.coordinator.groups.get(group_id)
        if group is None or group.is_dead:
            raise GroupIdNotFoundError(f"Group {group_id} not found.")
        if not isinstance(group, self.GROUP_CLASS):
            raise GroupIdNotFoundError(f"Group {group_id} is not a {self.NOUN} group.")
        return group

    def subscription_metadata(self, names: Iterable[str], patterns: Iterable[re.Pattern] = ()
                              ) -> dict[str, TopicMetadata]:
        """The existing topics (with partitions) among `names` and the non-internal topics that a
        pattern fully matches, resolved against the metadata now."""
        wanted = set(names)
        patterns = list(patterns)
        store = self.coordinator.store
        if patterns:  # only a regular expression needs every topic's name
            wanted.update(name for name in store.topics() if name not in INTERNAL_TOPICS
                          and any(p.fullmatch(name) for p in patterns))
        metadata = {}
        for name in wanted:
            info = store.topic(name)
            if info is not None and info.num_partitions > 0:
                metadata[name] = TopicMetadata(info.topic_id, name, info.num_partitions)
        return metadata

    def describe(self, group: ModernGroup) -> dict:
        raise GroupIdNotFoundError(f"Group {group.group_id} is not a classic group.")

    def unloaded(self, group: ModernGroup, error: KafkaError) -> None:
        self.stop(group)

    def removed(self, group: ModernGroup, now_ms: int) -> None:
        self.stop(group)
        group.dead = True

    def stop(self, group: ModernGroup) -> None:
        for member in group.members.values():
            self._stop_member(member)

    def _stop_member(self, member) -> None:
        raise NotImplementedError
