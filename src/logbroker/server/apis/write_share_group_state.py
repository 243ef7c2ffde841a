"""WriteShareGroupState (api key 85), v0-1: a share-partition leader stores the state of a
share-partition with its share coordinator (inter-broker, KIP-932), answered once the
`__share_group_state` record is replicated. An older leader epoch than the coordinator has seen
is FENCED_LEADER_EPOCH, an older state epoch FENCED_STATE_EPOCH (-1: not given, not checked)."""

from __future__ import annotations

from logbroker.coordinator.share_partition import StateBatch
from logbroker.coordinator.share_state_log import ShareSnapshot
from logbroker.server.apis._share_state import per_partition

API_KEY = 85


async def handle(broker, request) -> dict:
    async def answer(key, p) -> dict:
        await broker.share_coordinator.write_state(key, ShareSnapshot(
            0, p.state_epoch, p.leader_epoch, p.start_offset,
            tuple(StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                  for b in p.state_batches)))
        return {}
    return await per_partition(broker, request, answer, on_error={})
