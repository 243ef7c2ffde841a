"""DeleteShareGroupOffsets (api key 92), v0: forget a share group's state on whole topics
(KIP-932; kafka-share-groups.sh --delete-offsets). The group must have no members."""

from __future__ import annotations

from logbroker.errors import KafkaError
from logbroker.security.acl import AclOperation
from logbroker.server.apis.describe_share_group_offsets import _topic_id
from logbroker.server.authorization import require_group

API_KEY = 92


async def handle(broker, request) -> dict:
    body = request.body
    try:
        require_group(broker, request, AclOperation.DELETE, body.group_id)
        broker.group_coordinator.check_group(body.group_id)
        results = await broker.share_group_offsets.delete(body.group_id, [t.topic_name for t in body.topics])
    except KafkaError as exc:
        return {"error_code": exc.code, "error_message": str(exc) or None, "responses": []}
    return {"error_code": 0, "responses": [
        {"topic_name": name, "topic_id": _topic_id(broker, name), "error_code": error.code if error else 0,
         "error_message": str(error) if error else None} for name, error in results.items()]}
