"""ReadShareGroupState (api key 84), v0: a share-partition leader reads the state the share
coordinator keeps (inter-broker, KIP-932), with its leader epoch: an older one than the
coordinator has seen is FENCED_LEADER_EPOCH, a newer one is stored before the answer (and fences
writes of older epochs from then on). A key never initialized answers state epoch -1 and start
offset -1."""

from __future__ import annotations

from logbroker.server.apis._share_state import per_partition

API_KEY = 84
UNINITIALIZED = {"state_epoch": -1, "start_offset": -1, "state_batches": []}


async def handle(broker, request) -> dict:
    async def answer(key, p) -> dict:
        state = await broker.share_coordinator.read_for_leader(key, leader_epoch=p.leader_epoch)
        if state is None:
            return UNINITIALIZED
        return {"state_epoch": state.state_epoch, "start_offset": state.start_offset, "state_batches": [
            {"first_offset": b.first_offset, "last_offset": b.last_offset, "delivery_state": b.state,
             "delivery_count": b.delivery_count} for b in state.state_batches]}
    return await per_partition(broker, request, answer, on_error=UNINITIALIZED)
