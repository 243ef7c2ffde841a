"""The share persister: how a share-partition leader reads and writes its state (KIP-932).

Kafka's DefaultStatePersister. The state of a share-partition is kept by the share coordinator
of its key (the leader of its `__share_group_state` partition). When that is this broker the
call is direct (ShareCoordinator); otherwise it is a ReadShareGroupState v0 / WriteShareGroupState
v1 / DeleteShareGroupState v0 request over the inter-broker listener. Errors come back as KafkaErrors: NOT_COORDINATOR,
COORDINATOR_NOT_AVAILABLE and COORDINATOR_LOAD_IN_PROGRESS are retriable for the caller (the
share-partition answers the client's fetch or acknowledgement with the error, the client
retries), FENCED_STATE_EPOCH is not.

The requests' kio schemas are imported where a request is built: only a cluster whose share
coordinator is another broker sends them, and on a single node they would be ~10 ms more on the
first share-group request.
"""

from __future__ import annotations

from collections.abc import Callable

from kio.static.primitive import i8, i16, i32, i64

from logbroker.client import PLAINTEXT, BrokerConnections, ClientSecurity, ConnectionClosedError
from logbroker.coordinator.share_coordinator import ShareCoordinator
from logbroker.coordinator.share_partition import StateBatch
from logbroker.coordinator.share_state_log import SharePartitionKey, ShareSnapshot
from logbroker.errors import CoordinatorNotAvailableError, error_for_code


class SharePersister:
    def __init__(self, *, broker_id: int, coordinator: ShareCoordinator,
                 endpoint: Callable[[int], tuple[str, int] | None] = lambda broker_id: None,
                 security: ClientSecurity = PLAINTEXT, request_timeout_ms: int = 30_000) -> None:
        self.broker_id = broker_id
        self.coordinator = coordinator
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

    async def read(self, key: SharePartitionKey) -> ShareSnapshot | None:
        leader = self._remote_leader(key)
        if leader is None:
            return self.coordinator.read_state(key)
        from kio.schema.read_share_group_state.v0.request import PartitionData as ReadPartition
        from kio.schema.read_share_group_state.v0.request import ReadShareGroupStateRequest, ReadStateData

        request = ReadShareGroupStateRequest(group_id=key.group_id, topics=(ReadStateData(
            topic_id=key.topic_id, partitions=(ReadPartition(partition=i32(key.partition), leader_epoch=i32(-1)),)),))
        response = await self._call(leader, request)
        result = response.results[0].partitions[0]
        if (error := error_for_code(result.error_code, result.error_message or "")) is not None:
            raise error
        if result.state_epoch < 0 and result.start_offset < 0:
            return None
        return ShareSnapshot(0, result.state_epoch, -1, result.start_offset, tuple(
            StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in result.state_batches))

    async def write(self, key: SharePartitionKey, snapshot: ShareSnapshot) -> None:
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
        connection = self._connections.get(leader)
        if connection is None:
            raise CoordinatorNotAvailableError(f"No endpoint known for share coordinator {leader}")
        try:
            return await connection.request(request)
        except ConnectionClosedError as exc:
            raise CoordinatorNotAvailableError(f"Share coordinator {leader} unreachable: {exc}") from exc

    async def close(self) -> None:
        await self._connections.close()
