"""Fetch (api key 1), v4-v12: consumers read below the high watermark, followers to the log end.

The records of each partition are a file region handed to the network layer, which sends it with
os.sendfile: the response is encoded as chunks (header bytes, region, bytes, region …) and the
record bytes never enter Python. Sessionless: we answer session id 0, so clients send full
fetches (KIP-227 allows a broker to decline sessions).
"""

from __future__ import annotations

import inspect

from logbroker.protocol.responses.fetch import FetchPartitionData, FetchTopicData, encode_fetch_response
from logbroker.replication.replica_manager import FetchPartitionRequest
from logbroker.types import TopicPartition

API_KEY = 1


def handle(broker, request):
    """Reads at once; only a fetch that must wait for min.bytes is asynchronous."""
    body = request.body
    requested = [FetchPartitionRequest(TopicPartition(t.topic, p.partition), p.fetch_offset,
                                       p.partition_max_bytes, getattr(p, "current_leader_epoch", -1))
                 for t in body.topics for p in t.partitions]
    results = broker.replica_manager.fetch_messages(
        replica_id=body.replica_id, max_wait_ms=int(body.max_wait.total_seconds() * 1000),
        min_bytes=body.min_bytes, max_bytes=body.max_bytes, partitions=requested)
    if inspect.isawaitable(results):
        return _respond_later(request, results)
    return _respond(request, results)


async def _respond_later(request, pending):
    return _respond(request, await pending)


def _respond(request, results):
    body = request.body
    topics = []
    for t in body.topics:
        partitions = []
        for p in t.partitions:
            r = results[TopicPartition(t.topic, p.partition)]
            partitions.append(FetchPartitionData(
                p.partition, r.error.code if r.error else 0, r.high_watermark, r.last_stable_offset,
                r.log_start_offset, aborted_transactions=[] if body.isolation_level == 1 else None,
                records=r.records))
        topics.append(FetchTopicData(t.topic, partitions))
    return encode_fetch_response(request.api_version, request.correlation_id, topics)
