"""ReadShareGroupStateSummary (api key 87), v0-1: a share-partition's state epoch, leader epoch
and start offset without its batches (inter-broker, KIP-932; what describing a share group's
offsets needs); from v1 also how many offsets past the start offset are settled. A key never
initialized answers -1s."""

from __future__ import annotations

from logbroker.server.apis._share_state import per_partition

API_KEY = 87
UNINITIALIZED = {"state_epoch": -1, "leader_epoch": -1, "start_offset": -1, "delivery_complete_count": -1}
SETTLED = (2, 4)  # ACKNOWLEDGED, ARCHIVED
INT32_MAX = 2**31 - 1  # the field is int32; a writer's batches may span more offsets


async def handle(broker, request) -> dict:
    def answer(key, _p) -> dict:
        state = broker.share_coordinator.read_state(key)
        if state is None:
            return UNINITIALIZED
        complete = sum(max(b.last_offset - b.first_offset + 1, 0)
                       for b in state.state_batches if b.state in SETTLED)
        return {"state_epoch": state.state_epoch, "leader_epoch": state.leader_epoch,
                "start_offset": state.start_offset, "delivery_complete_count": min(complete, INT32_MAX)}
    return await per_partition(broker, request, answer, on_error=UNINITIALIZED)
