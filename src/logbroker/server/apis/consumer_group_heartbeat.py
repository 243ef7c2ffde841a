"""ConsumerGroupHeartbeat (api key 68), v0-1: a member of a KIP-848 consumer group joins, stays,
reconciles and leaves, all with this one request; the coordinator assigns partitions.

Fields a member did not change since its last heartbeat come as null (kept as None). v1 members
name themselves (a client-generated member id) and may subscribe by regular expression. The
answer carries the member's epoch, the heartbeat interval and, when it changed or the request was
a full one, the member's assignment by topic id. See coordinator/consumer_group_manager.py.
"""

from __future__ import annotations

from logbroker.coordinator.consumer_group_manager import HeartbeatRequest
from logbroker.errors import KafkaError
from logbroker.security.acl import AclOperation
from logbroker.server.apis._groups import client_host, ms
from logbroker.server.authorization import require_group

API_KEY = 68


async def handle(broker, request) -> dict:
    body = request.body
    owned = body.topic_partitions
    heartbeat = HeartbeatRequest(
        group_id=body.group_id, member_id=body.member_id, member_epoch=body.member_epoch,
        instance_id=body.instance_id, rack_id=body.rack_id, rebalance_timeout_ms=ms(body.rebalance_timeout),
        subscribed_topic_names=None if body.subscribed_topic_names is None else tuple(body.subscribed_topic_names),
        subscribed_topic_regex=getattr(body, "subscribed_topic_regex", None), server_assignor=body.server_assignor,
        owned=None if owned is None else tuple((t.topic_id, tuple(t.partitions)) for t in owned),
        client_id=request.client_id or "", client_host=client_host(request))
    try:
        require_group(broker, request, AclOperation.READ, body.group_id)
        response = await broker.group_coordinator.consumer_group_heartbeat(heartbeat,
                                                                           api_version=request.api_version)
    except KafkaError as exc:
        return {"error_code": exc.code, "error_message": str(exc) or None, "member_id": None,
                "member_epoch": -1, "heartbeat_interval": 0, "assignment": None}
    return response
