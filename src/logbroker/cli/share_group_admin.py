"""The cluster requests of `logbroker share-groups`, over logbroker.client connections (asyncio).

confluent-kafka's AdminClient has no share-group calls, so the tool speaks the protocol itself:
FindCoordinator (key type GROUP) for the group's coordinator, then ListGroups (every broker,
types filter "share"), ShareGroupDescribe, DescribeShareGroupOffsets, AlterShareGroupOffsets,
DeleteShareGroupOffsets and DeleteGroups there; ListOffsets on partition leaders for the reset
targets. Each answers plain values or raises click.ClickException with one sentence.
"""

from __future__ import annotations

import click

from logbroker.cli.admin_connections import AdminConnections
from logbroker.errors import error_name


def _failed(what: str, code: int) -> click.ClickException:
    return click.ClickException(f"{what}: {error_name(code)}")


def _error_text(code: int, message: str | None) -> str | None:
    if not code:
        return None
    return f"{error_name(code)}: {message}" if message else error_name(code)


class ShareAdmin(AdminConnections):
    def __init__(self, bootstrap: str, security=None) -> None:
        super().__init__(bootstrap, security, client_id="logbroker-share-groups")
        self.leaders: dict[tuple[str, int], int] = {}
        self.topic_partitions: dict[str, list[int]] = {}

    async def metadata(self) -> None:
        from kio.schema.metadata.v12.request import MetadataRequest
        response = await self._bootstrap.request(MetadataRequest(
            topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False))
        self.brokers = {b.node_id: (b.host, b.port) for b in response.brokers}
        for t in response.topics:
            self.topic_partitions[t.name] = sorted(p.partition_index for p in t.partitions)
            for p in t.partitions:
                self.leaders[(t.name, p.partition_index)] = p.leader_id

    async def coordinator(self, group_id: str):
        from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest
        response = await self._bootstrap.request(FindCoordinatorRequest(key=group_id, key_type=0))
        if int(response.error_code):
            raise _failed(f"Finding the coordinator of group {group_id} failed", int(response.error_code))
        return self.connection(response.node_id), response.node_id

    async def list_groups(self) -> list[tuple[str, str]]:
        """(group id, state) of every share group, from every broker."""
        from kio.schema.list_groups.v5.request import ListGroupsRequest
        groups = []
        for broker_id in sorted(self.brokers):
            response = await self.connection(broker_id).request(
                ListGroupsRequest(states_filter=(), types_filter=("share",)))
            if int(response.error_code):
                raise _failed(f"Listing groups on broker {broker_id} failed", int(response.error_code))
            groups += [(g.group_id, g.group_state) for g in response.groups if g.group_type == "share"]
        return sorted(groups)

    async def describe(self, group_id: str):
        from kio.schema.share_group_describe.v1.request import ShareGroupDescribeRequest
        connection, node_id = await self.coordinator(group_id)
        response = await connection.request(ShareGroupDescribeRequest(group_ids=(group_id,),
                                                                      include_authorized_operations=False))
        group = response.groups[0]
        if int(group.error_code):
            raise _failed(f"Group {group_id}", int(group.error_code))
        return group, node_id

    async def offsets(self, group_id: str) -> list[tuple[str, int, int, int, int, str | None]]:
        """(topic, partition, start offset, leader epoch, lag, error) of each partition with state,
        and of each whose state could not be read (the error: its name and message)."""
        from kio.schema.describe_share_group_offsets.v1.request import (
            DescribeShareGroupOffsetsRequest,
            DescribeShareGroupOffsetsRequestGroup,
        )
        connection, _ = await self.coordinator(group_id)
        response = await connection.request(DescribeShareGroupOffsetsRequest(groups=(
            DescribeShareGroupOffsetsRequestGroup(group_id=group_id, topics=None),)))
        group = response.groups[0]
        if int(group.error_code):
            raise _failed(f"Describing the offsets of group {group_id} failed", int(group.error_code))
        return sorted((t.topic_name, p.partition_index, p.start_offset, p.leader_epoch, p.lag,
                       _error_text(int(p.error_code), p.error_message))
                      for t in group.topics for p in t.partitions)

    async def list_offsets(self, partitions: list[tuple[str, int]], timestamp: int) -> dict[tuple[str, int], int]:
        """The offset ListOffsets gives for `timestamp` (-2 earliest, -1 latest, else a time)."""
        from kio.schema.list_offsets.v7.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
        result = {}
        for topic, partition in partitions:
            leader = self.leaders.get((topic, partition), -1)
            if leader < 0:
                raise click.ClickException(f"Partition {topic}-{partition} has no leader")
            response = await self.connection(leader).request(ListOffsetsRequest(
                replica_id=-1, isolation_level=0, topics=(ListOffsetsTopic(name=topic, partitions=(
                    ListOffsetsPartition(partition_index=partition, current_leader_epoch=-1, timestamp=timestamp),)),)))
            p = response.topics[0].partitions[0]
            if int(p.error_code):
                raise _failed(f"Listing offsets of {topic}-{partition} failed", int(p.error_code))
            if p.offset < 0:  # no record at or after the time: the end
                return {**result, **await self.list_offsets([(topic, partition)], -1)}
            result[(topic, partition)] = p.offset
        return result

    async def alter(self, group_id: str, offsets: dict[tuple[str, int], int]) -> None:
        from kio.schema.alter_share_group_offsets.v0.request import (
            AlterShareGroupOffsetsRequest,
            AlterShareGroupOffsetsRequestPartition,
            AlterShareGroupOffsetsRequestTopic,
        )
        by_topic: dict[str, list] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append(
                AlterShareGroupOffsetsRequestPartition(partition_index=partition, start_offset=offset))
        connection, _ = await self.coordinator(group_id)
        response = await connection.request(AlterShareGroupOffsetsRequest(group_id=group_id, topics=tuple(
            AlterShareGroupOffsetsRequestTopic(topic_name=t, partitions=tuple(ps)) for t, ps in by_topic.items())))
        if int(response.error_code):
            raise _failed(f"Resetting the offsets of group {group_id} failed", int(response.error_code))
        for t in response.responses:
            for p in t.partitions:
                if int(p.error_code):
                    raise _failed(f"Resetting {t.topic_name}-{p.partition_index} failed", int(p.error_code))

    async def delete_offsets(self, group_id: str, topics: list[str]) -> list[tuple[str, int]]:
        from kio.schema.delete_share_group_offsets.v0.request import (
            DeleteShareGroupOffsetsRequest,
            DeleteShareGroupOffsetsRequestTopic,
        )
        connection, _ = await self.coordinator(group_id)
        response = await connection.request(DeleteShareGroupOffsetsRequest(group_id=group_id, topics=tuple(
            DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in topics)))
        if int(response.error_code):
            raise _failed(f"Deleting offsets of group {group_id} failed", int(response.error_code))
        return [(t.topic_name, int(t.error_code)) for t in response.responses]

    async def delete_group(self, group_id: str) -> int:
        from kio.schema.delete_groups.v2.request import DeleteGroupsRequest
        connection, _ = await self.coordinator(group_id)
        response = await connection.request(DeleteGroupsRequest(groups_names=(group_id,)))
        return int(response.results[0].error_code)
