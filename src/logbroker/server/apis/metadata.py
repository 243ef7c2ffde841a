"""Metadata (api key 3): brokers, cluster id, controller, and each topic's partitions.

Unknown topics are created here when the request allows it and auto.create.topics.enable is on
(KAFKA-NOTES 14). v0 treats an empty topic list as "all topics"; v1+ uses null for that.
"""

from __future__ import annotations

import uuid

from logbroker.errors import KafkaError, LeaderNotAvailableError, UnknownTopicOrPartitionError
from logbroker.metadata.model import TopicInfo
from logbroker.types import TopicPartition

API_KEY = 3
NO_AUTHORIZED_OPERATIONS = -2147483648


def handle(broker, request) -> dict:
    body = request.body
    store = broker.store
    if body.topics is None or (request.api_version == 0 and not body.topics):
        names = sorted(store.topics())
    else:
        names = [t.name for t in body.topics]
    allow_auto_create = getattr(body, "allow_auto_topic_creation", True) and broker.config.auto_create_topics_enable
    topics = []
    for name in names:
        info = store.topic(name)
        try:
            if info is None:
                if not allow_auto_create:
                    raise UnknownTopicOrPartitionError(f"Topic {name} does not exist")
                info = auto_create_topic(broker, name)
        except KafkaError as exc:
            topics.append({"error_code": exc.code, "name": name, "topic_id": uuid.UUID(int=0),
                           "topic_authorized_operations": NO_AUTHORIZED_OPERATIONS})
            continue
        topics.append(describe_topic(broker, info))
    listener_brokers = [{"node_id": b.broker_id, "host": b.host, "port": b.port, "rack": b.rack}
                        for b in broker.brokers()]
    return {"brokers": listener_brokers, "cluster_id": broker.cluster_id,
            "controller_id": broker.broker_id, "topics": topics,
            "cluster_authorized_operations": NO_AUTHORIZED_OPERATIONS}


def auto_create_topic(broker, name: str) -> TopicInfo:
    config = broker.config
    return broker.create_topic(name, num_partitions=config.num_partitions,
                               replication_factor=config.default_replication_factor, configs={})


def describe_topic(broker, info: TopicInfo) -> dict:
    partitions = []
    for partition, replicas in sorted(info.assignment.items()):
        state = broker.store.partition_state(TopicPartition(info.name, partition))
        leader = state.leader if state else -1
        partitions.append({
            "error_code": LeaderNotAvailableError.code if leader < 0 else 0,
            "partition_index": partition,
            "leader_id": leader,
            "leader_epoch": state.leader_epoch if state else -1,
            "replica_nodes": list(replicas),
            "isr_nodes": list(state.isr) if state else [],
            "offline_replicas": [r for r in replicas if r not in broker.controller.live_brokers],
        })
    return {"error_code": 0, "name": info.name, "topic_id": info.topic_id,
            "is_internal": info.name.startswith("__"), "partitions": partitions,
            "topic_authorized_operations": NO_AUTHORIZED_OPERATIONS}
