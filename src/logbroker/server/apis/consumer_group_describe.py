"""ConsumerGroupDescribe (api key 69), v0-1: KIP-848 consumer groups as the coordinator sees them.

Per group: state (Empty, Assigning, Reconciling, Stable), group and assignment epochs, the
assignor, and per member its epoch, subscription, current and target assignment (topic id, name
and partitions); v1 adds each member's type (1: the consumer protocol). An unknown group, or a
group of another type, is GROUP_ID_NOT_FOUND with a message, as Kafka answers (the admin client
then describes a classic group with DescribeGroups).
"""

from __future__ import annotations

from logbroker.errors import GroupAuthorizationFailedError, KafkaError
from logbroker.security.acl import AclOperation
from logbroker.server.apis.describe_groups import NO_AUTHORIZED_OPERATIONS
from logbroker.server.authorization import GROUP, authorized_operations, require_group

API_KEY = 69


def handle(broker, request) -> dict:
    include_operations = request.body.include_authorized_operations
    groups = []
    for group_id in request.body.group_ids:
        try:
            require_group(broker, request, AclOperation.DESCRIBE, group_id)
            described = broker.group_coordinator.consumer_group_describe(group_id)
        except KafkaError as exc:
            described = {"error_code": exc.code, "error_message": str(exc) or None, "group_id": group_id,
                         "group_state": "", "group_epoch": -1, "assignment_epoch": -1, "assignor_name": "",
                         "members": []}
        described["authorized_operations"] = (
            authorized_operations(broker, request, GROUP, group_id)
            if include_operations and described["error_code"] != GroupAuthorizationFailedError.code
            else NO_AUTHORIZED_OPERATIONS)
        groups.append(described)
    return {"groups": groups}
