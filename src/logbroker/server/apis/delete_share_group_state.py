"""DeleteShareGroupState (api key 86), v0: forget the state of share-partitions (inter-broker,
KIP-932: DeleteShareGroupOffsets and DeleteGroups of a share group). A tombstone is appended to
`__share_group_state` before the answer."""

from __future__ import annotations

from logbroker.server.apis._share_state import per_partition

API_KEY = 86


async def handle(broker, request) -> dict:
    async def answer(key, _p) -> dict:
        await broker.share_coordinator.delete_state(key)
        return {}
    return await per_partition(broker, request, answer, on_error={})
