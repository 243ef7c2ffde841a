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

A tiered partition whose remote segments this broker knows (it leads the partition, or follows
it and read the store) also carries its remote log — bytes, segments, offsets — in the tagged
field protocol/responses/describe_log_dirs.py describes; Kafka's clients skip it.
"""

from __future__ import annotations

from logbroker.errors import ClusterAuthorizationFailedError
from logbroker.protocol.responses.describe_log_dirs import (
    LogDirPartition,
    LogDirResult,
    LogDirTopic,
    RemoteLogInfo,
    encode_describe_log_dirs_response,
)
from logbroker.security.acl import AclOperation
from logbroker.server.authorization import cluster_allowed
from logbroker.server.client_quotas import throttle_request
from logbroker.server.log_dirs import describe_log_dirs

API_KEY = 35


def handle(broker, request) -> list[bytes]:
    body = request.body
    if not cluster_allowed(broker, request, AclOperation.DESCRIBE):
        return _respond(broker, request, ClusterAuthorizationFailedError.code, [])
    wanted = None if body.topics is None else {t.topic: set(t.partitions) for t in body.topics}
    rlm = broker.replica_manager.remote_log_manager
    results = []
    for d in describe_log_dirs(broker, wanted):
        topics: dict[str, list[LogDirPartition]] = {}
        for r in d.replicas:
            topics.setdefault(r.topic_partition.topic, []).append(LogDirPartition(
                r.topic_partition.partition, r.size_bytes, r.offset_lag, r.is_future,
                None if r.is_future or rlm is None else remote_log_info(rlm, r.topic_partition)))
        results.append(LogDirResult(d.error_code, str(d.path),
                                    [LogDirTopic(name, partitions) for name, partitions in sorted(topics.items())],
                                    d.total_bytes, d.usable_bytes))
    return _respond(broker, request, 0, results)


def remote_log_info(rlm, tp) -> RemoteLogInfo | None:
    """What the remote store holds of `tp` as this broker knows it; None when it does not (not a
    tiered partition here, or its segment metadata not read yet)."""
    state = rlm.states.get(tp)
    if state is None or not state.loaded:
        return None
    if not state.segments:
        return RemoteLogInfo(0, 0, -1, -1)
    start = state.earliest_offset()
    return RemoteLogInfo(state.size_in_bytes, len(state.segments), start, state.highest_offset)


def _respond(broker, request, error_code: int, results: list[LogDirResult]) -> list[bytes]:
    return encode_describe_log_dirs_response(
        request.api_version, request.correlation_id, throttle_time_ms=throttle_request(broker, request),
        error_code=error_code, results=results)
