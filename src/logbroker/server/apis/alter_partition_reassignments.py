"""AlterPartitionReassignments (api key 45), v0-1: move partitions to new replicas, or cancel a move.

As Kafka 3.9 in ZooKeeper mode (KafkaController.alterPartitionReassignments): only the controller
answers — elsewhere the top-level error is NOT_CONTROLLER, and clients send the request to the
controller named in Metadata — and it needs ALTER on the cluster (else CLUSTER_AUTHORIZATION_FAILED).
A partition's `replicas` is the target replica list, or null to cancel its reassignment
(NO_REASSIGNMENT_IN_PROGRESS when there is none). Per partition: UNKNOWN_TOPIC_OR_PARTITION,
INVALID_REPLICA_ASSIGNMENT (empty, duplicate or unknown brokers). The answer comes once the
reassignment has started; ListPartitionReassignments shows its progress
(server/partition_reassignment.py). A single node has no other broker to move replicas to, so
only its own replica list is a valid target. v1 (KIP-860): with allow_replication_factor_change
false, a target whose size differs from the partition's replica count is
INVALID_REPLICATION_FACTOR, and the answer echoes the flag.
"""

from __future__ import annotations

from logbroker.errors import (
    ClusterAuthorizationFailedError,
    InvalidReplicationFactorError,
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
    allow_rf_change = getattr(request.body, "allow_replication_factor_change", True)
    refused = {} if allow_rf_change else _replication_factor_changes(broker, requested)
    for tp in refused:
        del requested[tp]
    if broker.cluster is None:
        results = {tp: _single_node(broker, tp, target) for tp, target in requested.items()}
    else:
        try:
            results = await broker.cluster.run_on_worker(broker.cluster.reassignments.alter, requested)
        except NotControllerError as exc:
            return {"error_code": exc.code, "error_message": str(exc), "responses": [],
                    "allow_replication_factor_change": allow_rf_change}
    topics = by_topic(results | refused,
                      lambda partition, error: {"partition_index": partition, **error_fields(error)})
    return {"error_code": 0, "error_message": None, "allow_replication_factor_change": allow_rf_change,
            "responses": [{"name": name, "partitions": partitions} for name, partitions in topics.items()]}


def _replication_factor_changes(broker, requested: dict[TopicPartition, tuple[int, ...] | None]
                                ) -> dict[TopicPartition, KafkaError]:
    """The targets that would change their partition's replica count (the metadata cache's, which
    during a reassignment includes the replicas being added)."""
    refused = {}
    for tp, target in requested.items():
        info = broker.store.topic(tp.topic)
        current = info.assignment.get(tp.partition) if info is not None else None
        if target is not None and current is not None and len(target) != len(current):
            refused[tp] = InvalidReplicationFactorError(
                f"The replication factor is changed from {len(current)} to {len(target)} but "
                f"allowReplicationFactorChange is false")
    return refused


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
