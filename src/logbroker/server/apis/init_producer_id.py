"""InitProducerId (api key 22), v0-4: producer ids for idempotent producers.

A null transactional id gets a new producer id with epoch 0 — also when v3+ names the current
producer id and epoch (KIP-360: an idempotent producer resetting after UNKNOWN_PRODUCER_ID or a
sequence gap). That is what Kafka's TransactionCoordinator does for non-transactional producers
("always blindly accept the request and return a new producerId"), and it is the safe answer: the
id is fresh from a claimed block, where echoing a client's id with epoch + 1 could hand out an id
this cluster never issued (after a data directory was wiped), later issued again to another
producer. Java, librdkafka and kafka-python all take whatever id comes back. A producer id given
without an epoch, or the reverse, is INVALID_REQUEST, as in Kafka.

Transactions are not implemented yet. A transactional id gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED
(53), the one error every client treats as fatal here: librdkafka retries any InitProducerId error
except INVALID_TRANSACTION_TIMEOUT and the authorization failures (rd_kafka_idemp_check_error), so
COORDINATOR_NOT_AVAILABLE or NOT_COORDINATOR would make it retry until its timeout; the Java
producer's initTransactions() and kafka-python raise TransactionalIdAuthorizationException at once.
INVALID_TRANSACTION_TIMEOUT would also stop them but send users to tune a timeout. The broker logs
why at WARN. An empty transactional id is INVALID_REQUEST, as in Kafka.
"""

from __future__ import annotations

import logging

from logbroker.errors import (
    ClusterAuthorizationFailedError,
    InvalidRequestError,
    TransactionalIdAuthorizationFailedError,
)
from logbroker.records.batch import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from logbroker.server.authorization import idempotence_allowed

API_KEY = 22

log = logging.getLogger("kafka.coordinator.transaction.TransactionCoordinator")


def handle(broker, request) -> dict:
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
    log.warning("Refused InitProducerId for transactional id %r from client %s: transactions are "
                "not supported yet (answered TRANSACTIONAL_ID_AUTHORIZATION_FAILED so the client "
                "fails at once instead of retrying)", transactional_id, request.client_id)
    return _error(TransactionalIdAuthorizationFailedError.code)


def _error(code: int) -> dict:
    return {"error_code": code, "producer_id": NO_PRODUCER_ID, "producer_epoch": NO_PRODUCER_EPOCH}
