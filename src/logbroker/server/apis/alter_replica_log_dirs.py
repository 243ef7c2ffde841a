"""AlterReplicaLogDirs (api key 34), v1-2: move replicas of this broker to other log dirs.

As Kafka's ReplicaManager.alterReplicaLogDirs: ALTER on the cluster (else every partition
CLUSTER_AUTHORIZATION_FAILED). Per partition: LOG_DIR_NOT_FOUND for a path that is not one of
this broker's log dirs, KAFKA_STORAGE_ERROR for a failed dir or a replica in one,
INVALID_TOPIC_EXCEPTION when the future dir's name would pass 255 bytes, REPLICA_NOT_AVAILABLE
when this broker has no replica of it (its log is then created in that dir when it comes);
otherwise NONE, and the replica moves in the background (server/replica_log_dir_mover.py) — at once if it is already
there. DescribeLogDirs shows the move as a future replica until it is done.
"""

from __future__ import annotations

from logbroker.errors import (
    ClusterAuthorizationFailedError,
    InvalidTopicError,
    KafkaError,
    KafkaStorageError,
    LogDirNotFoundError,
)
from logbroker.security.acl import AclOperation
from logbroker.server.authorization import cluster_allowed
from logbroker.server.log_dirs import online_dir_stat
from logbroker.storage.future_logs import future_dir_name
from logbroker.types import TopicPartition

API_KEY = 34


def handle(broker, request) -> dict:
    authorized = cluster_allowed(broker, request, AclOperation.ALTER)
    results: dict[str, list[dict]] = {}
    for target in request.body.dirs:
        for topic in target.topics:
            for index in topic.partitions:
                code = (_move(broker, TopicPartition(topic.name, index), target.path) if authorized
                        else ClusterAuthorizationFailedError.code)
                results.setdefault(topic.name, []).append({"partition_index": index, "error_code": code})
    return {"throttle_time": 0, "results": [{"topic_name": name, "partitions": partitions}
                                            for name, partitions in results.items()]}


def _move(broker, tp: TopicPartition, path: str) -> int:
    try:
        if len(future_dir_name(tp).encode()) > 255:
            raise InvalidTopicError(f"The topic name {tp.topic!r} is too long to move its replicas")
        log_dir = broker.log_manager.log_dir_of(path)
        if log_dir is None:
            raise LogDirNotFoundError(f"Log dir {path} is not one of this broker's log.dirs")
        online_dir_stat(broker.log_manager, log_dir)
        if broker.log_manager.is_offline(tp):
            raise KafkaStorageError(f"The replica of {tp} is in an offline log dir")
        broker.replica_log_dir_mover.move(tp, log_dir)
        return 0
    except KafkaError as exc:
        return exc.code
