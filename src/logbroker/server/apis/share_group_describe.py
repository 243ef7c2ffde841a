"""ShareGroupDescribe (api key 77), v1: state, epochs and members of share groups (KIP-932).

A group id that is not a share group (unknown, or a consumer group) is GROUP_ID_NOT_FOUND.
"""

from __future__ import annotations

from logbroker.errors import KafkaError
from logbroker.security.acl import AclOperation
from logbroker.server.authorization import require_group

API_KEY = 77
NO_AUTHORIZED_OPERATIONS = -2147483648
SIMPLE_ASSIGNOR = "simple"


def handle(broker, request) -> dict:
    groups = []
    for group_id in request.body.group_ids:
        try:
            require_group(broker, request, AclOperation.DESCRIBE, group_id)
            group = broker.group_coordinator.share.share_group(group_id)
        except KafkaError as exc:
            groups.append({"error_code": exc.code, "error_message": str(exc) or None, "group_id": group_id,
                           "group_state": "Dead", "group_epoch": -1, "assignment_epoch": -1,
                           "assignor_name": "", "members": [],
                           "authorized_operations": NO_AUTHORIZED_OPERATIONS})
            continue
        members = []
        for member in group.members.values():
            topics = []
            for name, partitions in sorted(broker.group_coordinator.share.assignment(member).items()):
                info = broker.store.topic(name)
                if info is not None:
                    topics.append({"topic_id": info.topic_id, "topic_name": name, "partitions": partitions})
            members.append({"member_id": member.member_id, "rack_id": member.rack_id,
                            "member_epoch": member.member_epoch, "client_id": member.client_id,
                            "client_host": member.client_host,
                            "subscribed_topic_names": list(member.subscribed_topic_names),
                            "assignment": {"topic_partitions": topics}})
        groups.append({"error_code": 0, "group_id": group_id, "group_state": group.state_name,
                       "group_epoch": group.group_epoch, "assignment_epoch": group.assignment_epoch,
                       "assignor_name": SIMPLE_ASSIGNOR, "members": members,
                       "authorized_operations": NO_AUTHORIZED_OPERATIONS})
    return {"groups": groups}
