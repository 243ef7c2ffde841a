"""OffsetForLeaderEpoch (api key 23), v2-4: where a leader epoch ended in the leader's log.

KIP-101: a follower (replica_id >= 0, v3+) asks after a leader change instead of truncating to its
high watermark; KIP-320: a consumer asks to detect log truncation. Per partition, as Kafka's
Partition.lastOffsetForLeaderEpoch: first the request's current_leader_epoch is checked
(FENCED_LEADER_EPOCH when older than ours, UNKNOWN_LEADER_EPOCH when newer), then leadership
(NOT_LEADER_OR_FOLLOWER); then the leader epoch cache answers `(epoch, end offset)` — the log end
offset for the current epoch — or -1/-1 (UNDEFINED) with no error when the epoch is unknown. A
partition in no topic is UNKNOWN_TOPIC_OR_PARTITION; one that exists but is not hosted here is
NOT_LEADER_OR_FOLLOWER, so the client refreshes its metadata.
"""

from __future__ import annotations

from logbroker.errors import KafkaError, NotLeaderOrFollowerError, UnknownTopicOrPartitionError
from logbroker.security.acl import AclOperation
from logbroker.server.authorization import require_cluster, require_topic
from logbroker.storage.leader_epoch_cache import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
from logbroker.types import TopicPartition

API_KEY = 23


def handle(broker, request) -> dict:
    topics = []
    for topic in request.body.topics:
        partitions = []
        for p in topic.partitions:
            entry = {"partition": p.partition, "error_code": 0,
                     "leader_epoch": UNDEFINED_EPOCH, "end_offset": UNDEFINED_EPOCH_OFFSET}
            try:
                require_epoch_access(broker, request, topic.topic)
                partition = hosted_partition(broker, TopicPartition(topic.topic, p.partition))
                partition.check_leader_epoch(p.current_leader_epoch)
                partition.require_leader()
                found = partition.log.end_offset_for_epoch(p.leader_epoch)
            except KafkaError as exc:
                entry["error_code"] = exc.code
            else:
                if found is not None:
                    entry["leader_epoch"], entry["end_offset"] = found
            partitions.append(entry)
        topics.append({"topic": topic.topic, "partitions": partitions})
    return {"topics": topics}


def require_epoch_access(broker, request, topic: str) -> None:
    """A follower needs CLUSTER_ACTION on the cluster, a consumer DESCRIBE on the topic."""
    if broker.authorizer is None:
        return
    if getattr(request.body, "replica_id", -1) >= 0:
        require_cluster(broker, request, AclOperation.CLUSTER_ACTION)
    else:
        require_topic(broker, request, AclOperation.DESCRIBE, topic)


def hosted_partition(broker, tp: TopicPartition):
    """The Partition this broker hosts for `tp`, leader or not (Kafka's getPartitionOrError).

    Raises UnknownTopicOrPartitionError when no topic has that partition, and
    NotLeaderOrFollowerError when it exists but this broker does not host it."""
    partition = broker.replica_manager.partitions.get(tp)
    if partition is not None:
        return partition
    info = broker.store.topic(tp.topic)
    if info is not None and tp.partition in info.assignment:
        raise NotLeaderOrFollowerError(f"This broker does not host {tp}")
    raise UnknownTopicOrPartitionError(f"This server does not host {tp}")
