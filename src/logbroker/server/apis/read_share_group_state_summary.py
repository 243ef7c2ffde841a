"""ReadShareGroupStateSummary (api key 87), v0-1: a share-partition's state epoch, leader epoch
and start offset without its batches (inter-broker, KIP-932; what describing a share group's
offsets needs); from v1 also how many offsets past the start offset are settled. A key never
initialized answers -1s."""

from __future__ import annotations

from dataclasses import asdict

from logbroker.coordinator.share_state_log import ShareStateSummary, summary_of
from logbroker.server.apis._share_state import per_partition

API_KEY = 87
UNINITIALIZED = asdict(ShareStateSummary())


async def handle(broker, request) -> dict:
    def answer(key, _p) -> dict:
        return asdict(summary_of(broker.share_coordinator.read_state(key)))
    return await per_partition(broker, request, answer, on_error=UNINITIALIZED)
