"""Produce (api key 0), v3+: one batch per partition, appended through the ReplicaManager.

acks=0 gets no response at all; if any partition failed, the connection is closed instead, as
Kafka does, so the producer notices. Each partition's records, a read-only view of the request
frame (protocol/requests/produce.py), go to the log as they are: it writes a patched copy of their
first 16 bytes (base offset, leader epoch) ahead of the rest, so the batch is never copied.

KIP-890 part 1 (transaction.partition.verification.enable): a request with a transactional id whose
batch is transactional (attributes bit 0x10) while its producer has no ongoing transaction on that
partition yet — the first batch of a transaction there — is checked with the transaction
coordinator first (coordinator/transaction_verification.py: a direct call when the coordinator is
this broker, else AddPartitionsToTxn v4 verify-only); a partition not in the transaction gets
INVALID_TXN_STATE. A request without a transactional id pays one attribute test, nothing more.
"""

from __future__ import annotations

import inspect
import logging
import struct

from logbroker.coordinator.transaction_verification import for_produce
from logbroker.errors import TopicAuthorizationFailedError
from logbroker.protocol.responses.produce import ProducePartitionResult, encode_produce_response
from logbroker.replication.replica_manager import ProduceResult
from logbroker.security.acl import AclOperation
from logbroker.server.authorization import TOPIC, allowed_names
from logbroker.server.client_quotas import throttle_request
from logbroker.server.network import CLOSE
from logbroker.types import TopicPartition

API_KEY = 0

log = logging.getLogger("kafka.server.ReplicaManager")
_ATTRIBUTES_LOW_BYTE = 22  # attributes int16 at 21: the flags are in its low byte
_TRANSACTIONAL = 0x10
_PRODUCER_ID_AT = 43
_PRODUCER = struct.Struct(">qh")


def handle(broker, request):
    """Appends at once, in arrival order; only the wait for acknowledgement is asynchronous."""
    body = request.body
    entries: dict[TopicPartition, bytes] = {}
    for topic in body.topic_data:
        for partition in topic.partition_data:
            entries[TopicPartition(topic.name, partition.index)] = partition.records or b""
    denied = () if broker.authorizer is None else unwritable(broker, request, entries)
    if body.transactional_id is not None and broker.config.transaction_partition_verification_enable:
        unverified = _unverified(broker, entries)
        if unverified:
            verifier = broker.transaction_verifier
            if verifier.coordinator_id(body.transactional_id) in (broker.broker_id, -1):
                failed = _verified(entries, unverified, verifier.verify_local(
                    transactional_id=body.transactional_id, producer_id=unverified[0], producer_epoch=unverified[1],
                    partitions=unverified[2]))
                return _append(broker, request, entries, denied, failed)
            return _verify_remotely_then_append(broker, request, entries, denied, unverified)
    return _append(broker, request, entries, denied)


def _append(broker, request, entries, denied, failed=None):
    body = request.body
    results = broker.replica_manager.append_records_now(
        timeout_ms=body.timeout_ms, required_acks=body.acks, entries=entries)
    if type(results) is not dict:  # an awaitable: the answer waits (acks=-1, a flush)
        return _respond_later(broker, request, results, denied, failed)
    if failed:
        results.update(failed)
    return _respond(broker, request, results, denied)


def _unverified(broker, entries: dict[TopicPartition, bytes]) -> tuple[int, int, list[TopicPartition]] | None:
    """KIP-890: the transactional batches whose producer has no ongoing transaction on their
    partition yet (the first batch of a transaction there) — (producer id, epoch, partitions)."""
    pending = []
    producer = None
    for tp, records in entries.items():
        if len(records) < 61 or not records[_ATTRIBUTES_LOW_BYTE] & _TRANSACTIONAL:
            continue
        producer_id, producer_epoch = _PRODUCER.unpack_from(records, _PRODUCER_ID_AT)
        partition = broker.replica_manager.partitions.get(tp)
        if partition is None:
            continue  # the append answers for it
        entry = partition.log.producer_state.last_entry(producer_id)
        if entry is not None and entry.producer_epoch == producer_epoch \
                and getattr(entry, "current_txn_first_offset", -1) >= 0:
            continue
        producer = (producer_id, producer_epoch)
        pending.append(tp)
    return (*producer, pending) if pending else None


def _verified(entries, unverified, errors) -> dict:
    """Remove the partitions that failed verification from `entries`; their results."""
    failed = {}
    for tp, error in errors.items():
        error = for_produce(error)
        if error is not None and tp in entries:
            log.info("Refused a transactional batch for %s from producer id %d: %s", tp, unverified[0], error)
            del entries[tp]
            failed[tp] = ProduceResult(error)
    return failed


async def _verify_remotely_then_append(broker, request, entries, denied, unverified):
    errors = await broker.transaction_verifier.verify(
        transactional_id=request.body.transactional_id, producer_id=unverified[0], producer_epoch=unverified[1],
        partitions=unverified[2])
    result = _append(broker, request, entries, denied, _verified(entries, unverified, errors))
    return await result if inspect.isawaitable(result) else result


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


async def _respond_later(broker, request, pending, denied, failed=None):
    results = await pending
    if failed:
        results.update(failed)
    return _respond(broker, request, results, denied)


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
        if error is None:  # positional, defaults for the rest: the cheap way to build one
            result = ProducePartitionResult(tp.partition, 0, r.base_offset, r.log_append_time_ms, r.log_start_offset)
        else:
            result = ProducePartitionResult(
                tp.partition, error.code, r.base_offset, r.log_append_time_ms, r.log_start_offset,
                record_errors=error.record_errors, error_message=str(error) or None)
        by_topic.setdefault(tp.topic, []).append(result)
    topics = list(by_topic.items())  # (name, partitions) pairs: the encoder takes them as they are
    return [encode_produce_response(request.api_version, request.correlation_id, topics,
                                    throttle_time_ms=throttle_ms)]
