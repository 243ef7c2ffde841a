"""DescribeShareGroupOffsets (api key 90), v0-1: each share-partition's start offset (and from v1
its lag) for share groups (KIP-932), answered by the group's coordinator. Null topics: every
partition the group has state on."""

from __future__ import annotations

from logbroker.errors import KafkaError
from logbroker.security.acl import AclOperation
from logbroker.server.authorization import require_group

API_KEY = 90


async def handle(broker, request) -> dict:
    groups = []
    for g in request.body.groups:
        try:
            require_group(broker, request, AclOperation.DESCRIBE, g.group_id)
            broker.group_coordinator.check_group(g.group_id)
            topics = None if g.topics is None else {t.topic_name: list(t.partitions) for t in g.topics}
            offsets = await broker.share_group_offsets.describe(g.group_id, topics)
        except KafkaError as exc:
            groups.append({"group_id": g.group_id, "topics": [], "error_code": exc.code,
                           "error_message": str(exc) or None})
            continue
        by_topic: dict[str, list] = {}
        for o in offsets:
            by_topic.setdefault(o.tp.topic, []).append({
                "partition_index": o.tp.partition, "start_offset": o.start_offset, "leader_epoch": o.leader_epoch,
                "lag": o.lag, "error_code": o.error.code if o.error else 0,
                "error_message": str(o.error) if o.error else None})
        groups.append({"group_id": g.group_id, "error_code": 0, "topics": [
            {"topic_name": name, "topic_id": _topic_id(broker, name), "partitions": partitions}
            for name, partitions in by_topic.items()]})
    return {"groups": groups}


def _topic_id(broker, name: str):
    info = broker.store.topic(name)
    return info.topic_id if info is not None else None
