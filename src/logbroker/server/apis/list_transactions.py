"""ListTransactions (api key 66), v0-1: the transactional ids this broker coordinates, filtered by
state names, producer ids and (v1) a minimum running time in ms; ids the principal may not
DESCRIBE are left out. Unknown state names are echoed in `unknown_state_filters`; the listing
still runs with the known ones, as Kafka. While a partition loads the answer is
COORDINATOR_LOAD_IN_PROGRESS.
"""

from __future__ import annotations

from logbroker.coordinator.transaction_metadata import TransactionState
from logbroker.errors import CoordinatorLoadInProgressError
from logbroker.security.acl import AclOperation, ResourceType
from logbroker.server.authorization import allowed

API_KEY = 66


def handle(broker, request) -> dict:
    body = request.body
    coordinator = broker.transaction_coordinator
    if coordinator.state_manager.partitions.loading:
        return {"error_code": CoordinatorLoadInProgressError.code, "transaction_states": []}
    known, unknown = set(), []
    for name in body.state_filters:
        state = TransactionState.from_name(name)
        if state is None:
            unknown.append(name)
        else:
            known.add(state)
    if unknown and not known:
        return {"error_code": 0, "unknown_state_filters": unknown, "transaction_states": []}
    listed = coordinator.list_transactions(states=known or None, producer_ids=set(body.producer_id_filters) or None,
                                           min_duration_ms=getattr(body, "duration_filter", -1))
    if broker.authorizer is not None:
        listed = [t for t in listed if allowed(broker, request, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                                               t["transactional_id"], log_denied=False)]
    return {"error_code": 0, "unknown_state_filters": unknown, "transaction_states": listed}
