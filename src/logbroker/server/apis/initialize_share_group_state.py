"""InitializeShareGroupState (api key 83), v0: start a share-partition's state at a start offset
with a state epoch (inter-broker, KIP-932); an epoch older than the stored one is
FENCED_STATE_EPOCH."""

from __future__ import annotations

from logbroker.server.apis._share_state import per_partition

API_KEY = 83


async def handle(broker, request) -> dict:
    async def answer(key, p) -> dict:
        await broker.share_coordinator.initialize_state(key, state_epoch=p.state_epoch, start_offset=p.start_offset)
        return {}
    return await per_partition(broker, request, answer, on_error={})
