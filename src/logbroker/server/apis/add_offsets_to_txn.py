"""AddOffsetsToTxn (api key 25), v0-4: a producer will commit a group's offsets in its transaction,
so the group's `__consumer_offsets` partition joins the transaction (and gets its marker).

WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and READ on the group
(GROUP_AUTHORIZATION_FAILED), as Kafka; PRODUCER_FENCED is INVALID_PRODUCER_EPOCH below v2.
"""

from __future__ import annotations

from logbroker.errors import InvalidProducerEpochError, KafkaError, ProducerFencedError
from logbroker.security.acl import AclOperation
from logbroker.server.authorization import require_group, require_transactional_id

API_KEY = 25


async def handle(broker, request) -> dict:
    body = request.body
    try:
        require_transactional_id(broker, request, AclOperation.WRITE, body.transactional_id)
        require_group(broker, request, AclOperation.READ, body.group_id)
        coordinator = broker.transaction_coordinator
        await coordinator.add_partitions(
            transactional_id=body.transactional_id, producer_id=body.producer_id,
            producer_epoch=body.producer_epoch, partitions=[coordinator.group_partition(body.group_id)])
    except KafkaError as exc:
        if isinstance(exc, ProducerFencedError) and request.api_version < 2:
            return {"error_code": InvalidProducerEpochError.code}
        return {"error_code": exc.code}
    return {"error_code": 0}
