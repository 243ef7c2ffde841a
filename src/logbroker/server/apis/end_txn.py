"""EndTxn (api key 26), v0-4: commit or abort a producer's transaction.

Answered once PrepareCommit or PrepareAbort is stored; the markers and the Complete* record follow
in the background (coordinator/transaction_coordinator.py). WRITE on the transactional id is
required; PRODUCER_FENCED is INVALID_PRODUCER_EPOCH below v2, as Kafka.
"""

from __future__ import annotations

from logbroker.errors import InvalidProducerEpochError, KafkaError, ProducerFencedError
from logbroker.security.acl import AclOperation
from logbroker.server.authorization import require_transactional_id

API_KEY = 26


async def handle(broker, request) -> dict:
    body = request.body
    try:
        require_transactional_id(broker, request, AclOperation.WRITE, body.transactional_id)
        await broker.transaction_coordinator.end_transaction(
            transactional_id=body.transactional_id, producer_id=body.producer_id,
            producer_epoch=body.producer_epoch, commit=bool(body.committed))
    except KafkaError as exc:
        if isinstance(exc, ProducerFencedError) and request.api_version < 2:
            return {"error_code": InvalidProducerEpochError.code}
        return {"error_code": exc.code}
    return {"error_code": 0}
