"""WriteTxnMarkers (api key 27), v1-2: the transaction coordinator asks each partition leader to
write a COMMIT or ABORT marker for a producer (ReplicaManager.write_txn_markers does the
appending and the acks=-1 wait).

Inter-broker: the sender needs CLUSTER_ACTION on the cluster when an authorizer is on (else every
partition gets CLUSTER_AUTHORIZATION_FAILED, as Kafka). Per partition: UNKNOWN_TOPIC_OR_PARTITION,
NOT_LEADER_OR_FOLLOWER, INVALID_PRODUCER_EPOCH (a marker from an older producer epoch),
TRANSACTION_COORDINATOR_FENCED (an older coordinator epoch), NOT_ENOUGH_REPLICAS,
REQUEST_TIMED_OUT. The markers of one request are written concurrently and answered together.
"""

from __future__ import annotations

import asyncio

from logbroker.errors import ClusterAuthorizationFailedError, KafkaError
from logbroker.security.acl import AclOperation
from logbroker.server.authorization import cluster_allowed
from logbroker.types import TopicPartition

API_KEY = 27
DEFAULT_TIMEOUT_MS = 30_000  # Kafka waits request.timeout.ms for the markers' replication


async def handle(broker, request) -> dict:
    markers = request.body.markers
    if not cluster_allowed(broker, request, AclOperation.CLUSTER_ACTION):
        code = ClusterAuthorizationFailedError.code
        return {"markers": [_result(m, lambda tp: code) for m in markers]}
    timeout_ms = getattr(broker.config, "request_timeout_ms", None) or DEFAULT_TIMEOUT_MS
    outcomes = await asyncio.gather(*(broker.replica_manager.write_txn_markers(
        producer_id=m.producer_id, producer_epoch=m.producer_epoch,
        coordinator_epoch=m.coordinator_epoch, commit=m.transaction_result,
        partitions=[TopicPartition(t.name, p) for t in m.topics for p in t.partition_indexes],
        timeout_ms=timeout_ms) for m in markers))
    return {"markers": [_result(m, lambda tp, errors=errors: _code(errors.get(tp)))
                        for m, errors in zip(markers, outcomes)]}


def _code(error: KafkaError | None) -> int:
    return 0 if error is None else error.code


def _result(marker, code_of) -> dict:
    return {"producer_id": marker.producer_id, "topics": [
        {"name": t.name, "partitions": [
            {"partition_index": p, "error_code": code_of(TopicPartition(t.name, p))}
            for p in t.partition_indexes]}
        for t in marker.topics]}
