"""AlterPartitionReassignments (api key 45), v0: move partitions to new replicas, or cancel a move.

As Kafka 3.9 in ZooKeeper mode (KafkaController.alterPartitionReassignments): only the controller
answers — elsewhere the top-level error is NOT_CONTROLLER, and clients send the request to the
controller named in Metadata — and it needs ALTER on the cluster (else CLUSTER_AUTHORIZATION_FAILED).
A partition's `replicas` is the target replica list, or null to cancel its reassignment
(NO_REASSIGNMENT_IN_PROGRESS when there is none). Per partition: UNKNOWN_TOPIC_OR_PARTITION,
INVALID_REPLICA_ASSIGNMENT (empty, duplicate or unknown brokers). The answer comes once the
reassignment has started; ListPartitionReassignments shows its progress
(server/partition_reassignment.py). A single node has no other broker to move replicas to, so
only its own replica list is a valid target.
"""

from __future__ import annotations

from logbroker.errors import (
    ClusterAuthorizationFailedError,
    KafkaError,
    NoReassignmentInProgressError,
    NotControllerError,
    UnknownTopicOrPartitionError,
)
from logbroker.metadata.reassignment import validate_target
from logbroker.security.acl import AclOperation
from logbroker.server.apis._partition_results import by_topic, error_fields
from logbroker.server.authorization import cluster_allowed
from logbroker.types import TopicPartition

API_KEY = 45


async def handle(broker, request) -> dict:
    if not cluster_allowed(broker, request, AclOperation.ALTER):
        return {"error_code": ClusterAuthorizationFailedError.code, "responses": [],
                "error_message": "Not authorized to reassign partitions (needs ALTER on the cluster)."}
    requested = {TopicPartition(t.name, p.partition_index): None if p.replicas is None else tuple(p.replicas)
                 for t in request.body.topics for p in t.partitions}
    if broker.cluster is None:
        results = {tp: _single_node(broker, tp, target) for tp, target in requested.items()}
    else:
        try:
            results = await broker.cluster.run_on_worker(broker.cluster.reassignments.alter, requested)
        except NotControllerError as exc:
            return {"error_code": exc.code, "error_message": str(exc), "responses": []}
    topics = by_topic(results, lambda partition, error: {"partition_index": partition, **error_fields(error)})
    return {"error_code": 0, "error_message": None,
            "responses": [{"name": name, "partitions": partitions} for name, partitions in topics.items()]}


def _single_node(broker, tp: TopicPartition, target: tuple[int, ...] | None) -> KafkaError | None:
    info = broker.store.topic(tp.topic)
    if info is None or tp.partition not in info.assignment:
        return UnknownTopicOrPartitionError("The partition does not exist.")
    if target is None:
        return NoReassignmentInProgressError(f"No reassignment of {tp} is in progress to cancel.")
    try:
        validate_target(target, [broker.broker_id])
    except KafkaError as exc:
        return exc
    return None
