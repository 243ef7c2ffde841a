"""LeaveGroup (api key 13), v0-5: members leave at once instead of timing out.

v0-2 name one member id and answer with its error; v3+ name a batch of members (by member id
and/or group.instance.id) and answer per member, with a top-level error only when the whole
request failed.
"""

from __future__ import annotations

from logbroker.errors import KafkaError
from logbroker.security.acl import AclOperation
from logbroker.server.authorization import require_group

API_KEY = 13


def handle(broker, request) -> dict:
    body = request.body
    batched = request.api_version >= 3
    leaving = ([(m.member_id, m.group_instance_id) for m in body.members] if batched
               else [(body.member_id, None)])
    try:
        require_group(broker, request, AclOperation.READ, body.group_id)
        results = broker.group_coordinator.leave_group(body.group_id, leaving)
    except KafkaError as exc:
        return {"error_code": exc.code, "members": []}
    codes = [0 if error is None else error.code for error in results]
    if not batched:
        return {"error_code": codes[0]}
    return {"error_code": 0, "members": [{"member_id": member_id, "group_instance_id": instance_id,
                                          "error_code": code}
                                         for (member_id, instance_id), code in zip(leaving, codes)]}
