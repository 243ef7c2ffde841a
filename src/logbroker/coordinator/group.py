"""What every kind of group has in common: Kafka's `Group` interface.

A group id names one group of one type at a time, all of them kept by the coordinator of the
`__consumer_offsets` partition the id hashes to (coordinator/group_coordinator.py):

- classic: the JoinGroup / SyncGroup protocol, assignment by the group's leader
  (coordinator/classic_group.py, coordinator/classic_group_manager.py);
- consumer: KIP-848, ConsumerGroupHeartbeat, assignment by the coordinator
  (coordinator/consumer_group.py, coordinator/consumer_group_manager.py);
- share: KIP-932 share groups.

Committed offsets belong to the group whatever its type (OffsetCommit and OffsetFetch work the
same for all; only who may commit differs, which each type decides in `validate_offset_commit`).
The listing, describing, deleting and offset paths of the coordinator and the offset manager
speak to a group only through this interface, so a new type plugs in with: a subclass of `Group`;
a `GroupTypeManager` for its requests and timers, returned by the coordinator's `manager(type)`;
and a `GroupRecords` that replays its records at load (coordinator/group_loader.py).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from logbroker.coordinator.offsets_schema import OffsetAndMetadata
from logbroker.errors import KafkaError
from logbroker.types import TopicPartition


class GroupType(enum.Enum):
    """Kafka's Group.GroupType, by the names ListGroups' types filter and answer use."""

    CLASSIC = "classic"
    CONSUMER = "consumer"
    SHARE = "share"


@dataclass(slots=True, eq=False)
class Group:
    """A group's id and committed offsets; the rest is its type's. Plain data, event loop only."""

    group_id: str
    offsets: dict[TopicPartition, OffsetAndMetadata] = field(default_factory=dict, kw_only=True)
    # Offsets committed inside a transaction (TxnOffsetCommit), by producer id: in the log, but
    # visible to OffsetFetch only once the transaction's COMMIT marker lands (dropped on ABORT).
    pending_txn_offsets: dict[int, dict[TopicPartition, OffsetAndMetadata]] = field(default_factory=dict,
                                                                                   kw_only=True)

    GROUP_TYPE = GroupType.CLASSIC

    @property
    def group_type(self) -> GroupType:
        return self.GROUP_TYPE

    # -- what ListGroups and DescribeGroups show --------------------------------------------
    @property
    def state_name(self) -> str:
        """Kafka's name of the group's state ("Empty", "Stable", …)."""
        raise NotImplementedError

    @property
    def protocol_type(self) -> str | None:
        raise NotImplementedError

    @property
    def is_dead(self) -> bool:
        raise NotImplementedError

    @property
    def is_empty(self) -> bool:
        raise NotImplementedError

    # -- offsets ----------------------------------------------------------------------------
    def validate_offset_commit(self, *, member_id: str, group_instance_id: str | None,
                               generation_id_or_member_epoch: int, is_transactional: bool,
                               api_version: int) -> None:
        """Raise unless this member, at this generation or epoch, may commit now."""
        raise NotImplementedError

    def validate_offset_fetch(self, *, member_id: str | None, member_epoch: int) -> None:
        """Raise unless this member may fetch offsets (OffsetFetch v9+ names the member)."""

    def validate_delete_group(self) -> None:
        """Raise unless DeleteGroups may delete the group now."""
        raise NotImplementedError

    def validate_offset_delete(self) -> None:
        """Raise unless OffsetDelete may delete offsets of this (non-empty) group."""

    def subscribed_topics(self) -> set[str] | None:
        """The topics the members consume, whose offsets OffsetDelete refuses and expiration
        spares; None when they cannot be known (then neither touches any)."""
        return set()

    def tombstones(self) -> list[tuple[bytes, None]]:
        """Tombstones for every record of the group but its offsets: what deletes it."""
        raise NotImplementedError

    def offset_expiration_base(self) -> Callable[[OffsetAndMetadata], int] | None:
        """Kafka's offsetExpirationCondition: from when a committed offset counts towards
        offsets.retention.minutes (KIP-211); None while the group's offsets may not expire."""
        return _commit_timestamp


def _commit_timestamp(committed: OffsetAndMetadata) -> int:
    return committed.commit_timestamp_ms


class GroupTypeManager(Protocol):
    """What the coordinator shell asks of the manager of one group type (its part of Kafka's
    GroupMetadataManager), beside the requests of that type's own APIs. Event loop only."""

    def describe(self, group: Group) -> dict:
        """DescribeGroups' answer for the group."""

    def installed(self, group: Group) -> None:
        """The group was loaded from its partition: arm its timers."""

    def unloaded(self, group: Group, error: KafkaError) -> None:
        """Its partition left this broker: answer the group's parked requests with `error`."""

    def removed(self, group: Group, now_ms: int) -> None:
        """The group is gone (deleted, expired or unloaded): stop it and mark it Dead."""

    def stop(self, group: Group) -> None:
        """Cancel the group's timers: the broker stops."""
