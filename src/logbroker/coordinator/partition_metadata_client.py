"""The end offsets of partitions wherever they are led (Kafka's PartitionMetadataClient), for the
lag of a share group that the group coordinator reports (DescribeShareGroupOffsets v1).

A partition led here answers from its replica; the others with a ListOffsets v7 (latest,
read_uncommitted: the high watermark) to their leader over the inter-broker listener, one request
per leader. A partition whose end cannot be learnt now (no leader known, the leader unreachable
or answering an error) is simply missing from the answer: its lag is unknown (-1), which is not an
error of the describe. Runs on the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from logbroker.client import BrokerConnections, ConnectionClosedError
from logbroker.types import TopicPartition

log = logging.getLogger("kafka.server.PartitionMetadataClient")

LATEST_TIMESTAMP = -1


class PartitionMetadataClient:
    """`connections` reach the other brokers (their inter-broker listener)."""

    def __init__(self, *, broker_id: int, replica_manager, store, connections: BrokerConnections) -> None:
        self.broker_id = broker_id
        self.replica_manager = replica_manager
        self.store = store
        self._connections = connections

    async def high_watermarks(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        """The high watermark of each partition of `tps` whose end could be learnt."""
        result: dict[TopicPartition, int] = {}
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in tps:
            partition = self.replica_manager.partitions.get(tp)
            if partition is not None and partition.is_leader:
                result[tp] = partition.high_watermark
                continue
            state = self.store.partition_state(tp)
            if state is not None and state.leader >= 0 and state.leader != self.broker_id:
                by_leader.setdefault(state.leader, []).append(tp)
        for answer in await asyncio.gather(*(self._ask(leader, ps) for leader, ps in by_leader.items())):
            result.update(answer)
        return result

    async def _ask(self, leader: int, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        from kio.schema.list_offsets.v7.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic

        by_topic: dict[str, list[int]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        request = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=tuple(
            ListOffsetsTopic(name=topic, partitions=tuple(
                ListOffsetsPartition(partition_index=p, current_leader_epoch=-1, timestamp=LATEST_TIMESTAMP)
                for p in partitions)) for topic, partitions in by_topic.items()))
        try:
            response = await self._connections.request(leader, request, idempotent=True)  # a read
        except ConnectionClosedError as exc:
            log.info("Asking broker %d for the end offsets of %d partition(s) failed: %s", leader, len(tps), exc)
            return {}
        return {TopicPartition(t.name, p.partition_index): p.offset
                for t in response.topics for p in t.partitions if not int(p.error_code) and p.offset >= 0}

    async def close(self) -> None:
        await self._connections.close()
