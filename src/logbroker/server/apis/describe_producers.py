"""DescribeProducers (api key 61), v0: the active producers of partitions this broker leads, from
their producer state (Kafka's ReplicaManager.activeProducerState): producer id and epoch, last
sequence and timestamp, coordinator epoch and the first offset of the open transaction (-1).

Per partition: TOPIC_AUTHORIZATION_FAILED without DESCRIBE on the topic,
UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER (hosted elsewhere, or here as a follower).
"""

from __future__ import annotations

from logbroker.errors import KafkaError
from logbroker.security.acl import AclOperation
from logbroker.server.apis.offset_for_leader_epoch import hosted_partition
from logbroker.server.authorization import require_topic
from logbroker.types import TopicPartition

API_KEY = 61


def handle(broker, request) -> dict:
    topics = []
    for topic in request.body.topics:
        partitions = []
        for index in topic.partition_indexes:
            try:
                require_topic(broker, request, AclOperation.DESCRIBE, topic.name)
                partition = hosted_partition(broker, TopicPartition(topic.name, index))
                partition.require_leader()
                producers = partition.log.producer_state.active_producers
                partitions.append({"partition_index": index, "error_code": 0, "error_message": None,
                                   "active_producers": [_producer(e) for _, e in sorted(producers.items())]})
            except KafkaError as exc:
                partitions.append({"partition_index": index, "error_code": exc.code,
                                   "error_message": str(exc) or None, "active_producers": []})
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}


def _producer(entry) -> dict:
    return {"producer_id": entry.producer_id, "producer_epoch": entry.producer_epoch,
            "last_sequence": entry.last_seq, "last_timestamp": entry.last_timestamp,
            "coordinator_epoch": entry.coordinator_epoch,
            "current_txn_start_offset": entry.current_txn_first_offset}
