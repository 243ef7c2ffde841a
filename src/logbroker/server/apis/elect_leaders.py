"""ElectLeaders (api key 43), v0-2: elect the preferred replica (PREFERRED) or, for partitions
without a live leader, any live replica (UNCLEAN). v0 has no election type: it is PREFERRED.

As Kafka 3.9 in ZooKeeper mode (KafkaApis.handleElectLeaders → ReplicaManager.electLeaders →
KafkaController.electLeaders): only the controller elects — on any other broker every partition
gets NOT_CONTROLLER, and clients send the request to the controller named in Metadata. Per
partition: ELECTION_NOT_NEEDED when the leader already is the one wanted,
PREFERRED_LEADER_NOT_AVAILABLE / ELIGIBLE_LEADERS_NOT_AVAILABLE when no replica qualifies,
UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION for a topic being deleted. It needs ALTER on
the cluster (else CLUSTER_AUTHORIZATION_FAILED). The answer waits
(up to the request's timeout, then REQUEST_TIMED_OUT) until this broker's metadata shows each new
leader. Asked for all partitions (null), the answer leaves out those that needed no election.

A single node leads every partition it has with its only replica: nothing ever needs an election.
"""

from __future__ import annotations

import asyncio

from logbroker.errors import (
    ClusterAuthorizationFailedError,
    ElectionNotNeededError,
    InvalidRequestError,
    KafkaError,
    NotControllerError,
    RequestTimedOutError,
    UnknownTopicOrPartitionError,
)
from logbroker.metadata.leader_election import ElectionType
from logbroker.security.acl import AclOperation
from logbroker.server.apis._partition_results import by_topic, error_fields
from logbroker.server.authorization import cluster_allowed
from logbroker.server.replica_elections import elect_leaders
from logbroker.types import TopicPartition

API_KEY = 43

# How often a waiting answer looks at the metadata cache for the elected leaders.
_POLL_S = 0.02


async def handle(broker, request) -> dict:
    body = request.body
    try:
        election_type = ElectionType(getattr(body, "election_type", ElectionType.PREFERRED))
    except ValueError:
        error = InvalidRequestError(f"Unknown election type {body.election_type}.")
        return {"error_code": error.code, "replica_election_results": []}
    requested = None if body.topic_partitions is None else [
        TopicPartition(t.topic, p) for t in body.topic_partitions for p in t.partitions]
    if not cluster_allowed(broker, request, AclOperation.ALTER):
        denied = ClusterAuthorizationFailedError(
            "Not authorized to elect leaders (needs ALTER on the cluster).")
        return {"error_code": denied.code,
                "replica_election_results": _by_topic(dict.fromkeys(requested or [], denied))}
    results = await _elect(broker, requested, election_type)
    expected = {tp: leader for tp, leader in results.items() if isinstance(leader, int)}
    await _wait_for_leaders(broker, expected, body.timeout.total_seconds())
    for tp, leader in expected.items():
        state = broker.store.partition_state(tp)
        results[tp] = None if state is not None and state.leader == leader else RequestTimedOutError(
            f"The election of broker {leader} for {tp} did not reach this broker within the timeout.")
    if requested is None:
        results = {tp: r for tp, r in results.items() if not isinstance(r, ElectionNotNeededError)}
    return {"error_code": 0, "replica_election_results": _by_topic(results)}


async def _elect(broker, requested: list[TopicPartition] | None,
                 election_type: ElectionType) -> dict[TopicPartition, int | KafkaError]:
    if broker.cluster is None:
        partitions = requested if requested is not None else _all_partitions(broker)
        return {tp: ElectionNotNeededError("Leader election not needed for topic partition.")
                if broker.store.partition_state(tp) is not None
                else UnknownTopicOrPartitionError("The partition does not exist.") for tp in partitions}
    try:
        return await broker.cluster.run_on_worker(elect_leaders, broker.zk, requested, election_type)
    except NotControllerError as exc:
        partitions = requested if requested is not None else _all_partitions(broker)
        return {tp: exc for tp in partitions}


def _all_partitions(broker) -> list[TopicPartition]:
    return [TopicPartition(name, p) for name, info in sorted(broker.store.topics().items())
            for p in sorted(info.assignment)]


async def _wait_for_leaders(broker, expected: dict[TopicPartition, int], timeout_s: float) -> None:
    """Kafka's DelayedElectLeader: until the metadata cache shows every elected leader."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while expected and loop.time() < deadline:
        if all((state := broker.store.partition_state(tp)) is not None and state.leader == leader
               for tp, leader in expected.items()):
            return
        await asyncio.sleep(_POLL_S)


def _by_topic(results: dict[TopicPartition, KafkaError | None]) -> list[dict]:
    topics = by_topic(results, lambda partition, error: {"partition_id": partition, **error_fields(error)})
    return [{"topic": topic, "partition_result": partitions} for topic, partitions in topics.items()]
