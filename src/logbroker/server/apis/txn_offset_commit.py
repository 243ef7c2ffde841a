"""TxnOffsetCommit (api key 28), v0-4: a transactional producer commits a group's offsets inside
its transaction (coordinator/transactional_offsets.py: visible only once the COMMIT marker lands).

As Kafka's KafkaApis and GroupCoordinator: WRITE on the transactional id
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and READ on the group (GROUP_AUTHORIZATION_FAILED) for
every partition; per partition READ on its topic, a known topic and partition, metadata within
offset.metadata.max.bytes. Then (KIP-890, transaction.partition.verification.enable) the group's
`__consumer_offsets` partition must be in the transaction — AddOffsetsToTxn puts it there — else
INVALID_TXN_STATE; the member and generation are checked when given (v3+), and the offsets are
appended. PRODUCER_FENCED is INVALID_PRODUCER_EPOCH below v3, as Kafka.
"""

from __future__ import annotations

import logging

from logbroker.coordinator.offsets_schema import OffsetAndMetadata
from logbroker.coordinator.transaction_verification import for_produce
from logbroker.coordinator.transactional_offsets import commit_transactional_offsets
from logbroker.errors import (
    CoordinatorNotAvailableError,
    InvalidProducerEpochError,
    KafkaError,
    OffsetMetadataTooLargeError,
    ProducerFencedError,
    TopicAuthorizationFailedError,
    UnknownTopicOrPartitionError,
)
from logbroker.security.acl import AclOperation
from logbroker.server.authorization import TOPIC, allowed_names, require_group, require_transactional_id
from logbroker.types import TopicPartition

API_KEY = 28

log = logging.getLogger("kafka.coordinator.group.GroupCoordinator")


async def handle(broker, request) -> dict:
    body = request.body
    now_ms = broker.clock.time_ms()
    codes: dict[TopicPartition, int] = {}
    valid: dict[TopicPartition, OffsetAndMetadata] = {}
    try:
        require_transactional_id(broker, request, AclOperation.WRITE, body.transactional_id)
        require_group(broker, request, AclOperation.READ, body.group_id)
    except KafkaError as exc:
        return _response(body, {}, exc.code)
    readable = allowed_names(broker, request, AclOperation.READ, TOPIC, (t.name for t in body.topics))
    for topic in body.topics:
        info = broker.store.topic(topic.name)
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            metadata = p.committed_metadata or ""
            if topic.name not in readable:
                codes[tp] = TopicAuthorizationFailedError.code
            elif info is None or not 0 <= p.partition_index < info.num_partitions:
                codes[tp] = UnknownTopicOrPartitionError.code
            elif len(metadata.encode()) > broker.config.offset_metadata_max_bytes:
                codes[tp] = OffsetMetadataTooLargeError.code
            else:
                valid[tp] = OffsetAndMetadata(p.committed_offset, getattr(p, "committed_leader_epoch", -1),
                                              metadata, now_ms)
    try:
        gc = broker.group_coordinator
        gc.check_group(body.group_id)
        if broker.config.transaction_partition_verification_enable:
            offsets_tp = gc.coordinator_partition(body.group_id)
            errors = await broker.transaction_verifier.verify(
                transactional_id=body.transactional_id, producer_id=body.producer_id,
                producer_epoch=body.producer_epoch, partitions=[offsets_tp])
            error = for_produce(errors.get(offsets_tp))
            if error is not None:
                log.info("Refused TxnOffsetCommit of group %s by %s: %s", body.group_id, body.transactional_id,
                         error)
                raise CoordinatorNotAvailableError(str(error)) if error.name == "NOT_ENOUGH_REPLICAS" else error
        await commit_transactional_offsets(
            gc, group_id=body.group_id, producer_id=body.producer_id, producer_epoch=body.producer_epoch,
            member_id=getattr(body, "member_id", ""), group_instance_id=getattr(body, "group_instance_id", None),
            generation_id=getattr(body, "generation_id", -1), offsets=valid)
        group_code = 0
    except KafkaError as exc:
        group_code = exc.code
        if isinstance(exc, (ProducerFencedError, InvalidProducerEpochError)) and request.api_version < 3:
            group_code = InvalidProducerEpochError.code
    for tp in valid:
        codes[tp] = group_code
    return _response(body, codes, 0)


def _response(body, codes: dict[TopicPartition, int], default: int) -> dict:
    return {"topics": [{"name": topic.name,
                        "partitions": [{"partition_index": p.partition_index,
                                        "error_code": codes.get(TopicPartition(topic.name, p.partition_index),
                                                                default)}
                                       for p in topic.partitions]}
                       for topic in body.topics]}
