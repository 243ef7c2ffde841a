"""ListGroups (api key 16), v0-5: the groups this broker coordinates.

v3+ adds each group's state, v4 a states filter, v5 a types filter and each group's type
("classic", "consumer", "share"); both filters match case-insensitively, as Kafka's.
"""

from __future__ import annotations
from logbroker.errors import CoordinatorLoadInProgressError
from logbroker.security.acl import AclOperation
from logbroker.server.authorization import GROUP, allowed, cluster_allowed

API_KEY = 16


def handle(broker, request) -> dict:
    body = request.body
    states = {s.lower() for s in getattr(body, "states_filter", ())}
    types = {t.lower() for t in getattr(body, "types_filter", ())}
    groups = [{"group_id": g.group_id, "protocol_type": g.protocol_type or "", "group_state": g.state_name,
               "group_type": g.group_type.value}
              for g in broker.group_coordinator.owned_groups()
              if (not states or g.state_name.lower() in states) and (not types or g.group_type.value in types)]
    if not cluster_allowed(broker, request, AclOperation.DESCRIBE, log_denied=False):
        groups = [g for g in groups if allowed(broker, request, AclOperation.DESCRIBE, GROUP,
                                               g["group_id"], log_denied=False)]
    # As Kafka: what is loaded so far, with COORDINATOR_LOAD_IN_PROGRESS while a partition loads.
    loading = broker.group_coordinator.is_loading
    return {"error_code": CoordinatorLoadInProgressError.code if loading else 0, "groups": groups}
