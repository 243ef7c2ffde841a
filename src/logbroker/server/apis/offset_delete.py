"""OffsetDelete (api key 47), v0: delete a group's committed offsets of some partitions.

GROUP_ID_NOT_FOUND for an unknown group; NON_EMPTY_GROUP for a non-empty group that is not a
"consumer" group; per partition GROUP_SUBSCRIBED_TO_TOPIC while a member subscribes to its topic.
Deleting an offset that was never committed succeeds.
"""

from __future__ import annotations

from logbroker.errors import KafkaError, TopicAuthorizationFailedError, UnknownTopicOrPartitionError
from logbroker.security.acl import AclOperation
from logbroker.server.authorization import TOPIC, allowed_names, require_group
from logbroker.types import TopicPartition

API_KEY = 47


async def handle(broker, request) -> dict:
    body = request.body
    codes: dict[TopicPartition, int] = {}
    wanted = []
    readable = allowed_names(broker, request, AclOperation.READ, TOPIC, (t.name for t in body.topics))
    for topic in body.topics:
        info = broker.store.topic(topic.name)
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            if topic.name not in readable:
                codes[tp] = TopicAuthorizationFailedError.code
            elif info is None or not 0 <= p.partition_index < info.num_partitions:
                codes[tp] = UnknownTopicOrPartitionError.code
            else:
                wanted.append(tp)
    try:
        require_group(broker, request, AclOperation.DELETE, body.group_id)
        results = await broker.group_coordinator.delete_offsets(body.group_id, wanted)
    except KafkaError as exc:
        return {"error_code": exc.code, "topics": []}
    for tp, error in results.items():
        codes[tp] = 0 if error is None else error.code
    return {"error_code": 0,
            "topics": [{"name": t.name, "partitions": [{"partition_index": p.partition_index,
                                                        "error_code": codes[TopicPartition(t.name, p.partition_index)]}
                                                       for p in t.partitions]}
                       for t in body.topics]}
