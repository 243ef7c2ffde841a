"""Assembling KIP-932 share groups into a broker: which object serves which part.

- ShareCoordinator (coordinator/share_coordinator.py): share-partition state in
  `__share_group_state`, for the keys whose state partition this broker leads.
- SharePersister: the way a share-partition leader reaches that state, locally or by RPC.
- ShareGroupManager (coordinator/share_group.py, in the group coordinator): membership of the
  share groups whose `__consumer_offsets` partition this broker leads.
- SharePartitionManager: ShareFetch / ShareAcknowledge on the partitions this broker leads.
- ShareGroupOffsets, with a PartitionMetadataClient for the end offsets of partitions led
  elsewhere: the share-group offset APIs.

The broker starts these on first use (Broker.share_groups): the first share-group request, or
leading a partition of `__share_group_state` (at start, or later when another broker created
it) — whose state other brokers' share-partition leaders read. A broker never used by share
groups does not import them (~25 ms of start and ~3 MiB). Until then nothing is owed:
no share session, no share-partition, and no state partition led here.
"""

from __future__ import annotations

from dataclasses import dataclass

from logbroker.client import PLAINTEXT, BrokerConnections
from logbroker.coordinator.partition_metadata_client import PartitionMetadataClient
from logbroker.coordinator.share_coordinator import ShareCoordinator
from logbroker.coordinator.share_group_offsets import ShareGroupOffsets
from logbroker.coordinator.share_partition_manager import SharePartitionManager
from logbroker.coordinator.share_persister import SharePersister
from logbroker.server import group_configs


@dataclass(frozen=True, slots=True)
class ShareGroups:
    coordinator: ShareCoordinator
    persister: SharePersister
    partition_manager: SharePartitionManager
    offsets: ShareGroupOffsets


def start_share_groups(broker) -> ShareGroups:
    """Make the parts and load every `__share_group_state` partition led here (blocks on disk:
    the state topic is small and compacted). The broker forwards later leadership changes of
    that topic to `coordinator.on_leadership_change`. Event loop only."""
    live_brokers = (lambda: len(broker.store.brokers())) if broker.zk is not None else None
    coordinator = ShareCoordinator(
        config=broker.config, replica_manager=broker.replica_manager, store=broker.store,
        create_topic=broker.create_topic, clock=broker.clock, live_brokers=live_brokers)
    coordinator.load()
    persister = SharePersister(
        broker_id=broker.broker_id, coordinator=coordinator, endpoint=broker._broker_address,
        security=broker.inter_broker_security or PLAINTEXT, request_timeout_ms=broker.config.request_timeout_ms,
        clock=broker.clock)
    manager = SharePartitionManager(
        config=broker.config, replica_manager=broker.replica_manager, persister=persister,
        clock=broker.clock, topic_id_of=lambda topic: broker.store.topic(topic).topic_id,
        group_config=lambda group_id, key: group_configs.effective(broker, group_id, key))
    broker.replica_manager.leadership_listeners.append(manager.on_leadership_change)
    broker.group_coordinator.share_member_listeners.append(manager.on_member_removed)
    partition_metadata = PartitionMetadataClient(
        broker_id=broker.broker_id, replica_manager=broker.replica_manager, store=broker.store,
        connections=BrokerConnections(endpoint=broker._broker_address, client_id=f"broker-{broker.broker_id}-lag",
                                      security=broker.inter_broker_security or PLAINTEXT,
                                      timeout_ms=broker.config.request_timeout_ms))
    offsets = ShareGroupOffsets(coordinator=broker.group_coordinator, manager=manager, store=broker.store,
                                partition_metadata=partition_metadata)
    return ShareGroups(coordinator, persister, manager, offsets)
