"""DeleteRecords (api key 21), v0-2: move partitions' log start offsets up.

Per partition, as Kafka's ReplicaManager.deleteRecords: offset -1 means the high watermark; an
offset below -1 or above the high watermark is OFFSET_OUT_OF_RANGE; a compact-only topic is
POLICY_VIOLATION (an empty cleanup.policy, KAFKA-19112, leaves DeleteRecords the one way to
move its start); only the leader deletes
(NOT_LEADER_OR_FOLLOWER); unknown partitions are UNKNOWN_TOPIC_OR_PARTITION. The answer's
low_watermark is the new log start offset (-1 with an error).

On one node the answer is immediate. (Kafka waits in a purgatory until every replica's log start
offset has moved; followers here learn the new start from their next fetch.)
"""

from __future__ import annotations

from logbroker.errors import KafkaError, PolicyViolationError
from logbroker.security.acl import AclOperation
from logbroker.server.apis.offset_for_leader_epoch import hosted_partition
from logbroker.server.authorization import require_topic
from logbroker.types import TopicPartition

API_KEY = 21


def handle(broker, request) -> dict:
    topics = []
    for topic in request.body.topics:
        partitions = []
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            entry = {"partition_index": p.partition_index, "low_watermark": -1, "error_code": 0}
            try:
                require_topic(broker, request, AclOperation.DELETE, topic.name)
                partition = hosted_partition(broker, tp)
                partition.require_leader()
                config = partition.log.config
                if config.compact and not config.delete:  # an empty policy allows it (KAFKA-19112)
                    raise PolicyViolationError(
                        f"Records of partition {tp} can not be deleted due to the configured policy")
                entry["low_watermark"] = broker.replica_manager.delete_records(tp, p.offset)
            except KafkaError as exc:
                entry["error_code"] = exc.code
            partitions.append(entry)
        topics.append({"name": topic.name, "partitions": partitions})
    return {"topics": topics}
