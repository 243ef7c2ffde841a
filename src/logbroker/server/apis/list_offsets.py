"""ListOffsets (api key 2), v1-10: -1 latest (the high watermark; the last stable offset under
read_committed), -2 earliest (the log start), -3 the max timestamp (v7), else the first offset
whose timestamp is at least the one asked for, or -1/-1 when there is none (clients.md 12).

Tiered storage (KIP-405) is not implemented, and the answers are Kafka's for a topic without it:
-4 earliest local timestamp (v8) is the log start offset, like -2; -5 latest tiered timestamp
(v9, KIP-1005) is offset -1, timestamp -1, leader epoch -1; v10's timeout_ms, for reads from
remote storage, has nothing to wait for."""

from __future__ import annotations

from logbroker.errors import KafkaError
from logbroker.protocol.responses.list_offsets import (
    ListOffsetsPartitionResult,
    ListOffsetsTopicResult,
    encode_list_offsets_response,
)
from logbroker.security.acl import AclOperation
from logbroker.server.authorization import require_topic
from logbroker.types import TopicPartition

API_KEY = 2


def handle(broker, request):
    body = request.body
    only_committed = body.replica_id < 0
    topics = []
    for topic in body.topics:
        partitions = []
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            try:
                require_topic(broker, request, AclOperation.DESCRIBE, topic.name)
                found = broker.replica_manager.fetch_offset_for_timestamp(
                    tp, p.timestamp, current_leader_epoch=getattr(p, "current_leader_epoch", -1),
                    only_committed=only_committed,
                    isolation_level=getattr(body, "isolation_level", 0))
            except KafkaError as exc:
                partitions.append(ListOffsetsPartitionResult(p.partition_index, exc.code))
                continue
            if found is None:
                partitions.append(ListOffsetsPartitionResult(p.partition_index))
            else:
                partitions.append(ListOffsetsPartitionResult(
                    p.partition_index, 0, found.timestamp, found.offset,
                    -1 if found.leader_epoch is None else found.leader_epoch))
        topics.append(ListOffsetsTopicResult(topic.name, partitions))
    return [encode_list_offsets_response(request.api_version, request.correlation_id, topics)]
