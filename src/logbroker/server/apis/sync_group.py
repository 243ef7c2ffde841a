"""SyncGroup (api key 14), v0-5: the leader hands in the assignment; every member gets its own.

Assignments are opaque bytes, passed through exactly — a zero-length one is valid and a member the
leader left out gets zero bytes. v5 carries the protocol type and name, checked against the
group's (INCONSISTENT_GROUP_PROTOCOL) and echoed back.
"""

from __future__ import annotations

from logbroker.errors import KafkaError
from logbroker.security.acl import AclOperation
from logbroker.server.authorization import require_group

API_KEY = 14


async def handle(broker, request) -> dict:
    body = request.body
    try:
        require_group(broker, request, AclOperation.READ, body.group_id)
        return await broker.group_coordinator.sync_group(
            group_id=body.group_id, generation_id=body.generation_id, member_id=body.member_id,
            group_instance_id=getattr(body, "group_instance_id", None),
            protocol_type=getattr(body, "protocol_type", None), protocol_name=getattr(body, "protocol_name", None),
            assignments={a.member_id: bytes(a.assignment) for a in body.assignments})
    except KafkaError as exc:
        return {"error_code": exc.code, "protocol_type": None, "protocol_name": None, "assignment": b""}
