"""ShareGroupHeartbeat (api key 76), v1: join, stay in and leave a share group (KIP-932).

The group's coordinator (the leader of its __consumer_offsets partition) answers; the assignment
names topics by id and is sent when it changed (and on joining), null otherwise, as Kafka.
"""

from __future__ import annotations

from logbroker.errors import KafkaError
from logbroker.security.acl import AclOperation
from logbroker.server.apis._groups import client_host
from logbroker.server.authorization import require_group

API_KEY = 76


async def handle(broker, request) -> dict:
    body = request.body
    try:
        require_group(broker, request, AclOperation.READ, body.group_id)
        result = await broker.group_coordinator.share.heartbeat(
            group_id=body.group_id, member_id=body.member_id, member_epoch=body.member_epoch,
            rack_id=body.rack_id, subscribed_topic_names=body.subscribed_topic_names,
            client_id=request.client_id or "", client_host=client_host(request))
    except KafkaError as exc:
        return {"error_code": exc.code, "error_message": str(exc) or None, "member_id": body.member_id or None,
                "member_epoch": -1, "heartbeat_interval": 0, "assignment": None}
    assignment = None
    if result.assignment is not None:
        topics = []
        for name, partitions in sorted(result.assignment.items()):
            info = broker.store.topic(name)
            if info is not None:
                topics.append({"topic_id": info.topic_id, "partitions": partitions})
        assignment = {"topic_partitions": topics}
    return {"error_code": 0, "member_id": result.member_id, "member_epoch": result.member_epoch,
            "heartbeat_interval": result.heartbeat_interval_ms, "assignment": assignment}

