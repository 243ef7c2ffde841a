"""The cluster requests of `logbroker groups`, through confluent-kafka's AdminClient: each
blocks for at most the tool's --timeout and answers with plain values, or fails the tool with one
sentence (`common.fail_with`)."""

from __future__ import annotations

from logbroker.cli import group_views as views
from logbroker.cli.common import fail_with


class Cluster:
    """The admin requests the tool makes, each failing the tool with one sentence."""

    def __init__(self, admin, bootstrap: str, timeout_s: float) -> None:
        self.admin = admin
        self.bootstrap = bootstrap
        self.timeout_s = timeout_s

    def _result(self, future, what: str | None = None):
        from confluent_kafka import KafkaException
        try:
            return future.result()
        except KafkaException as e:
            fail_with(e, self.bootstrap, what=what)

    def list_groups(self) -> list[views.GroupListing]:
        result = self._result(self.admin.list_consumer_groups(request_timeout=self.timeout_s))
        return sorted((views.GroupListing(g.group_id, state_name(g.state), type_name(g.type)) for g in result.valid),
                      key=lambda g: g.group_id)

    def list_share_groups(self) -> list[views.GroupListing]:
        """The share groups (KIP-932), which confluent-kafka's AdminClient does not list: a
        ListGroups with the types filter "share" to every broker (cli/share_group_admin.py)."""
        import asyncio

        import click

        from logbroker.cli.share_group_admin import ShareAdmin

        async def listed():
            admin = ShareAdmin(self.bootstrap)
            try:
                await admin.metadata()
                return await admin.list_groups()
            finally:
                await admin.close()
        try:
            return [views.GroupListing(group_id, state, "Share") for group_id, state in asyncio.run(listed())]
        except (OSError, click.ClickException) as e:
            fail_with(e, self.bootstrap)

    def describe(self, group: str):
        """The ConsumerGroupDescription, or None for a group that does not exist."""
        from confluent_kafka import KafkaError, KafkaException
        future = self.admin.describe_consumer_groups([group], request_timeout=self.timeout_s)[group]
        try:
            description = future.result()
        except KafkaException as e:
            if e.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND:
                return None
            fail_with(e, self.bootstrap)
        return None if state_name(description.state) == "Dead" else description

    def committed(self, group: str) -> dict[tuple[str, int], int]:
        from confluent_kafka import ConsumerGroupTopicPartitions
        request = [ConsumerGroupTopicPartitions(group)]
        futures = self.admin.list_consumer_group_offsets(request, request_timeout=self.timeout_s)
        result = self._result(futures[group])
        return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions
                if tp.error is None and tp.offset >= 0}

    def list_offsets(self, partitions, spec) -> dict[tuple[str, int], int | None]:
        """(topic, partition) → the offset `spec` names (OffsetSpec), None where unknown."""
        from confluent_kafka import KafkaException, TopicPartition
        if not partitions:
            return {}
        request = {TopicPartition(t, p): spec for t, p in partitions}
        futures = self.admin.list_offsets(request, request_timeout=self.timeout_s)
        offsets: dict[tuple[str, int], int | None] = {}
        for tp, future in futures.items():
            try:
                offsets[(tp.topic, tp.partition)] = future.result().offset
            except KafkaException:
                offsets[(tp.topic, tp.partition)] = None
        return offsets

    def partitions_of(self, topics: list[str]) -> dict[str, list[int] | None]:
        """Each topic's partition ids, None for a topic the cluster does not have."""
        from confluent_kafka import KafkaException
        try:
            metadata = self.admin.list_topics(timeout=self.timeout_s)
        except KafkaException as e:
            fail_with(e, self.bootstrap)
        return {t: sorted(metadata.topics[t].partitions) if t in metadata.topics
                and metadata.topics[t].error is None else None for t in topics}


def state_name(state) -> str:
    return views.STATE_NAMES.get(getattr(state, "name", str(state)), "Unknown")


def type_name(group_type) -> str:
    return views.TYPE_NAMES.get(getattr(group_type, "name", str(group_type)), "Unknown")
