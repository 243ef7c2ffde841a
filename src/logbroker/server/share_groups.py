"""Assembling KIP-932 share groups into a broker: which object serves which part.

- ShareCoordinator (coordinator/share_coordinator.py): share-partition state in
  `__share_group_state`, for the keys whose state partition this broker leads.
- SharePersister: the way a share-partition leader reaches that state, locally or by RPC.
- ShareGroupManager (coordinator/share_group.py, in the group coordinator): membership of the
  share groups whose `__consumer_offsets` partition this broker leads.
- SharePartitionManager: ShareFetch / ShareAcknowledge on the partitions this broker leads.
"""

from __future__ import annotations

from logbroker.client import PLAINTEXT
from logbroker.coordinator.share_coordinator import ShareCoordinator
from logbroker.coordinator.share_group_offsets import ShareGroupOffsets
from logbroker.coordinator.share_partition_manager import SharePartitionManager
from logbroker.coordinator.share_persister import SharePersister
from logbroker.server import group_configs

def start_share_groups(broker) -> None:
    live_brokers = (lambda: len(broker.store.brokers())) if broker.zk is not None else None
    broker.share_coordinator = ShareCoordinator(
        config=broker.config, replica_manager=broker.replica_manager, store=broker.store,
        create_topic=broker.create_topic, clock=broker.clock, live_brokers=live_brokers)
    broker.share_coordinator.load()
    broker.share_persister = SharePersister(
        broker_id=broker.broker_id, coordinator=broker.share_coordinator, endpoint=broker._broker_address,
        security=broker.inter_broker_security or PLAINTEXT, request_timeout_ms=broker.config.request_timeout_ms)
    manager = broker.share_partition_manager = SharePartitionManager(
        config=broker.config, replica_manager=broker.replica_manager, persister=broker.share_persister,
        clock=broker.clock, topic_id_of=lambda topic: broker.store.topic(topic).topic_id,
        group_config=lambda group_id, key: group_configs.effective(broker, group_id, key))
    broker.replica_manager.leadership_listeners.append(manager.on_leadership_change)

    broker.share_groups = broker.group_coordinator.share
    broker.share_groups.member_listeners.append(manager.on_member_removed)
    broker.share_group_offsets = ShareGroupOffsets(coordinator=broker.group_coordinator, manager=manager,
                                                   store=broker.store)
