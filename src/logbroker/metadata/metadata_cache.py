"""What a cluster member knows of the cluster: live brokers, topics and partition states, in memory.

Kafka's MetadataCache. In a cluster the broker's request handlers read this, never ZooKeeper: the
ZooKeeper watches (server/zk_cluster.py) feed it, so a Metadata request costs no round trip. It
answers the read half of the metadata-store interface (`topics`, `topic`, `topic_by_id`,
`partition_state`, `cluster_id`); the few writes a handler makes (topic configs, producer-id
blocks) go through to the backing store, which blocks on ZooKeeper.

Not thread-safe: only the event loop changes or reads it (watch callbacks hop there first).
Invariant: every partition state held belongs to a topic held.
"""

from __future__ import annotations

import uuid

from logbroker.metadata.model import BrokerInfo, PartitionState, TopicInfo
from logbroker.types import TopicPartition


class MetadataCache:
    def __init__(self, backing_store, *, cluster_id: str) -> None:
        self.backing_store = backing_store
        self.cluster_id = cluster_id
        self.controller_id: int | None = None
        self._brokers: dict[int, BrokerInfo] = {}
        self._topics: dict[str, TopicInfo] = {}
        self._by_id: dict[uuid.UUID, TopicInfo] = {}
        self._states: dict[TopicPartition, PartitionState] = {}
        self._state_versions: dict[TopicPartition, int] = {}

    # -- brokers ------------------------------------------------------------------------------
    def brokers(self) -> dict[int, BrokerInfo]:
        return dict(self._brokers)

    def set_brokers(self, brokers: dict[int, BrokerInfo]) -> None:
        self._brokers = dict(brokers)

    # -- topics -------------------------------------------------------------------------------
    def topics(self) -> dict[str, TopicInfo]:
        return dict(self._topics)

    def topic(self, name: str) -> TopicInfo | None:
        return self._topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self._by_id.get(topic_id)

    def put_topic(self, info: TopicInfo) -> None:
        old = self._topics.get(info.name)
        if old is not None and old.topic_id != info.topic_id:
            self.remove_topic(info.name)
        self._topics[info.name] = self._by_id[info.topic_id] = info

    def remove_topic(self, name: str) -> TopicInfo | None:
        info = self._topics.pop(name, None)
        if info is not None:
            self._by_id.pop(info.topic_id, None)
            for partition in info.assignment:
                tp = TopicPartition(name, partition)
                self._states.pop(tp, None)
                self._state_versions.pop(tp, None)
        return info

    # -- partition states ---------------------------------------------------------------------
    def partition_state(self, tp: TopicPartition) -> PartitionState | None:
        return self._states.get(tp)

    def partition_state_version(self, tp: TopicPartition) -> int | None:
        """The state znode's version the cached state was read at (for conditional ISR writes)."""
        return self._state_versions.get(tp)

    def set_partition_state(self, tp: TopicPartition, state: PartitionState | None,
                            version: int = -1) -> None:
        if state is None or tp.topic not in self._topics:
            self._states.pop(tp, None)
            self._state_versions.pop(tp, None)
            return
        self._states[tp] = state
        self._state_versions[tp] = version

    # -- writes, through to the backing store (they block) -------------------------------------
    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        self.backing_store.set_topic_configs(name, configs)
        info = self._topics.get(name)
        if info is not None:
            self.put_topic(TopicInfo(info.name, info.topic_id, info.assignment, dict(configs)))

    def claim_producer_id_block(self, size: int) -> int:
        return self.backing_store.claim_producer_id_block(size)
