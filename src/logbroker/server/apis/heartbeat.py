"""Heartbeat (api key 12), v0-4: keep a member's session alive; REBALANCE_IN_PROGRESS tells it
to rejoin."""

from __future__ import annotations

from logbroker.errors import KafkaError
from logbroker.security.acl import AclOperation
from logbroker.server.authorization import require_group

API_KEY = 12


def handle(broker, request) -> dict:
    body = request.body
    try:
        require_group(broker, request, AclOperation.READ, body.group_id)
        broker.group_coordinator.heartbeat(group_id=body.group_id, member_id=body.member_id,
                                           group_instance_id=getattr(body, "group_instance_id", None),
                                           generation_id=body.generation_id)
    except KafkaError as exc:
        return {"error_code": exc.code}
    return {"error_code": 0}
