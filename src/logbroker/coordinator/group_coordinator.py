"""The group coordinator: the shell every type of group and committed offsets live in.

Kafka's GroupCoordinatorService with its shard. A group lives in the `__consumer_offsets`
partition `partition_for(group_id)`; the leader of that partition is the group's coordinator, and
every change that must survive a restart (offsets, and each group's own records) is appended to
that partition before the client hears of it. Leadership of those partitions moves between
brokers in a cluster, and the coordinator follows it (Kafka's onElection / onResignation, through
ReplicaManager's leadership listeners): a partition this broker comes to lead is replayed in a
worker thread (COORDINATOR_LOAD_IN_PROGRESS until then), one it stops leading has its groups
dropped and their parked requests answered NOT_COORDINATOR (coordinator/group_loader.py).

The shell knows where groups live, holds them (`groups`, one id → one group of any type), writes
their records, and routes each request to the part of Kafka's GroupMetadataManager for the
group's type — classic groups: coordinator/classic_group_manager.py, KIP-848 consumer groups:
coordinator/consumer_group_manager.py, KIP-932 share groups: coordinator/share_group.py — and offsets to the
OffsetMetadataManager (coordinator/offset_metadata_manager.py). Listing, describing and deleting
go through the type-neutral Group interface (coordinator/group.py).

Everything runs on the event loop. Errors are raised as KafkaError; the API modules turn them
into response codes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from logbroker.clock import Clock
from logbroker.coordinator.internal_topics import ensure_internal_topic, require_coordinator
from logbroker.coordinator.classic_group import ClassicGroupRecords
from logbroker.coordinator.classic_group_manager import ClassicGroupManager
from logbroker.coordinator.group import Group, GroupType, GroupTypeManager
from logbroker.coordinator.group_loader import GroupLoader, LazyGroupRecords
from logbroker.coordinator.group_rehoming import GroupRehoming
from logbroker.coordinator.offset_metadata_manager import OffsetMetadataManager
from logbroker.coordinator.offsets_log import COMMIT_TIMEOUT_MS, build_records, map_append_error
from logbroker.coordinator.offsets_schema import (
    OFFSETS_TOPIC,
    OffsetAndMetadata,
    encode_offset_commit_key,
    partition_for,
)
from logbroker.errors import (
    CoordinatorLoadInProgressError,
    GroupIdNotFoundError,
    InvalidGroupIdError,
    KafkaError,
    NotCoordinatorError,
)
from logbroker.types import TopicPartition

if TYPE_CHECKING:
    from logbroker.coordinator.consumer_group_manager import ConsumerGroupManager, HeartbeatRequest
    from logbroker.coordinator.share_group import ShareGroupManager

log = logging.getLogger("kafka.coordinator.group.GroupCoordinator")

# KIP-848 consumer groups and KIP-932 share groups are loaded on first use — the first request
# for one (`consumer`, `share`) or the first of their records met while loading
# __consumer_offsets (these) — not at start: their modules build record codecs from Kafka's JSON
# and bring RE2, ~30 ms and ~3 MiB that a broker with only classic groups never needs.
CONSUMER_GROUP_RECORDS = LazyGroupRecords(frozenset({3, 4, 5, 6, 7, 8, 16}), "logbroker.coordinator.consumer_group",
                                          "ConsumerGroupRecords")
SHARE_GROUP_RECORDS = LazyGroupRecords(frozenset(range(9, 16)), "logbroker.coordinator.share_group",
                                       "ShareGroupRecords")


class GroupCoordinator:
    def __init__(self, *, broker_id: int, config, replica_manager, store,
                 create_topic: Callable[..., object], clock: Clock,
                 live_brokers: Callable[[], int] | None = None) -> None:
        """`live_brokers` counts the registered brokers of a cluster; None on a single node."""
        self.broker_id = broker_id
        self.config = config
        self.replica_manager = replica_manager
        self.store = store
        self._create_topic = create_topic
        self._live_brokers = live_brokers
        self.clock = clock
        self.groups: dict[str, Group] = {}
        self.rehoming = GroupRehoming(self)
        self.loader = GroupLoader(install=self.install_groups, rehome=self.rehoming.found, unload=self._unload_groups,
                                  num_partitions=lambda: self.num_partitions, clock=clock,
                                  record_types=(ClassicGroupRecords, CONSUMER_GROUP_RECORDS, SHARE_GROUP_RECORDS))
        self.classic = ClassicGroupManager(self)
        self._consumer: ConsumerGroupManager | None = None
        self._share: ShareGroupManager | None = None
        # Called with (group id, member id) when a share group's member leaves or times out (the
        # share-partition manager closes its share session later and frees its records).
        self.share_member_listeners: list[Callable[[str, str], None]] = []
        self.offsets = OffsetMetadataManager(self)

    @property
    def consumer(self) -> ConsumerGroupManager:
        """KIP-848 consumer groups' manager, made (its module imported) on first use."""
        if self._consumer is None:
            from logbroker.coordinator.consumer_group_manager import ConsumerGroupManager
            self._consumer = ConsumerGroupManager(self)
        return self._consumer

    @property
    def share(self) -> ShareGroupManager:
        """KIP-932 share groups' manager, made (its module imported) on first use."""
        if self._share is None:
            from logbroker.coordinator.share_group import ShareGroupManager
            self._share = ShareGroupManager(self)
        return self._share

    @property
    def consumer_group_rebalances(self) -> int:
        """Group epoch bumps of consumer groups (Kafka's consumer-group-rebalance count)."""
        return self._consumer.rebalances if self._consumer is not None else 0

    def manager(self, group_type: GroupType) -> GroupTypeManager:
        """The manager of a type's requests and timers."""
        if group_type is GroupType.CLASSIC:
            return self.classic
        return self.consumer if group_type is GroupType.CONSUMER else self.share

    # -- where groups live ----------------------------------------------------------------------
    @property
    def num_partitions(self) -> int:
        """The partition count of __consumer_offsets: the topic's own once it exists (as Kafka)."""
        info = self.store.topic(OFFSETS_TOPIC)
        return info.num_partitions if info else self.config.offsets_topic_num_partitions

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def ensure_offsets_topic(self) -> None:
        """Create __consumer_offsets if it does not exist yet (on the first FindCoordinator).

        In a cluster, as Kafka's ZooKeeper mode, with offsets.topic.replication.factor replicas,
        refused with COORDINATOR_NOT_AVAILABLE while fewer brokers are alive. A single node uses
        one replica, so the embedded default needs no configuration."""
        ensure_internal_topic(OFFSETS_TOPIC, store=self.store, create_topic=self._create_topic,
                              live_brokers=self._live_brokers,
                              num_partitions=self.config.offsets_topic_num_partitions,
                              replication_factor=self.config.offsets_topic_replication_factor,
                              replication_factor_key="offsets.topic.replication.factor",
                              configs={"cleanup.policy": "compact", "compression.type": "producer",
                                       "segment.bytes": str(self.config.offsets_topic_segment_bytes)})

    def coordinator_partition(self, group_id: str) -> TopicPartition:
        return TopicPartition(OFFSETS_TOPIC, self.partition_for(group_id))

    def check_group(self, group_id: str | None) -> None:
        """Raise unless this broker coordinates `group_id` now (COORDINATOR_LOAD_IN_PROGRESS also
        while groups are being moved into its partition: coordinator/group_rehoming.py)."""
        if not group_id:
            raise InvalidGroupIdError("The group id is empty")
        tp = self.coordinator_partition(group_id)
        require_coordinator(tp, store=self.store, replica_manager=self.replica_manager,
                            partitions=self.loader.partitions, holds=f"group {group_id}")
        if self.rehoming.blocked(tp.partition):
            raise CoordinatorLoadInProgressError(f"Groups are being moved into {tp}; retry in a moment")

    def now_ms(self) -> int:
        return self.clock.time_ms()

    def _manager(self, group: Group) -> GroupTypeManager:
        return self.manager(group.group_type)

    # -- classic groups -------------------------------------------------------------------------
    async def join_group(self, **kw) -> dict:
        return await self.classic.join_group(**kw)

    async def sync_group(self, **kw) -> dict:
        return await self.classic.sync_group(**kw)

    def heartbeat(self, **kw) -> None:
        self.classic.heartbeat(**kw)

    def leave_group(self, group_id: str, leaving: list[tuple[str, str | None]]) -> list[KafkaError | None]:
        return self.classic.leave_group(group_id, leaving)

    # -- consumer groups (KIP-848) -----------------------------------------------------------------
    async def consumer_group_heartbeat(self, request: HeartbeatRequest, *, api_version: int) -> dict:
        return await self.consumer.heartbeat(request, api_version=api_version)

    def consumer_group_describe(self, group_id: str) -> dict:
        return self.consumer.describe_consumer_group(group_id)

    # -- offsets --------------------------------------------------------------------------------
    async def commit_offsets(self, **kw) -> None:
        await self.offsets.commit_offsets(**kw)

    def fetch_offsets(self, group_id: str, partitions: Iterable[TopicPartition] | None, *,
                      member_id: str | None = None, member_epoch: int = -1
                      ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        return self.offsets.fetch_offsets(group_id, partitions, member_id=member_id, member_epoch=member_epoch)

    async def delete_offsets(self, group_id: str, partitions: list[TopicPartition]
                             ) -> dict[TopicPartition, KafkaError | None]:
        return await self.offsets.delete_offsets(group_id, partitions)

    async def expire_offsets(self) -> int:
        return await self.offsets.expire_offsets()

    # -- listing, describing, deleting ----------------------------------------------------------
    @property
    def is_loading(self) -> bool:
        """True while any __consumer_offsets partition this broker leads is being loaded."""
        return bool(self.loader.partitions.loading)

    def owned_groups(self) -> list[Group]:
        return [g for g in self.groups.values() if not g.is_dead]

    def describe_group(self, group_id: str) -> dict:
        """DescribeGroups' answer for one group."""
        self.check_group(group_id)
        group = self.groups.get(group_id)
        if group is None or group.is_dead:
            return {"error_code": 0, "group_id": group_id, "group_state": "Dead", "protocol_type": "",
                    "protocol_data": "", "members": []}
        return self._manager(group).describe(group)

    async def delete_group(self, group_id: str) -> None:
        self.check_group(group_id)
        group = self.groups.get(group_id)
        if group is None or group.is_dead:
            raise GroupIdNotFoundError(f"group {group_id} does not exist")
        group.validate_delete_group()
        entries = [(encode_offset_commit_key(group_id, tp.topic, tp.partition), None) for tp in group.offsets]
        entries += group.tombstones()
        await self.append(group_id, entries, for_offsets=False)
        self.remove_group(group)
        log.info("Deleted group %s", group_id)

    def remove_group(self, group: Group) -> None:
        """Forget a deleted group: it turns Dead, its timers stop."""
        self._manager(group).removed(group, self.now_ms())
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]

    # -- persistence ----------------------------------------------------------------------------
    async def append(self, group_id: str, entries: list[tuple[bytes, bytes | None]], *, for_offsets: bool) -> None:
        """Append records (key, value or None for a tombstone) to the group's partition, in one
        batch, acks=-1; raises the error the client should get (offsets_log.map_append_error)."""
        await self.append_to(self.coordinator_partition(group_id), entries, for_offsets=for_offsets)

    async def append_to(self, tp: TopicPartition, entries: list[tuple[bytes, bytes | None]], *,
                        for_offsets: bool) -> None:
        """`append`, to the `__consumer_offsets` partition `tp`."""
        results = await self.replica_manager.append_records(
            timeout_ms=COMMIT_TIMEOUT_MS, required_acks=-1, entries={tp: build_records(entries, self.now_ms())})
        error = results[tp].error
        if error is not None:
            raise map_append_error(error, for_offsets=for_offsets)

    # -- following the leadership of __consumer_offsets (onElection / onResignation) -----------
    def load(self) -> None:
        """Load every __consumer_offsets partition this broker leads now (blocks on disk; call
        once, on the event loop, after leaders are elected and before the listeners open), follow
        later leadership changes (group_loader.GroupLoader), and start the offset expiration task."""
        self.replica_manager.leadership_listeners.append(self.loader.on_leadership_change)
        self.offsets.start_expiration()
        for tp, partition in list(self.replica_manager.partitions.items()):
            if tp.topic == OFFSETS_TOPIC and partition.is_leader:
                self.loader.load_now(partition)

    def install_groups(self, groups: dict[str, Group]) -> None:
        for group_id, group in groups.items():
            self.groups[group_id] = group
            self._manager(group).installed(group)

    def _unload_groups(self, partition_index: int) -> int:
        """Drop the groups of a partition this broker no longer leads: timers cancelled, parked
        requests answered NOT_COORDINATOR (the clients find the new coordinator). Returns how many."""
        self.rehoming.forget(partition_index)
        unloaded = [g for g in self.groups.values() if self.partition_for(g.group_id) == partition_index]
        for group in unloaded:
            self._manager(group).unloaded(group, NotCoordinatorError(
                f"This broker no longer coordinates group {group.group_id}"))
            self.remove_group(group)
        return len(unloaded)

    def shutdown(self) -> None:
        self.offsets.stop_expiration()
        for group in self.groups.values():
            self._manager(group).stop(group)
