"""Fetch (api key 1), v4-v17: consumers read below the high watermark, followers to the log end.
From v11 a consumer may read from a follower, which a leader with replica.selector.class set may
point it to (preferred_read_replica, KIP-392; replication/replica_selector.py).
From v13 topics are named by id (clients.md 6): an id we do not know is UNKNOWN_TOPIC_ID, and the
response echoes each id as asked.

The records of each partition are a file region handed to the network layer, which sends it with
os.sendfile: the response is encoded as chunks (header bytes, region, bytes, region …) and the
record bytes are never parsed (a few KiB of small regions are copied to go out in one write with
the bytes around them: server/network.py). Sessionless: we answer session id 0, so clients send full
fetches (KIP-227 allows a broker to decline sessions).
"""

from __future__ import annotations

import inspect

from logbroker.errors import (
    OffsetMovedToTieredStorageError,
    OffsetOutOfRangeError,
    TopicAuthorizationFailedError,
    UnknownTopicIdError,
)
from logbroker.protocol.responses.fetch import (
    FetchPartitionData,
    FetchTopicData,
    chunks_size,
    encode_fetch_response,
)
from logbroker.replication.replica_manager import FetchPartitionRequest
from logbroker.replication.replica_selector import ClientMetadata
from logbroker.security.acl import AclOperation
from logbroker.server.authorization import TOPIC, allowed_names, cluster_allowed
from logbroker.server.client_quotas import principal_name, throttle_request
from logbroker.types import TopicPartition

API_KEY = 1


def handle(broker, request):
    """Reads at once; only a fetch that must wait for min.bytes is asynchronous."""
    body = request.body
    names = _topic_names(broker, body, request.api_version)
    replica_id = body.replica_state.replica_id if request.api_version >= 15 else body.replica_id
    denied = frozenset() if broker.authorizer is None else unreadable(broker, request, replica_id, names)
    requested = [FetchPartitionRequest(TopicPartition(name, p.partition), p.fetch_offset,
                                       p.partition_max_bytes, getattr(p, "current_leader_epoch", -1))
                 for t, name in zip(body.topics, names) if name is not None and name not in denied
                 for p in t.partitions]
    max_bytes = body.max_bytes
    quotas = broker.client_quotas
    if quotas is not None and quotas.enabled and replica_id < 0 and quotas.fetch.quotas:
        # Never more than the consumer byte-rate quota lets through in its window (Kafka).
        window_bytes = quotas.fetch.max_value_in_window(
            principal_name(request.connection.principal), request.client_id or "")
        if window_bytes < max_bytes:
            max_bytes = int(window_bytes)
    # KIP-392: from v11 a consumer sends its rack, and may then read from followers.
    client_metadata = ClientMetadata(body.rack_id or "", getattr(request.connection, "listener_name", None)) \
        if request.api_version >= 11 else None
    results = broker.replica_manager.fetch_messages(
        replica_id=replica_id, max_wait_ms=int(body.max_wait.total_seconds() * 1000),
        min_bytes=body.min_bytes, max_bytes=max_bytes, partitions=requested,
        isolation_level=getattr(body, "isolation_level", 0), client_metadata=client_metadata)
    if (metrics := broker.replica_manager.metrics) is not None:
        results = metrics.on_fetch(replica_id, results)
    if inspect.isawaitable(results):
        return _respond_later(broker, request, names, results, denied, replica_id)
    return _respond(broker, request, names, results, denied, replica_id)


def unreadable(broker, request, replica_id: int, names: list[str | None]) -> frozenset[str]:
    """The topics this fetch may not read: all of them for a follower without CLUSTER_ACTION on
    the cluster, else those without READ."""
    wanted = {n for n in names if n is not None}
    if replica_id >= 0:
        return frozenset() if cluster_allowed(broker, request, AclOperation.CLUSTER_ACTION) \
            else frozenset(wanted)
    return frozenset(wanted - allowed_names(broker, request, AclOperation.READ, TOPIC, wanted))


def _topic_names(broker, body, version: int) -> list[str | None]:
    """The name of each requested topic; None for an id this cluster does not know."""
    if version < 13:
        return [t.topic for t in body.topics]
    infos = [broker.store.topic_by_id(t.topic_id) for t in body.topics]
    return [info.name if info else None for info in infos]


async def _respond_later(broker, request, names, pending, denied, replica_id):
    return _respond(broker, request, names, await pending, denied, replica_id)


def _respond(broker, request, names, results, denied, replica_id):
    chunks = _encode(request, names, results, denied)
    quotas = broker.client_quotas
    if replica_id >= 0 or quotas is None or not quotas.enabled:
        request.quota_done = True  # followers are exempt from client quotas
        return chunks
    # The consumer byte-rate quota counts the response's size; over it (or over the request
    # quota) the answer is empty, its bytes uncounted, and carries the throttle time (Kafka).
    size = chunks_size(chunks)
    throttle_ms = throttle_request(broker, request, manager=quotas.fetch, value=size)
    if throttle_ms == 0:
        return chunks
    if quotas.fetch.quotas:
        quotas.fetch.unrecord(principal_name(request.connection.principal), request.client_id or "",
                              size, quotas.clock_ms())
    return encode_fetch_response(request.api_version, request.correlation_id, [],
                                 throttle_time_ms=throttle_ms)


def _encode(request, names, results, denied):
    """The response chunks. Aborted transactions: under read_committed the range's (an empty
    array when none), a null array under read_uncommitted and with an error, as Kafka."""
    body = request.body
    committed = body.isolation_level == 1
    topics = []
    for t, name in zip(body.topics, names):
        partitions = []
        for p in t.partitions:
            if name is None:
                partitions.append(FetchPartitionData(p.partition, UnknownTopicIdError.code, -1))
                continue
            if name in denied:
                partitions.append(FetchPartitionData(p.partition, TopicAuthorizationFailedError.code, -1))
                continue
            # A plain (topic, partition) tuple finds the TopicPartition key: a NamedTuple hashes
            # and compares as its tuple.
            error, hw, lso, log_start, records, aborted, preferred = results[name, p.partition]
            if error is not None:
                code = error.code
                if code == OffsetMovedToTieredStorageError.code and request.api_version < 14:
                    code = OffsetOutOfRangeError.code  # before v14 a follower knows no other answer
                partitions.append(FetchPartitionData(p.partition, code, hw, lso, log_start, None, preferred))
                continue
            partitions.append(FetchPartitionData(p.partition, 0, hw, lso, log_start,
                                                 (aborted or ()) if committed else None, preferred, records))
        topics.append(FetchTopicData(name or "", partitions, getattr(t, "topic_id", None)))
    return encode_fetch_response(request.api_version, request.correlation_id, topics)
