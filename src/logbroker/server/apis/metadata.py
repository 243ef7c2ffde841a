"""Metadata (api key 3): brokers, cluster id, controller, and each topic's partitions.

Unknown topics are created here when the request allows it and auto.create.topics.enable is on
(KAFKA-NOTES 14). v0 treats an empty topic list as "all topics"; v1+ uses null for that; v10+ may
name a topic by id alone. Encoded by hand (protocol/responses/metadata.py): kio takes ~1 ms for
ten topics, and clients ask often.
"""

from __future__ import annotations

import uuid

from logbroker.errors import (
    KafkaError,
    LeaderNotAvailableError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)
from logbroker.metadata.model import TopicInfo
from logbroker.protocol.responses.metadata import (
    AUTHORIZED_OPERATIONS_OMITTED,
    MetadataBroker,
    MetadataPartition,
    MetadataTopic,
    encode_metadata_response,
)
from logbroker.server.apis.describe_cluster import ALL_CLUSTER_OPERATIONS
from logbroker.types import TopicPartition

API_KEY = 3
# Without an authorizer every operation is allowed; Kafka then reports all of them when asked.
ALL_TOPIC_OPERATIONS = 3576  # READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS


def handle(broker, request):
    body = request.body
    store = broker.store
    version = request.api_version
    topic_ops = ALL_TOPIC_OPERATIONS if getattr(body, "include_topic_authorized_operations", False) \
        else AUTHORIZED_OPERATIONS_OMITTED
    cluster_ops = ALL_CLUSTER_OPERATIONS if getattr(body, "include_cluster_authorized_operations", False) \
        else AUTHORIZED_OPERATIONS_OMITTED
    if body.topics is None or (version == 0 and not body.topics):
        wanted = [(name, None) for name in sorted(store.topics())]
    else:
        wanted = [(t.name, getattr(t, "topic_id", None)) for t in body.topics]
    allow_auto_create = getattr(body, "allow_auto_topic_creation", True) and broker.config.auto_create_topics_enable
    topics = []
    for name, topic_id in wanted:
        try:
            info = _lookup(broker, name, topic_id, allow_auto_create)
        except KafkaError as exc:
            topics.append(MetadataTopic(exc.code, name, topic_id=topic_id,
                                        topic_authorized_operations=topic_ops))
            continue
        topics.append(describe_topic(broker, info, topic_ops))
    brokers = [MetadataBroker(b.broker_id, b.host, b.port, b.rack) for b in broker.brokers(getattr(request.connection, "listener_name", None))]
    return [encode_metadata_response(version, request.correlation_id, brokers=brokers, topics=topics,
                                     cluster_id=broker.cluster_id, controller_id=broker.controller_id,
                                     cluster_authorized_operations=cluster_ops)]


def _lookup(broker, name: str | None, topic_id: uuid.UUID | None, allow_auto_create: bool) -> TopicInfo:
    store = broker.store
    if not name and topic_id is not None and topic_id.int != 0:
        info = store.topic_by_id(topic_id)
        if info is not None:
            return info
        raise UnknownTopicIdError(f"Topic id {topic_id} does not exist")
    info = store.topic(name)
    if info is not None:
        return info
    if not allow_auto_create:
        raise UnknownTopicOrPartitionError(f"Topic {name} does not exist")
    config = broker.config
    return broker.create_topic(name, num_partitions=config.num_partitions,
                               replication_factor=config.default_replication_factor, configs={})


def describe_topic(broker, info: TopicInfo, topic_ops: int = AUTHORIZED_OPERATIONS_OMITTED) -> MetadataTopic:
    live = broker.controller.live_brokers
    partitions = []
    for partition, replicas in sorted(info.assignment.items()):
        state = broker.store.partition_state(TopicPartition(info.name, partition))
        leader = state.leader if state else -1
        partitions.append(MetadataPartition(
            LeaderNotAvailableError.code if leader < 0 else 0, partition, leader,
            state.leader_epoch if state else -1, list(replicas), list(state.isr) if state else [],
            [r for r in replicas if r not in live]))
    return MetadataTopic(0, info.name, partitions, info.topic_id, info.name.startswith("__"), topic_ops)
