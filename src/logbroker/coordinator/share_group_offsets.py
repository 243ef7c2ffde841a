"""The offsets of a share group: its share-partitions' start offsets (KIP-932's
DescribeShareGroupOffsets, AlterShareGroupOffsets, DeleteShareGroupOffsets, and DeleteGroups of
a share group).

A share group's "offset" on a partition is its share-partition's start offset: everything below
it is settled. The truth is the state the share coordinator keeps; these functions read and write
it through the persister, wherever it lives. Altering or deleting needs a group without members
(NON_EMPTY_GROUP otherwise, as Kafka), since a live member's records are in flight; an altered
partition gets a new state epoch, so a share-partition leader still holding the old state is
fenced (FENCED_STATE_EPOCH) on its next write and reloads. A classic group's id is
GROUP_ID_NOT_FOUND.
"""

from __future__ import annotations

from dataclasses import dataclass

from logbroker.coordinator.partition_metadata_client import PartitionMetadataClient
from logbroker.coordinator.share_group import ShareGroup
from logbroker.coordinator.share_partition_manager import SharePartitionManager
from logbroker.coordinator.share_state_log import ShareSnapshot, ShareStateSummary
from logbroker.errors import GroupIdNotFoundError, KafkaError, NonEmptyGroupError, UnknownTopicOrPartitionError
from logbroker.types import TopicPartition


@dataclass(frozen=True, slots=True)
class SharePartitionOffset:
    tp: TopicPartition
    start_offset: int  # -1: the group has no state on the partition
    leader_epoch: int = -1
    lag: int = -1
    error: KafkaError | None = None


class ShareGroupOffsets:
    def __init__(self, *, coordinator, manager: SharePartitionManager, store,
                 partition_metadata: PartitionMetadataClient) -> None:
        self.coordinator = coordinator
        self.manager = manager
        self.store = store
        self.partition_metadata = partition_metadata

    def _check_share_group(self, group_id: str, *, empty: bool) -> None:
        """A group of another type is GROUP_ID_NOT_FOUND; none at all is fine (a share group's
        offsets may be set before its first member)."""
        group = self.coordinator.groups.get(group_id)
        if group is None or group.is_dead:
            return
        if not isinstance(group, ShareGroup):
            raise GroupIdNotFoundError(f"Group {group_id} is not a share group.")
        if empty and group.members:
            raise NonEmptyGroupError(f"Share group {group_id} has members; stop its consumers first")

    def partitions(self, topics: dict[str, list[int]] | None) -> list[TopicPartition]:
        """The partitions asked for; with None, every partition of every topic."""
        if topics is None:
            topics = {name: [] for name in self.store.topics() if not name.startswith("__")}
        result = []
        for name, partitions in topics.items():
            info = self.store.topic(name)
            wanted = partitions or (sorted(info.assignment) if info is not None else [])
            result += [TopicPartition(name, p) for p in wanted]
        return result

    async def describe(self, group_id: str, topics: dict[str, list[int]] | None) -> list[SharePartitionOffset]:
        """The start offset and lag of each partition (asked for, or, with None, each one the
        group has state on). A partition whose state cannot be read now carries the error; its
        lag counts from the partition leader's high watermark, wherever it is led (-1 when that
        cannot be learnt now)."""
        self._check_share_group(group_id, empty=False)
        found: list[tuple[TopicPartition, ShareStateSummary | None, KafkaError | None]] = []
        for tp in self.partitions(topics):
            if self.store.topic(tp.topic) is None:
                found.append((tp, None, _unknown(tp)))
                continue
            try:
                state = await self.manager.persister.read_summary(self.manager.key_of(group_id, tp))
            except KafkaError as exc:
                found.append((tp, None, exc))
                continue
            if state is not None and state.start_offset >= 0:
                found.append((tp, state, None))
            elif topics is not None:
                found.append((tp, None, None))
        ends = await self.partition_metadata.high_watermarks([tp for tp, state, _ in found if state is not None])
        results = []
        for tp, state, error in found:
            if state is None:
                results.append(SharePartitionOffset(tp, -1, error=error))
            else:
                results.append(SharePartitionOffset(tp, state.start_offset, state.leader_epoch,
                                                    _lag(state, ends.get(tp))))
        return results

    async def alter(self, group_id: str, offsets: dict[TopicPartition, int]) -> dict[TopicPartition, KafkaError | None]:
        """Set start offsets; a group id no group has yet becomes an empty share group."""
        self._check_share_group(group_id, empty=True)
        await self.coordinator.share.ensure_group(group_id)
        results: dict[TopicPartition, KafkaError | None] = {}
        for tp, offset in offsets.items():
            if self.store.topic(tp.topic) is None:
                results[tp] = _unknown(tp)
                continue
            key = self.manager.key_of(group_id, tp)
            try:
                current = await self.manager.persister.read(key)
                epoch = current.state_epoch + 1 if current is not None else 0
                await self.manager.persister.write(key, ShareSnapshot(0, epoch, -1, offset))
                self.manager.drop(group_id, tp)
                results[tp] = None
            except KafkaError as exc:
                results[tp] = exc
        return results

    async def delete(self, group_id: str, topics: list[str]) -> dict[str, KafkaError | None]:
        self._check_share_group(group_id, empty=True)
        results: dict[str, KafkaError | None] = {}
        for name in topics:
            info = self.store.topic(name)
            if info is None:
                results[name] = _unknown(TopicPartition(name, 0))
                continue
            results[name] = None
            for p in sorted(info.assignment):
                tp = TopicPartition(name, p)
                try:
                    await self.manager.persister.delete(self.manager.key_of(group_id, tp))
                    self.manager.drop(group_id, tp)
                except KafkaError as exc:
                    results[name] = exc
        return results

    async def delete_group(self, group_id: str) -> None:
        """DeleteGroups of a share group: no members, then its state on every partition goes,
        then the group's own records."""
        self.coordinator.share.share_group(group_id)  # GROUP_ID_NOT_FOUND when unknown
        self._check_share_group(group_id, empty=True)
        await self.delete(group_id, [name for name in self.store.topics() if not name.startswith("__")])
        await self.coordinator.delete_group(group_id)


def _unknown(tp: TopicPartition) -> KafkaError:
    return UnknownTopicOrPartitionError(f"Topic {tp.topic} does not exist")


def _lag(state: ShareStateSummary, high_watermark: int | None) -> int:
    """Records not yet settled below the high watermark; -1 when it is not known."""
    if high_watermark is None or state.delivery_complete_count < 0:
        return -1
    return max(high_watermark - state.start_offset - state.delivery_complete_count, 0)
