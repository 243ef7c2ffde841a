"""DescribeGroups (api key 15), v0-6: state, protocol and members of groups.

Member metadata and assignment are the opaque bytes the members sent, given only while the group
is Stable (as Kafka); an unknown group, or one of another type (a KIP-848 consumer group, which
ConsumerGroupDescribe describes), is answered as state "Dead" with no error (v0-5), or with
GROUP_ID_NOT_FOUND and an error_message from v6 (KIP-1043).
With include_authorized_operations (v3+) a described group carries the bit field of the group
operations (READ, DESCRIBE, DELETE) the caller may perform — all of them without an authorizer;
a group the caller may not describe gets GROUP_AUTHORIZATION_FAILED and no operations, as Kafka.
"""

from __future__ import annotations

from logbroker.errors import GroupAuthorizationFailedError, GroupIdNotFoundError, KafkaError
from logbroker.security.acl import AclOperation
from logbroker.server.authorization import GROUP, authorized_operations, require_group

API_KEY = 15
NO_AUTHORIZED_OPERATIONS = -2147483648


def handle(broker, request) -> dict:
    include_operations = getattr(request.body, "include_authorized_operations", False)
    groups = []
    for group_id in request.body.groups:
        try:
            require_group(broker, request, AclOperation.DESCRIBE, group_id)
            described = broker.group_coordinator.describe_group(group_id)
            if described["group_state"] == "Dead":
                raise GroupIdNotFoundError(f"Group {group_id} not found.")
        except GroupIdNotFoundError as exc:
            # Unknown, or of another type (a consumer group: "Group g is not a classic group."):
            # v6 says so (KIP-1043), older versions answer Dead.
            described = {"error_code": exc.code if request.api_version >= 6 else 0,
                         "error_message": str(exc) if request.api_version >= 6 else None,
                         "group_id": group_id, "group_state": "Dead", "protocol_type": "", "protocol_data": "",
                         "members": []}
        except KafkaError as exc:
            described = {"error_code": exc.code, "error_message": str(exc) or None,
                         "group_id": group_id, "group_state": "",
                         "protocol_type": "", "protocol_data": "", "members": []}
        described["authorized_operations"] = (
            authorized_operations(broker, request, GROUP, group_id)
            if include_operations and described["error_code"] != GroupAuthorizationFailedError.code
            else NO_AUTHORIZED_OPERATIONS)
        groups.append(described)
    return {"groups": groups}
