"""DeleteShareGroupState (api key 86), v0: forget the state of share-partitions (inter-broker,
KIP-932: DeleteShareGroupOffsets and DeleteGroups of a share group). A tombstone is appended to
`__share_group_state` before the answer."""

from __future__ import annotations

from logbroker.coordinator.share_state_log import SharePartitionKey
from logbroker.errors import KafkaError
from logbroker.security.acl import AclOperation
from logbroker.server.authorization import require_cluster

API_KEY = 86


async def handle(broker, request) -> dict:
    body = request.body
    results = []
    for t in body.topics:
        partitions = []
        for p in t.partitions:
            try:
                require_cluster(broker, request, AclOperation.CLUSTER_ACTION)
                await broker.share_coordinator.delete_state(SharePartitionKey(body.group_id, t.topic_id, p.partition))
            except KafkaError as exc:
                partitions.append({"partition": p.partition, "error_code": exc.code, "error_message": str(exc) or None})
                continue
            partitions.append({"partition": p.partition, "error_code": 0})
        results.append({"topic_id": t.topic_id, "partitions": partitions})
    return {"results": results}
