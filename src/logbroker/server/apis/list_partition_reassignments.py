"""ListPartitionReassignments (api key 46), v0: the partition reassignments in progress.

As Kafka 3.9 in ZooKeeper mode: answered by the controller only (NOT_CONTROLLER elsewhere), and it
needs DESCRIBE on the cluster (else CLUSTER_AUTHORIZATION_FAILED). For each partition under
reassignment: its full replica set (original and target), and the replicas being added and
removed; `topics` null lists every one, otherwise only the partitions named (an unknown one is
simply absent). A single node never has a reassignment in progress.
"""

from __future__ import annotations

from logbroker.errors import ClusterAuthorizationFailedError, NotControllerError
from logbroker.security.acl import AclOperation
from logbroker.server.apis._partition_results import by_topic
from logbroker.server.authorization import cluster_allowed
from logbroker.types import TopicPartition

API_KEY = 46


async def handle(broker, request) -> dict:
    body = request.body
    if not cluster_allowed(broker, request, AclOperation.DESCRIBE):
        return {"error_code": ClusterAuthorizationFailedError.code, "topics": [],
                "error_message": "Not authorized to list reassignments (needs DESCRIBE on the cluster)."}
    wanted = None if body.topics is None else [
        TopicPartition(t.name, p) for t in body.topics for p in t.partition_indexes]
    if broker.cluster is None:
        return {"error_code": 0, "error_message": None, "topics": []}
    try:
        ongoing = await broker.cluster.run_on_worker(broker.cluster.reassignments.ongoing, wanted)
    except NotControllerError as exc:
        return {"error_code": exc.code, "error_message": str(exc), "topics": []}
    topics = by_topic(ongoing, lambda partition, assignment: {
        "partition_index": partition, "replicas": list(assignment.replicas),
        "adding_replicas": list(assignment.adding), "removing_replicas": list(assignment.removing)})
    return {"error_code": 0, "error_message": None,
            "topics": [{"name": name, "partitions": partitions} for name, partitions in topics.items()]}
