"""AddPartitionsToTxn (api key 24), v0-4: a producer adds partitions to its transaction; v4 is the
broker-to-broker batched form whose `verify_only` entries ask whether partitions are already in
the transaction (KIP-890 part 1: a partition leader checks before a producer's first transactional
batch).

v0-3, per Kafka's KafkaApis: WRITE on the transactional id (else every partition gets
TRANSACTIONAL_ID_AUTHORIZATION_FAILED); partitions of topics the principal may not WRITE get
TOPIC_AUTHORIZATION_FAILED, unknown ones UNKNOWN_TOPIC_OR_PARTITION, and then the others
OPERATION_NOT_ATTEMPTED — nothing is added unless every partition may be. Otherwise every
partition gets the coordinator's answer (PRODUCER_FENCED as INVALID_PRODUCER_EPOCH below v2).
v4 requires CLUSTER_ACTION (it comes from brokers) and answers per transaction.
"""

from __future__ import annotations

from logbroker.errors import (
    InvalidProducerEpochError,
    KafkaError,
    OperationNotAttemptedError,
    ProducerFencedError,
    TopicAuthorizationFailedError,
    UnknownTopicOrPartitionError,
)
from logbroker.security.acl import AclOperation
from logbroker.server.authorization import TOPIC, allowed_names, require_cluster, require_transactional_id
from logbroker.types import TopicPartition

API_KEY = 24


async def handle(broker, request) -> dict:
    body = request.body
    if request.api_version >= 4:
        return await _verify_batch(broker, request)
    partitions = [TopicPartition(t.name, p) for t in body.v3_and_below_topics for p in t.partitions]
    codes = await add_partitions(broker, request, body.v3_and_below_transactional_id, body.v3_and_below_producer_id,
                                 body.v3_and_below_producer_epoch, partitions)
    return {"results_by_topic_v3_and_below": _by_topic(codes)}


async def add_partitions(broker, request, transactional_id: str, producer_id: int, producer_epoch: int,
                         partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
    try:
        require_transactional_id(broker, request, AclOperation.WRITE, transactional_id)
    except KafkaError as exc:
        return {tp: exc.code for tp in partitions}
    writable = allowed_names(broker, request, AclOperation.WRITE, TOPIC, (tp.topic for tp in partitions))
    codes: dict[TopicPartition, int] = {}
    for tp in partitions:
        info = broker.store.topic(tp.topic)
        if tp.topic not in writable:
            codes[tp] = TopicAuthorizationFailedError.code
        elif info is None or not 0 <= tp.partition < info.num_partitions:
            codes[tp] = UnknownTopicOrPartitionError.code
    if codes:
        return {tp: codes.get(tp, OperationNotAttemptedError.code) for tp in partitions}
    try:
        await broker.transaction_coordinator.add_partitions(
            transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch,
            partitions=partitions)
        code = 0
    except KafkaError as exc:
        code = InvalidProducerEpochError.code if isinstance(exc, ProducerFencedError) and request.api_version < 2 \
            else exc.code
    return {tp: code for tp in partitions}


async def _verify_batch(broker, request) -> dict:
    try:
        require_cluster(broker, request, AclOperation.CLUSTER_ACTION)
    except KafkaError as exc:
        return {"error_code": exc.code, "results_by_transaction": []}
    results = []
    coordinator = broker.transaction_coordinator
    for txn in request.body.transactions:
        partitions = [TopicPartition(t.name, p) for t in txn.topics for p in t.partitions]
        if txn.verify_only:
            errors = coordinator.verify_partitions(transactional_id=txn.transactional_id, producer_id=txn.producer_id,
                                                   producer_epoch=txn.producer_epoch, partitions=partitions)
            codes = {tp: e.code if e else 0 for tp, e in errors.items()}
        else:
            codes = await add_partitions(broker, request, txn.transactional_id, txn.producer_id,
                                         txn.producer_epoch, partitions)
        results.append({"transactional_id": txn.transactional_id, "topic_results": _by_topic(codes)})
    return {"error_code": 0, "results_by_transaction": results}


def _by_topic(codes: dict[TopicPartition, int]) -> list[dict]:
    by_topic: dict[str, list[dict]] = {}
    for tp, code in codes.items():
        by_topic.setdefault(tp.topic, []).append({"partition_index": tp.partition, "partition_error_code": code})
    return [{"name": name, "results_by_partition": parts} for name, parts in by_topic.items()]
