"""DescribeTransactions (api key 65), v0: the state of transactional ids this broker coordinates.

Per id: DESCRIBE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then the
coordinator's NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS / TRANSACTIONAL_ID_NOT_FOUND, or the
state; partitions of topics the principal may not DESCRIBE are left out, as Kafka does.
"""

from __future__ import annotations

import datetime

from logbroker.errors import KafkaError
from logbroker.security.acl import AclOperation
from logbroker.server.authorization import TOPIC, allowed_names, require_transactional_id

API_KEY = 65
# transaction_start_time is a non-nullable int64 timestamp in kio; Kafka sends -1 when none.
_NO_TIMESTAMP = datetime.datetime.fromtimestamp(-0.001, datetime.timezone.utc)


def _timestamp(ms: int):
    return ms if ms >= 0 else _NO_TIMESTAMP


def handle(broker, request) -> dict:
    states = []
    for txn_id in request.body.transactional_ids:
        try:
            require_transactional_id(broker, request, AclOperation.DESCRIBE, txn_id)
            state = broker.transaction_coordinator.describe(txn_id)
        except KafkaError as exc:
            states.append({"error_code": exc.code, "transactional_id": txn_id, "transaction_state": "",
                           "transaction_timeout": 0, "transaction_start_time": 0, "producer_id": -1,
                           "producer_epoch": -1, "topics": []})
            continue
        if broker.authorizer is not None:
            visible = allowed_names(broker, request, AclOperation.DESCRIBE, TOPIC,
                                    (t["topic"] for t in state["topics"]))
            state["topics"] = [t for t in state["topics"] if t["topic"] in visible]
        states.append({"error_code": 0, "transactional_id": txn_id,
                       "transaction_timeout": state.pop("transaction_timeout_ms"),
                       "transaction_start_time": _timestamp(state.pop("transaction_start_time_ms")), **state})
    return {"transaction_states": states}
