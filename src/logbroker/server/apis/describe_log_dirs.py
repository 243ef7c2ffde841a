"""DescribeLogDirs (api key 35), v1-4: this broker's log dirs, what each holds and how full it is.

As Kafka's ReplicaManager.describeLogDirs: it needs DESCRIBE on the cluster (else, from v3, the
top-level CLUSTER_AUTHORIZATION_FAILED; before v3 simply no dirs). For each configured dir: its
absolute path, the partitions asked for (`topics` null: every one) with their size in bytes
(every segment's `.log` file) and offset lag, and, from v4, the file system's total and usable
bytes. A partition being moved here by AlterReplicaLogDirs is listed in its target dir too, as a
future replica (`is_future_key`), whose lag is how far it trails the current replica's log end;
the current replica's lag is how far its log end trails the high watermark (a follower catching
up), never negative. A dir that failed (an I/O error took it offline) or that the broker cannot
read answers KAFKA_STORAGE_ERROR with no partitions and -1 bytes.
"""

from __future__ import annotations

from logbroker.errors import ClusterAuthorizationFailedError
from logbroker.security.acl import AclOperation
from logbroker.server.authorization import cluster_allowed
from logbroker.server.log_dirs import describe_log_dirs

API_KEY = 35


def handle(broker, request) -> dict:
    body = request.body
    if not cluster_allowed(broker, request, AclOperation.DESCRIBE):
        return {"throttle_time": 0, "error_code": ClusterAuthorizationFailedError.code, "results": []}
    wanted = None if body.topics is None else {t.topic: set(t.partitions) for t in body.topics}
    results = []
    for d in describe_log_dirs(broker, wanted):
        topics: dict[str, list[dict]] = {}
        for r in d.replicas:
            topics.setdefault(r.topic_partition.topic, []).append({
                "partition_index": r.topic_partition.partition, "partition_size": r.size_bytes,
                "offset_lag": r.offset_lag, "is_future_key": r.is_future})
        results.append({"error_code": d.error_code, "log_dir": str(d.path),
                        "topics": [{"name": name, "partitions": partitions}
                                   for name, partitions in sorted(topics.items())],
                        "total_bytes": d.total_bytes, "usable_bytes": d.usable_bytes})
    return {"throttle_time": 0, "error_code": 0, "results": results}
