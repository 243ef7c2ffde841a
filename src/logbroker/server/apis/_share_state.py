"""What the share-group state APIs (InitializeShareGroupState, ReadShareGroupState,
WriteShareGroupState, DeleteShareGroupState, ReadShareGroupStateSummary) have in common: a
share-partition leader asks this broker's share coordinator about (group, topic id, partition)
keys; each partition is answered on its own, with its error (CLUSTER_AUTHORIZATION_FAILED without
CLUSTER_ACTION, NOT_COORDINATOR when its `__share_group_state` partition is not led here, …)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from logbroker.coordinator.share_state_log import SharePartitionKey
from logbroker.errors import InvalidRequestError, KafkaError
from logbroker.security.acl import AclOperation
from logbroker.server.authorization import require_cluster


async def per_partition(broker, request, answer: Callable[[SharePartitionKey, object], Awaitable[dict] | dict],
                        *, on_error: dict) -> dict:
    """`answer(key, partition request)` gives a partition's fields (besides its index and
    error); `on_error` are the fields of a failed partition."""
    body = request.body
    results = []
    for t in body.topics:
        partitions = []
        for p in t.partitions:
            try:
                require_cluster(broker, request, AclOperation.CLUSTER_ACTION)
                if t.topic_id is None or not body.group_id:  # kio reads the zero UUID as None
                    raise InvalidRequestError("A share-partition key needs a group id and a topic id")
                fields = answer(SharePartitionKey(body.group_id, t.topic_id, p.partition), p)
                if not isinstance(fields, dict):
                    fields = await fields
            except KafkaError as exc:
                partitions.append({"partition": p.partition, "error_code": exc.code,
                                   "error_message": str(exc) or None, **on_error})
                continue
            partitions.append({"partition": p.partition, "error_code": 0, **fields})
        results.append({"topic_id": t.topic_id, "partitions": partitions})
    return {"results": results}
