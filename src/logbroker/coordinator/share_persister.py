"""The share persister: how a share-partition leader reads and writes its state (KIP-932).

Kafka's DefaultStatePersister. The state of a share-partition is kept by the share coordinator
of its key (the leader of its `__share_group_state` partition). When that is this broker the
call is direct (ShareCoordinator); otherwise it is a ReadShareGroupState v0 / WriteShareGroupState
v1 / DeleteShareGroupState v0 request over the inter-broker listener. Reads and writes carry the
share-partition leader's leader epoch and the state epoch, which the share coordinator fences
(FENCED_LEADER_EPOCH, FENCED_STATE_EPOCH): a deposed leader cannot overwrite its successor's state.

While the share coordinator moves (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE,
COORDINATOR_LOAD_IN_PROGRESS, or its connection fails) a call is tried again against the
coordinator the metadata names then, as Kafka's PersisterStateManager does, with a backoff from
RETRY_BACKOFF_S doubling to MAX_RETRY_BACKOFF_S, for up to RETRY_BUDGET_S; then the error goes to
the caller (the share-partition answers the client's fetch or acknowledgement with it). Every
request here is idempotent (a read; a write of a whole state under its epochs; a delete), so a
connection that went stale because the coordinator restarted is retried at once on a new one.

The requests' kio schemas are imported where a request is built: only a cluster whose share
coordinator is another broker sends them, and on a single node they would be ~10 ms more on the
first share-group request.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from kio.static.primitive import i8, i16, i32, i64

from logbroker.client import PLAINTEXT, BrokerConnections, ClientSecurity, ConnectionClosedError
from logbroker.clock import Clock, SystemClock
from logbroker.coordinator.share_coordinator import ShareCoordinator
from logbroker.coordinator.share_partition import StateBatch
from logbroker.coordinator.share_state_log import SharePartitionKey, ShareSnapshot, ShareStateSummary, summary_of
from logbroker.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    NotCoordinatorError,
    error_for_code,
)

log = logging.getLogger("kafka.server.share.persister.PersisterStateManager")

RETRY_BACKOFF_S = 0.05
MAX_RETRY_BACKOFF_S = 1.0
RETRY_BUDGET_S = 10.0
_MOVING = (CoordinatorNotAvailableError, NotCoordinatorError, CoordinatorLoadInProgressError)


class SharePersister:
    def __init__(self, *, broker_id: int, coordinator: ShareCoordinator,
                 endpoint: Callable[[int], tuple[str, int] | None] = lambda broker_id: None,
                 security: ClientSecurity = PLAINTEXT, request_timeout_ms: int = 30_000,
                 clock: Clock | None = None) -> None:
        self.broker_id = broker_id
        self.coordinator = coordinator
        self._clock = clock or SystemClock()
        self._connections = BrokerConnections(endpoint=endpoint, security=security, timeout_ms=request_timeout_ms,
                                              client_id=f"broker-{broker_id}-share-persister")

    def _remote_leader(self, key: SharePartitionKey) -> int | None:
        """The coordinator of `key` when it is another broker; None when it is this one."""
        self.coordinator.ensure_state_topic()
        if self.coordinator.is_local(key):
            return None
        leader = self.coordinator.leader_of(key)
        if leader < 0:
            raise CoordinatorNotAvailableError(f"No share coordinator for {key.coordinator_key()} yet")
        if leader == self.broker_id:
            return None  # leading, not loaded yet: the local call answers NOT_COORDINATOR
        return leader

    async def _retrying(self, key: SharePartitionKey, what: str, call: Callable[[], Awaitable]):
        """`call()` until it succeeds, tried again while the share coordinator of `key` moves
        (up to RETRY_BUDGET_S)."""
        deadline_ms = self._clock.monotonic_ms() + RETRY_BUDGET_S * 1000
        backoff_s = RETRY_BACKOFF_S
        while True:
            try:
                return await call()
            except _MOVING as exc:
                if self._clock.monotonic_ms() + backoff_s * 1000 > deadline_ms:
                    log.warning("%s the share-group state of %s failed: %s", what, key.coordinator_key(), exc)
                    raise
                await asyncio.sleep(backoff_s)
                backoff_s = min(backoff_s * 2, MAX_RETRY_BACKOFF_S)

    async def read(self, key: SharePartitionKey, *, leader_epoch: int = -1) -> ShareSnapshot | None:
        """The stored state of `key` (None: never initialized), read by the leader of the
        share-partition at `leader_epoch`; from then on the share coordinator fences writes of
        older leader epochs."""
        return await self._retrying(key, "Reading", lambda: self._read(key, leader_epoch))

    async def read_summary(self, key: SharePartitionKey) -> ShareStateSummary:
        """ReadShareGroupStateSummary v1 (describing a group's offsets): not retried, a moving
        coordinator's error comes back at once."""
        leader = self._remote_leader(key)
        if leader is None:
            return summary_of(self.coordinator.read_state(key))
        from kio.schema.read_share_group_state_summary.v1.request import PartitionData as SummaryPartition
        from kio.schema.read_share_group_state_summary.v1.request import (
            ReadShareGroupStateSummaryRequest,
            ReadStateSummaryData,
        )

        response = await self._call(leader, ReadShareGroupStateSummaryRequest(group_id=key.group_id, topics=(
            ReadStateSummaryData(topic_id=key.topic_id, partitions=(
                SummaryPartition(partition=i32(key.partition), leader_epoch=i32(-1)),)),)))
        result = response.results[0].partitions[0]
        if (error := error_for_code(result.error_code, result.error_message or "")) is not None:
            raise error
        return ShareStateSummary(result.state_epoch, result.leader_epoch, result.start_offset,
                                 result.delivery_complete_count)

    async def _read(self, key: SharePartitionKey, leader_epoch: int) -> ShareSnapshot | None:
        leader = self._remote_leader(key)
        if leader is None:
            return await self.coordinator.read_for_leader(key, leader_epoch=leader_epoch)
        from kio.schema.read_share_group_state.v0.request import PartitionData as ReadPartition
        from kio.schema.read_share_group_state.v0.request import ReadShareGroupStateRequest, ReadStateData

        request = ReadShareGroupStateRequest(group_id=key.group_id, topics=(ReadStateData(
            topic_id=key.topic_id, partitions=(ReadPartition(partition=i32(key.partition),
                                                             leader_epoch=i32(leader_epoch)),)),))
        response = await self._call(leader, request)
        result = response.results[0].partitions[0]
        if (error := error_for_code(result.error_code, result.error_message or "")) is not None:
            raise error
        if result.state_epoch < 0 and result.start_offset < 0:
            return None
        return ShareSnapshot(0, result.state_epoch, -1, result.start_offset, tuple(
            StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in result.state_batches))

    async def write(self, key: SharePartitionKey, snapshot: ShareSnapshot) -> None:
        await self._retrying(key, "Writing", lambda: self._write(key, snapshot))

    async def _write(self, key: SharePartitionKey, snapshot: ShareSnapshot) -> None:
        leader = self._remote_leader(key)
        if leader is None:
            await self.coordinator.write_state(key, snapshot)
            return
        from kio.schema.write_share_group_state.v1.request import PartitionData as WritePartition
        from kio.schema.write_share_group_state.v1.request import StateBatch as WireStateBatch
        from kio.schema.write_share_group_state.v1.request import WriteShareGroupStateRequest, WriteStateData

        request = WriteShareGroupStateRequest(group_id=key.group_id, topics=(WriteStateData(
            topic_id=key.topic_id, partitions=(WritePartition(
                partition=i32(key.partition), state_epoch=i32(snapshot.state_epoch),
                leader_epoch=i32(snapshot.leader_epoch), start_offset=i64(snapshot.start_offset),
                delivery_complete_count=i32(-1),
                state_batches=tuple(WireStateBatch(first_offset=i64(b.first_offset), last_offset=i64(b.last_offset),
                                                   delivery_state=i8(b.state), delivery_count=i16(b.delivery_count))
                                    for b in snapshot.state_batches)),)),))
        response = await self._call(leader, request)
        result = response.results[0].partitions[0]
        if (error := error_for_code(result.error_code, result.error_message or "")) is not None:
            raise error

    async def delete(self, key: SharePartitionKey) -> None:
        await self._retrying(key, "Deleting", lambda: self._delete(key))

    async def _delete(self, key: SharePartitionKey) -> None:
        leader = self._remote_leader(key)
        if leader is None:
            await self.coordinator.delete_state(key)
            return
        from kio.schema.delete_share_group_state.v0.request import DeleteShareGroupStateRequest, DeleteStateData
        from kio.schema.delete_share_group_state.v0.request import PartitionData as DeletePartition

        request = DeleteShareGroupStateRequest(group_id=key.group_id, topics=(DeleteStateData(
            topic_id=key.topic_id, partitions=(DeletePartition(partition=i32(key.partition)),)),))
        response = await self._call(leader, request)
        result = response.results[0].partitions[0]
        if (error := error_for_code(result.error_code, result.error_message or "")) is not None:
            raise error

    async def _call(self, leader: int, request):
        try:
            return await self._connections.request(leader, request, idempotent=True)
        except ConnectionClosedError as exc:
            raise CoordinatorNotAvailableError(f"Share coordinator {leader} unreachable: {exc}") from exc

    async def close(self) -> None:
        await self._connections.close()
