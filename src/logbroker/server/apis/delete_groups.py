"""DeleteGroups (api key 42), v0-2: remove empty groups and their committed offsets.

Per group: GROUP_ID_NOT_FOUND when unknown, NON_EMPTY_GROUP while it has members; otherwise
tombstones for its offsets and metadata are appended to `__consumer_offsets` before the answer.
A share group (KIP-932) loses its share-partitions' state in `__share_group_state`.
"""

from __future__ import annotations

from logbroker.coordinator.group import GroupType
from logbroker.errors import KafkaError
from logbroker.security.acl import AclOperation
from logbroker.server.authorization import require_group

API_KEY = 42


async def handle(broker, request) -> dict:
    results = []
    for group_id in request.body.groups_names:
        try:
            require_group(broker, request, AclOperation.DELETE, group_id)
            group = broker.group_coordinator.groups.get(group_id)
            if group is not None and group.group_type is GroupType.SHARE:
                broker.group_coordinator.check_group(group_id)
                await broker.share_group_offsets.delete_group(group_id)
            else:
                await broker.group_coordinator.delete_group(group_id)
            code = 0
        except KafkaError as exc:
            code = exc.code
        results.append({"group_id": group_id, "error_code": code})
    return {"results": results}
