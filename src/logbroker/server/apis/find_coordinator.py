"""FindCoordinator (api key 10), v0-4: which broker coordinates a group.

Key type 0 (group): the leader of the group's `__consumer_offsets` partition; key type 1
(transaction): the leader of the transactional id's `__transaction_state` partition (DESCRIBE on
the TransactionalId resource) — each topic created on first use as Kafka does. Any other key type
is INVALID_REQUEST. v4 answers a batch of keys (`coordinator_keys`), one entry each.
"""

from __future__ import annotations

import logging

from logbroker.errors import CoordinatorNotAvailableError, InvalidGroupIdError, InvalidRequestError, KafkaError
from logbroker.security.acl import AclOperation
from logbroker.server.authorization import require_group, require_transactional_id

API_KEY = 10
GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1

log = logging.getLogger("kafka.server.KafkaApis")


def handle(broker, request) -> dict:
    body = request.body
    key_type = getattr(body, "key_type", GROUP_KEY_TYPE)
    listener = getattr(request.connection, "listener_name", None)
    if request.api_version >= 4:
        return {"coordinators": [dict(_find(broker, request, key_type, key, listener), key=key) for key in body.coordinator_keys]}
    return _find(broker, request, key_type, body.key, listener)


def _find(broker, request, key_type: int, key: str, listener: str | None = None) -> dict:
    try:
        if key_type == TRANSACTION_KEY_TYPE:
            require_transactional_id(broker, request, AclOperation.DESCRIBE, key)
            if not key:
                raise InvalidRequestError("The transactional id is empty")
            manager = broker.transaction_coordinator.state_manager
            manager.ensure_topic()
            tp = manager.coordinator_partition(key)
        elif key_type == GROUP_KEY_TYPE:
            require_group(broker, request, AclOperation.DESCRIBE, key)
            coordinator = broker.group_coordinator
            if not key:
                raise InvalidGroupIdError("The group id is empty")
            coordinator.ensure_offsets_topic()
            tp = coordinator.coordinator_partition(key)
        else:
            raise InvalidRequestError(f"Unknown coordinator key type {key_type}")
        state = broker.store.partition_state(tp)
        if state is None or state.leader < 0:
            raise CoordinatorNotAvailableError(f"{tp} has no leader")
        if state.leader == broker.broker_id and tp not in broker.replica_manager.partitions:
            raise CoordinatorNotAvailableError(f"the log of {tp} could not be created here yet")
        node = next((b for b in broker.brokers(listener) if b.broker_id == state.leader), None)
        if node is None:
            raise CoordinatorNotAvailableError(f"the leader of {tp} is not alive")
        return {"error_code": 0, "error_message": None, "node_id": node.broker_id, "host": node.host,
                "port": node.port}
    except KafkaError as exc:
        return {"error_code": exc.code, "error_message": str(exc) or None, "node_id": -1, "host": "", "port": -1}
