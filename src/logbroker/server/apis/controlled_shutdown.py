"""ControlledShutdown (api key 7), v1-3: a broker about to stop asks the controller to move its
leadership away (server/controlled_shutdown.py does the moving, on the controller's worker thread).

Answered only by the controller of a ZooKeeper cluster: any other broker says NOT_CONTROLLER (the
sender looks the controller up again and retries); a broker id that is not registered gets
BROKER_NOT_AVAILABLE, an epoch older than its registration's STALE_BROKER_EPOCH (v2+).
`remaining_partitions` lists the partitions the broker still leads, for want of another live
in-sync replica; the broker retries while there are any.
"""

from __future__ import annotations

from logbroker.errors import KafkaError, NotControllerError
from logbroker.security.acl import AclOperation
from logbroker.server.authorization import require_cluster
from logbroker.server.controlled_shutdown import move_leadership_away

API_KEY = 7


async def handle(broker, request) -> dict:
    body = request.body
    try:
        require_cluster(broker, request, AclOperation.CLUSTER_ACTION)
        if broker.cluster is None:
            raise NotControllerError("This broker is not a member of a ZooKeeper cluster.")
        remaining = await broker.cluster.run_on_worker(move_leadership_away, broker.zk, body.broker_id,
                                                       getattr(body, "broker_epoch", -1))
    except KafkaError as exc:
        return {"error_code": exc.code, "remaining_partitions": []}
    return {"error_code": 0, "remaining_partitions": [
        {"topic_name": tp.topic, "partition_index": tp.partition} for tp in remaining]}
