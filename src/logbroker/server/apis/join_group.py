"""JoinGroup (api key 11), v0-9: join a classic group and wait for its next generation.

v0 has no rebalance timeout (the session timeout serves as one). From v4 a first join with an
empty member id gets MEMBER_ID_REQUIRED (79) and the member id to rejoin with (KIP-394), so a
member that never gets an answer leaves no ghost behind. v5 adds group.instance.id (static
membership), v7 echoes the protocol type, v9 the skip_assignment flag for a static leader that
rejoined without a rebalance. The answer may wait: see coordinator/classic_group_manager.py.
"""

from __future__ import annotations

from logbroker.coordinator.classic_group_manager import MemberIdRequired
from logbroker.errors import KafkaError
from logbroker.security.acl import AclOperation
from logbroker.server.apis._groups import client_host, ms
from logbroker.server.authorization import require_group

API_KEY = 11


async def handle(broker, request) -> dict:
    body = request.body
    version = request.api_version
    session_timeout_ms = ms(body.session_timeout)
    rebalance_timeout_ms = ms(body.rebalance_timeout) if version >= 1 else session_timeout_ms
    try:
        require_group(broker, request, AclOperation.READ, body.group_id)
        response = await broker.group_coordinator.join_group(
            group_id=body.group_id, member_id=body.member_id,
            group_instance_id=getattr(body, "group_instance_id", None),
            require_known_member_id=version >= 4, client_id=request.client_id or "",
            client_host=client_host(request), rebalance_timeout_ms=rebalance_timeout_ms,
            session_timeout_ms=session_timeout_ms, protocol_type=body.protocol_type,
            protocols=[(p.name, bytes(p.metadata)) for p in body.protocols],
            supports_skip_assignment=version >= 9)
    except MemberIdRequired as exc:
        response = _error(exc.code, exc.member_id)
    except KafkaError as exc:
        response = _error(exc.code, body.member_id)
    if version < 7 and response["protocol_name"] is None:
        response["protocol_name"] = ""  # nullable only from v7
    return response


def _error(code: int, member_id: str) -> dict:
    return {"error_code": code, "generation_id": -1, "protocol_type": None, "protocol_name": None,
            "leader": "", "member_id": member_id, "members": []}
