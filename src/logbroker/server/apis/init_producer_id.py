"""InitProducerId (api key 22), v0-4: producer ids for idempotent and transactional producers.

A null transactional id gets a new producer id with epoch 0 — also when v3+ names the current
producer id and epoch (KIP-360: an idempotent producer resetting after UNKNOWN_PRODUCER_ID or a
sequence gap). That is what Kafka's TransactionCoordinator does for non-transactional producers
("always blindly accept the request and return a new producerId"), and it is the safe answer: the
id is fresh from a claimed block, where echoing a client's id with epoch + 1 could hand out an id
this cluster never issued (after a data directory was wiped), later issued again to another
producer. A producer id given without an epoch, or the reverse, is INVALID_REQUEST, as in Kafka.

A transactional id goes to the transaction coordinator (coordinator/transaction_coordinator.py):
WRITE on the TransactionalId resource is required, an empty id is INVALID_REQUEST, and
PRODUCER_FENCED is answered as INVALID_PRODUCER_EPOCH below v4, for clients older than KIP-588.
"""

from __future__ import annotations

from logbroker.errors import (
    ClusterAuthorizationFailedError,
    InvalidProducerEpochError,
    InvalidRequestError,
    KafkaError,
    ProducerFencedError,
)
from logbroker.records.batch import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from logbroker.security.acl import AclOperation
from logbroker.server.apis._groups import ms
from logbroker.server.authorization import idempotence_allowed, require_transactional_id

API_KEY = 22


def handle(broker, request):
    body = request.body
    producer_id = getattr(body, "producer_id", NO_PRODUCER_ID)
    producer_epoch = getattr(body, "producer_epoch", NO_PRODUCER_EPOCH)
    if (producer_id == NO_PRODUCER_ID) != (producer_epoch == NO_PRODUCER_EPOCH):
        return _error(InvalidRequestError.code)
    transactional_id = body.transactional_id
    if transactional_id is None:
        if not idempotence_allowed(broker, request):
            return _error(ClusterAuthorizationFailedError.code)
        return {"error_code": 0, "producer_id": broker.producer_ids.generate_producer_id(),
                "producer_epoch": 0}
    if not transactional_id:
        return _error(InvalidRequestError.code)
    return _init_transactional(broker, request, transactional_id, producer_id, producer_epoch)


async def _init_transactional(broker, request, transactional_id: str, producer_id: int, producer_epoch: int) -> dict:
    try:
        require_transactional_id(broker, request, AclOperation.WRITE, transactional_id)
        pid, epoch = await broker.transaction_coordinator.init_producer_id(
            transactional_id=transactional_id, transaction_timeout_ms=ms(request.body.transaction_timeout),
            expected_producer_id=producer_id, expected_producer_epoch=producer_epoch)
    except KafkaError as exc:
        if isinstance(exc, ProducerFencedError) and request.api_version < 4:
            return _error(InvalidProducerEpochError.code)
        return _error(exc.code)
    return {"error_code": 0, "producer_id": pid, "producer_epoch": epoch}


def _error(code: int) -> dict:
    return {"error_code": code, "producer_id": NO_PRODUCER_ID, "producer_epoch": NO_PRODUCER_EPOCH}
