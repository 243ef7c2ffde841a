"""WriteShareGroupState (api key 85), v0-1: a share-partition leader stores the state of a
share-partition with its share coordinator (inter-broker, KIP-932), answered once the
`__share_group_state` record is replicated. An older state epoch is FENCED_STATE_EPOCH."""

from __future__ import annotations

from logbroker.coordinator.share_partition import StateBatch
from logbroker.coordinator.share_state_log import SharePartitionKey, ShareSnapshot
from logbroker.errors import KafkaError
from logbroker.security.acl import AclOperation
from logbroker.server.authorization import require_cluster

API_KEY = 85


async def handle(broker, request) -> dict:
    body = request.body
    results = []
    for t in body.topics:
        partitions = []
        for p in t.partitions:
            try:
                require_cluster(broker, request, AclOperation.CLUSTER_ACTION)
                await broker.share_coordinator.write_state(
                    SharePartitionKey(body.group_id, t.topic_id, p.partition),
                    ShareSnapshot(0, p.state_epoch, p.leader_epoch, p.start_offset, tuple(
                        StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                        for b in p.state_batches)))
            except KafkaError as exc:
                partitions.append({"partition": p.partition, "error_code": exc.code, "error_message": str(exc) or None})
                continue
            partitions.append({"partition": p.partition, "error_code": 0})
        results.append({"topic_id": t.topic_id, "partitions": partitions})
    return {"results": results}
