"""Produce (api key 0), v3+: one batch per partition, appended through the ReplicaManager.

acks=0 gets no response at all; if any partition failed, the connection is closed instead, as
Kafka does, so the producer notices. The record bytes kio parsed out of the frame go to the log as
they are: it writes a patched copy of their first 16 bytes (base offset, leader epoch) ahead of the
rest, so the batch is not copied again.
"""

from __future__ import annotations

import inspect

from logbroker.errors import TopicAuthorizationFailedError
from logbroker.protocol.responses.produce import ProducePartitionResult, ProduceTopicResult, encode_produce_response
from logbroker.security.acl import AclOperation
from logbroker.server.authorization import TOPIC, allowed_names
from logbroker.server.client_quotas import throttle_request
from logbroker.server.network import CLOSE
from logbroker.types import TopicPartition

API_KEY = 0


def handle(broker, request):
    """Appends at once, in arrival order; only the wait for acknowledgement is asynchronous."""
    body = request.body
    entries: dict[TopicPartition, bytes] = {}
    for topic in body.topic_data:
        for partition in topic.partition_data:
            entries[TopicPartition(topic.name, partition.index)] = partition.records or b""
    denied = () if broker.authorizer is None else unwritable(broker, request, entries)
    results = broker.replica_manager.append_records_now(
        timeout_ms=int(body.timeout.total_seconds() * 1000), required_acks=body.acks, entries=entries)
    if inspect.isawaitable(results):
        return _respond_later(broker, request, results, denied)
    return _respond(broker, request, results, denied)


def unwritable(broker, request, entries: dict[TopicPartition, bytes]) -> list[TopicPartition]:
    """Remove from `entries` the partitions of topics the principal may not WRITE; return them."""
    topics = {tp.topic for tp in entries}
    writable = allowed_names(broker, request, AclOperation.WRITE, TOPIC, topics)
    if len(writable) == len(topics):
        return []
    denied = [tp for tp in entries if tp.topic not in writable]
    for tp in denied:
        del entries[tp]
    return denied


async def _respond_later(broker, request, pending, denied):
    return _respond(broker, request, await pending, denied)


def _respond(broker, request, results, denied=()):
    """The response, carrying the throttle time of the client's produce byte-rate and request
    quotas (counted here, once the append is done, as Kafka counts the request's size)."""
    body = request.body
    quotas = broker.client_quotas
    throttle_ms = 0 if quotas is None or not quotas.enabled else throttle_request(
        broker, request, manager=quotas.produce, value=request.request_bytes)
    if body.acks == 0:
        return CLOSE if denied or any(r.error is not None for r in results.values()) else None
    by_topic: dict[str, list[ProducePartitionResult]] = {}
    for tp in denied:
        by_topic.setdefault(tp.topic, []).append(ProducePartitionResult(
            tp.partition, TopicAuthorizationFailedError.code,
            error_message=f"Not authorized to write to topic {tp.topic}"))
    for tp, r in results.items():
        error = r.error
        by_topic.setdefault(tp.topic, []).append(ProducePartitionResult(
            tp.partition, error.code if error else 0, r.base_offset, r.log_append_time_ms,
            r.log_start_offset, error_message=str(error) or None if error else None))
    topics = [ProduceTopicResult(name, parts) for name, parts in by_topic.items()]
    return [encode_produce_response(request.api_version, request.correlation_id, topics,
                                    throttle_time_ms=throttle_ms)]
