"""AlterShareGroupOffsets (api key 91), v0: move share-partitions' start offsets (KIP-932;
kafka-share-groups.sh --reset-offsets). The group must have no members (NON_EMPTY_GROUP)."""

from __future__ import annotations

from logbroker.errors import KafkaError
from logbroker.security.acl import AclOperation
from logbroker.server.apis.describe_share_group_offsets import _topic_id
from logbroker.server.authorization import require_group
from logbroker.types import TopicPartition

API_KEY = 91


async def handle(broker, request) -> dict:
    body = request.body
    try:
        require_group(broker, request, AclOperation.READ, body.group_id)
        broker.group_coordinator.check_group(body.group_id)
        results = await broker.share_group_offsets.alter(body.group_id, {
            TopicPartition(t.topic_name, p.partition_index): p.start_offset for t in body.topics for p in t.partitions})
    except KafkaError as exc:
        return {"error_code": exc.code, "error_message": str(exc) or None, "responses": []}
    responses = []
    for t in body.topics:
        partitions = []
        for p in t.partitions:
            error = results.get(TopicPartition(t.topic_name, p.partition_index))
            partitions.append({"partition_index": p.partition_index, "error_code": error.code if error else 0,
                               "error_message": str(error) if error else None})
        responses.append({"topic_name": t.topic_name, "topic_id": _topic_id(broker, t.topic_name),
                          "partitions": partitions})
    return {"error_code": 0, "responses": responses}
