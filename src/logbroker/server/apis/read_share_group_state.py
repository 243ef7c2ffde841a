"""ReadShareGroupState (api key 84), v0: a share-partition leader reads the state the share
coordinator keeps (inter-broker, KIP-932). A key never initialized answers state epoch -1 and
start offset -1; a key whose `__share_group_state` partition is not led here NOT_COORDINATOR."""

from __future__ import annotations

from logbroker.coordinator.share_state_log import SharePartitionKey
from logbroker.errors import KafkaError
from logbroker.security.acl import AclOperation
from logbroker.server.authorization import require_cluster

API_KEY = 84


def handle(broker, request) -> dict:
    body = request.body
    results = []
    for t in body.topics:
        partitions = []
        for p in t.partitions:
            try:
                require_cluster(broker, request, AclOperation.CLUSTER_ACTION)
                state = broker.share_coordinator.read_state(SharePartitionKey(body.group_id, t.topic_id, p.partition))
            except KafkaError as exc:
                partitions.append({"partition": p.partition, "error_code": exc.code, "error_message": str(exc) or None,
                                   "state_epoch": -1, "start_offset": -1, "state_batches": []})
                continue
            if state is None:
                partitions.append({"partition": p.partition, "error_code": 0, "state_epoch": -1,
                                   "start_offset": -1, "state_batches": []})
                continue
            partitions.append({"partition": p.partition, "error_code": 0, "state_epoch": state.state_epoch,
                               "start_offset": state.start_offset, "state_batches": [
                                   {"first_offset": b.first_offset, "last_offset": b.last_offset,
                                    "delivery_state": b.state, "delivery_count": b.delivery_count}
                                   for b in state.state_batches]})
        results.append({"topic_id": t.topic_id, "partitions": partitions})
    return {"results": results}
