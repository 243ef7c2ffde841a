"""The share coordinator: durable share-partition state in `__share_group_state` (KIP-932).

Kafka's ShareCoordinator, served to share-partition leaders through the share-group state APIs
(InitializeShareGroupState, ReadShareGroupState, WriteShareGroupState, DeleteShareGroupState,
ReadShareGroupStateSummary). The state of share-partition (group, topic id, partition) lives in
the `__share_group_state` partition `share_state_log.partition_for(key)`; the leader of that
partition is its coordinator. A write is answered only once its record is on every in-sync
replica (acks=-1), so an acknowledgement a client heard of survives any broker's crash.

Invariants: `states` holds, for each key of a partition led here, the state its log replays to;
its leader epoch is the newest a share-partition leader read or wrote with. Fencing, as Kafka's
ShareCoordinatorShard: a write with a leader epoch older than the stored one is refused
(FENCED_LEADER_EPOCH), as is one with an older state epoch (FENCED_STATE_EPOCH); -1 in either
means "not given" and is not checked. A read by a share-partition leader with a newer leader epoch
first stores that epoch (a record like a write's), so from the moment a new leader has read the
state, the deposed one cannot overwrite it — even after this coordinator moves. Operations on one
key run one at a time (check, append, update), so no write slips between another's check and
its append. Partitions are loaded when
this broker comes to lead them (blocking on disk: the state topic is small and compacted) and
dropped when it stops; a key whose partition is not led here is NOT_COORDINATOR.

Runs on the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from logbroker.clock import Clock
from logbroker.coordinator.internal_topics import ensure_internal_topic
from logbroker.coordinator.offsets_log import COMMIT_TIMEOUT_MS, build_records, map_append_error, replay
from logbroker.coordinator.share_state_log import (
    SHARE_STATE_TOPIC,
    SharePartitionKey,
    ShareSnapshot,
    decode_key,
    decode_value,
    encode_key,
    encode_snapshot_value,
    partition_for,
)
from logbroker.errors import (
    FencedLeaderEpochError,
    FencedStateEpochError,
    KafkaError,
    NotCoordinatorError,
)
from logbroker.metadata.model import topic_id_to_str
from logbroker.types import TopicPartition

log = logging.getLogger("kafka.coordinator.share.ShareCoordinator")


class ShareCoordinator:
    def __init__(self, *, config, replica_manager, store, create_topic: Callable[..., object], clock: Clock,
                 live_brokers: Callable[[], int] | None = None) -> None:
        self.config = config
        self.replica_manager = replica_manager
        self.store = store
        self._create_topic = create_topic
        self._live_brokers = live_brokers
        self.clock = clock
        self.states: dict[SharePartitionKey, ShareSnapshot] = {}
        self.loaded: set[int] = set()
        self._key_locks: dict[SharePartitionKey, asyncio.Lock] = {}
        self._background: set[asyncio.Task] = set()

    @property
    def num_partitions(self) -> int:
        info = self.store.topic(SHARE_STATE_TOPIC)
        return info.num_partitions if info else self.config.share_coordinator_state_topic_num_partitions

    def partition_of(self, key: SharePartitionKey) -> TopicPartition:
        return TopicPartition(SHARE_STATE_TOPIC, partition_for(key, self.num_partitions))

    def ensure_state_topic(self) -> None:
        """Create __share_group_state on first use: compacted, with
        share.coordinator.state.topic.replication.factor replicas (one on a single node)."""
        c = self.config
        ensure_internal_topic(SHARE_STATE_TOPIC, store=self.store, create_topic=self._create_topic,
                              live_brokers=self._live_brokers,
                              num_partitions=c.share_coordinator_state_topic_num_partitions,
                              replication_factor=c.share_coordinator_state_topic_replication_factor,
                              replication_factor_key="share.coordinator.state.topic.replication.factor",
                              configs={"cleanup.policy": "compact", "compression.type": "producer",
                                       "segment.bytes": str(c.share_coordinator_state_topic_segment_bytes)},
                              min_insync_replicas=c.share_coordinator_state_topic_min_isr)

    def is_local(self, key: SharePartitionKey) -> bool:
        partition = self.replica_manager.partitions.get(self.partition_of(key))
        return partition is not None and partition.is_leader

    def leader_of(self, key: SharePartitionKey) -> int:
        """The broker coordinating `key` (-1: none known)."""
        state = self.store.partition_state(self.partition_of(key))
        return state.leader if state is not None else -1

    def _check(self, key: SharePartitionKey) -> TopicPartition:
        tp = self.partition_of(key)
        partition = self.replica_manager.partitions.get(tp)
        if partition is None or not partition.is_leader or tp.partition not in self.loaded:
            raise NotCoordinatorError(f"This broker is not the share coordinator of {key.coordinator_key()}")
        return tp

    # -- the state APIs ---------------------------------------------------------------------
    def read_state(self, key: SharePartitionKey) -> ShareSnapshot | None:
        """The stored state of `key`; None when it was never initialized. No fencing (the
        summary and the admin APIs read this way)."""
        self._check(key)
        return self.states.get(key)

    async def read_for_leader(self, key: SharePartitionKey, *, leader_epoch: int) -> ShareSnapshot | None:
        """ReadShareGroupState: the stored state of `key` for the share-partition leader at
        `leader_epoch`. An older epoch than the stored one is FENCED_LEADER_EPOCH; a newer one is
        stored (replicated) before the answer."""
        async with self._key_lock(key):
            tp = self._check(key)
            current = self.states.get(key)
            if current is None or leader_epoch < 0 or leader_epoch == current.leader_epoch:
                return current
            if leader_epoch < current.leader_epoch:
                raise FencedLeaderEpochError(
                    f"Leader epoch {leader_epoch} of {key.coordinator_key()} is older than {current.leader_epoch}")
            log.info("Share-partition %s is led at leader epoch %d now (was %d)", key.coordinator_key(),
                     leader_epoch, current.leader_epoch)
            return await self._store(tp, key, ShareSnapshot(
                current.snapshot_epoch, current.state_epoch, leader_epoch, current.start_offset, current.state_batches))

    async def write_state(self, key: SharePartitionKey, snapshot: ShareSnapshot) -> None:
        """Store `snapshot` as the whole state of `key`, answered once replicated."""
        async with self._key_lock(key):
            tp = self._check(key)
            current = self.states.get(key)
            if current is not None and 0 <= snapshot.leader_epoch < current.leader_epoch:
                raise FencedLeaderEpochError(
                    f"Leader epoch {snapshot.leader_epoch} of {key.coordinator_key()} is older than "
                    f"{current.leader_epoch}")
            if current is not None and 0 <= snapshot.state_epoch < current.state_epoch:
                raise FencedStateEpochError(
                    f"State epoch {snapshot.state_epoch} of {key.coordinator_key()} is older than "
                    f"{current.state_epoch}")
            if current is not None:
                snapshot = ShareSnapshot(
                    snapshot.snapshot_epoch,
                    snapshot.state_epoch if snapshot.state_epoch >= 0 else current.state_epoch,
                    snapshot.leader_epoch if snapshot.leader_epoch >= 0 else current.leader_epoch,
                    snapshot.start_offset, snapshot.state_batches)
            await self._store(tp, key, snapshot)

    async def initialize_state(self, key: SharePartitionKey, *, state_epoch: int, start_offset: int) -> None:
        current = self.states.get(key)
        if current is not None and state_epoch < current.state_epoch:
            raise FencedStateEpochError(f"State epoch {state_epoch} of {key.coordinator_key()} is stale")
        await self.write_state(key, ShareSnapshot(0, state_epoch, -1, start_offset))

    async def delete_state(self, key: SharePartitionKey) -> None:
        async with self._key_lock(key):
            tp = self._check(key)
            if key in self.states:
                await self._append(tp, encode_key(key), None)
                self.states.pop(key, None)

    def _key_lock(self, key: SharePartitionKey) -> asyncio.Lock:
        lock = self._key_locks.get(key)
        if lock is None:
            lock = self._key_locks[key] = asyncio.Lock()
        return lock

    async def _store(self, tp: TopicPartition, key: SharePartitionKey, snapshot: ShareSnapshot) -> ShareSnapshot:
        """Append `snapshot` as the next snapshot of `key` and make it the current state."""
        current = self.states.get(key)
        snapshot = ShareSnapshot((current.snapshot_epoch + 1 if current else 0) & 0xFFFF, snapshot.state_epoch,
                                 snapshot.leader_epoch, snapshot.start_offset, snapshot.state_batches)
        await self._append(tp, encode_key(key), encode_snapshot_value(snapshot))
        self.states[key] = snapshot
        return snapshot

    def on_topic_deleted(self, topic_id) -> None:
        """A topic was deleted: the states of its share-partitions kept here are deleted too
        (tombstones, written in the background), as Kafka deletes a deleted topic's share-group
        state. A topic created again under the name has another id, so starts afresh either way;
        this keeps the old states from staying in `__share_group_state` for ever."""
        keys = [key for key in self.states if key.topic_id == topic_id]
        if not keys:
            return

        async def delete() -> None:
            for key in keys:
                try:
                    await self.delete_state(key)
                except KafkaError as exc:
                    log.warning("Failed to delete the share-partition state of %s (its topic was deleted): %s",
                                key.coordinator_key(), exc)
            log.info("Deleted %d share-partition state(s) of deleted topic id %s", len(keys),
                     topic_id_to_str(topic_id))
        task = asyncio.get_running_loop().create_task(delete())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _append(self, tp: TopicPartition, key: bytes, value: bytes | None) -> None:
        records = build_records([(key, value)], self.clock.time_ms())
        results = await self.replica_manager.append_records(timeout_ms=COMMIT_TIMEOUT_MS, required_acks=-1,
                                                            entries={tp: records})
        error = results[tp].error
        if error is not None:
            raise map_append_error(error, for_offsets=True)

    # -- following the leadership of __share_group_state --------------------------------------
    def load(self) -> None:
        """Load every state partition led here now (blocks on disk). Later changes come to
        `on_leadership_change`, which the broker calls (server/share_groups.py)."""
        for tp, partition in list(self.replica_manager.partitions.items()):
            if tp.topic == SHARE_STATE_TOPIC and partition.is_leader:
                self._load(partition)

    def on_leadership_change(self, tp: TopicPartition, partition) -> None:
        if tp.topic != SHARE_STATE_TOPIC:
            return
        if partition is not None and partition.is_leader:
            self._load(partition)
        else:
            self._unload(tp.partition)

    def _load(self, partition) -> None:
        index = partition.tp.partition
        self._unload(index)
        states: dict[SharePartitionKey, ShareSnapshot] = {}
        log_ = partition.log
        for raw_key, raw_value in replay(log_, log_.log_end_offset):
            try:
                record_type, key = decode_key(raw_key)
                if raw_value is None:
                    states.pop(key, None)
                elif record_type <= 1:
                    states[key] = decode_value(record_type, raw_value, states.get(key))
            except KafkaError as exc:
                log.warning("Skipping a malformed record of %s: %s", partition.tp, exc)
        self.states.update(states)
        self.loaded.add(index)
        log.info("Loaded %d share-partition state(s) from %s", len(states), partition.tp)

    def _unload(self, index: int) -> None:
        if index not in self.loaded:
            return
        self.loaded.discard(index)
        for key in [k for k in self.states if partition_for(k, self.num_partitions) == index]:
            del self.states[key]
        for key in [k for k, lock in self._key_locks.items()
                    if partition_for(k, self.num_partitions) == index and not lock.locked()]:
            del self._key_locks[key]

