"""ListGroups (api key 16), v0-5: the groups this broker coordinates.

v3+ adds each group's state, v4 a states filter (matched case-insensitively), v5 a types filter
(every group here is "classic").
"""

from __future__ import annotations

API_KEY = 16


def handle(broker, request) -> dict:
    body = request.body
    states = {s.lower() for s in getattr(body, "states_filter", ())}
    types = {t.lower() for t in getattr(body, "types_filter", ())}
    if types and "classic" not in types:
        return {"error_code": 0, "groups": []}
    groups = [{"group_id": g.group_id, "protocol_type": g.protocol_type or "", "group_state": g.state.value,
               "group_type": "classic"}
              for g in broker.group_coordinator.owned_groups()
              if not states or g.state.value.lower() in states]
    return {"error_code": 0, "groups": groups}
