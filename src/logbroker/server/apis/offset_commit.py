"""OffsetCommit (api key 8), v2-10: store a group's consumed positions.

Per partition, as Kafka's KafkaApis and GroupCoordinator: an unknown topic or partition is
UNKNOWN_TOPIC_OR_PARTITION, metadata longer than offset.metadata.max.bytes is
OFFSET_METADATA_TOO_LARGE; the rest are checked against the group as one (generation -1 with an
empty or unknown group is a simple consumer's commit; otherwise the member and generation must be
current: UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS, FENCED_INSTANCE_ID) and
appended to `__consumer_offsets` before the answer. Null metadata is stored as "" (Kafka's
NO_METADATA). v2-4's retention_time sets an expiry timestamp kept in memory only. For a KIP-848
consumer group the generation is the member epoch (STALE_MEMBER_EPOCH when it is not the
member's current one), and its members must commit with v9+. v10 names
topics by id (KIP-848's, for every group): an id we do not know is UNKNOWN_TOPIC_ID, and the
answer echoes each id.
"""

from __future__ import annotations

from logbroker.coordinator.offsets_schema import OffsetAndMetadata
from logbroker.errors import (
    KafkaError,
    OffsetMetadataTooLargeError,
    TopicAuthorizationFailedError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)
from logbroker.security.acl import AclOperation
from logbroker.server.apis._groups import ms
from logbroker.server.apis._topic_ids import topic_names
from logbroker.server.authorization import TOPIC, allowed_names, require_group
from logbroker.types import TopicPartition

API_KEY = 8


async def handle(broker, request) -> dict:
    body = request.body
    now_ms = broker.clock.time_ms()
    retention_ms = ms(body.retention_time) if 2 <= request.api_version <= 4 else -1
    max_metadata = broker.config.offset_metadata_max_bytes
    codes: dict[TopicPartition, int] = {}
    valid: dict[TopicPartition, OffsetAndMetadata] = {}
    names = ([t.name for t in body.topics] if request.api_version < 10
             else topic_names(broker, (t.topic_id for t in body.topics)))
    readable = allowed_names(broker, request, AclOperation.READ, TOPIC, (n for n in names if n is not None))
    for topic, name in zip(body.topics, names):
        if name is None:
            continue  # UNKNOWN_TOPIC_ID
        info = broker.store.topic(name)
        for p in topic.partitions:
            tp = TopicPartition(name, p.partition_index)
            metadata = p.committed_metadata or ""
            if name not in readable:
                codes[tp] = TopicAuthorizationFailedError.code
            elif info is None or not 0 <= p.partition_index < info.num_partitions:
                codes[tp] = UnknownTopicOrPartitionError.code
            elif len(metadata.encode()) > max_metadata:
                codes[tp] = OffsetMetadataTooLargeError.code
            else:
                valid[tp] = OffsetAndMetadata(
                    p.committed_offset, getattr(p, "committed_leader_epoch", -1), metadata, now_ms,
                    now_ms + retention_ms if retention_ms >= 0 else -1)
    try:
        require_group(broker, request, AclOperation.READ, body.group_id)
        await broker.group_coordinator.commit_offsets(
            group_id=body.group_id, member_id=body.member_id,
            group_instance_id=getattr(body, "group_instance_id", None),
            generation_id=body.generation_id_or_member_epoch, offsets=valid, api_version=request.api_version)
        group_code = 0
    except KafkaError as exc:
        group_code = exc.code
    for tp in valid:
        codes[tp] = group_code
    return {"topics": [{"name": name, "topic_id": getattr(topic, "topic_id", None),
                        "partitions": [{"partition_index": p.partition_index,
                                        "error_code": UnknownTopicIdError.code if name is None
                                        else codes[TopicPartition(name, p.partition_index)]}
                                       for p in topic.partitions]}
                       for topic, name in zip(body.topics, names)]}
