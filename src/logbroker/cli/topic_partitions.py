"""The partitions `logbroker topics --describe` prints, read a page at a time with
DescribeTopicPartitions (KIP-966), as Kafka 3.8+'s kafka-topics.sh does: a topic of a hundred
thousand partitions never has to fit in one Metadata answer. A broker that does not offer the API
(ApiVersions says so) gets None, and the tool falls back to Metadata (librdkafka's describe_topics).
"""

from __future__ import annotations

import base64
import uuid

import click

from logbroker.cli.admin_connections import AdminConnections, client_security, run_admin
from logbroker.cli.common import load_properties_file
from logbroker.errors import error_name

DESCRIBE_TOPIC_PARTITIONS = 75
DEFAULT_PARTITION_SIZE_LIMIT = 2000  # kafka-topics.sh's --partition-size-limit-per-response


class TopicPartitionsAdmin(AdminConnections):
    def __init__(self, bootstrap: str, security=None) -> None:
        super().__init__(bootstrap, security, client_id="logbroker-topics")

    async def offers_describe_topic_partitions(self) -> bool:
        from kio.schema.api_versions.v3.request import ApiVersionsRequest
        response = await self._bootstrap.request(ApiVersionsRequest(
            client_software_name="logbroker-topics", client_software_version="1"))
        return any(int(k.api_key) == DESCRIBE_TOPIC_PARTITIONS for k in response.api_keys)

    async def describe(self, names: list[str], limit: int) -> dict[str, tuple[str, list]]:
        """topic → (topic id in Kafka's URL-safe base64, its partitions in order), every page
        asked for until the answer has no next cursor."""
        from kio.schema.describe_topic_partitions.v0.request import (
            Cursor,
            DescribeTopicPartitionsRequest,
            TopicRequest,
        )
        topics: dict[str, tuple[str, list]] = {}
        cursor = None
        while True:
            response = await self._bootstrap.request(DescribeTopicPartitionsRequest(
                topics=tuple(TopicRequest(name=n) for n in names), response_partition_limit=limit,
                cursor=cursor))
            for t in response.topics:
                if int(t.error_code):
                    raise click.ClickException(f"Topic {t.name}: {error_name(int(t.error_code))}")
                _, partitions = topics.setdefault(t.name, (kafka_topic_id(t.topic_id), []))
                partitions.extend(t.partitions)
            if response.next_cursor is None:
                return topics
            cursor = Cursor(topic_name=response.next_cursor.topic_name,
                            partition_index=response.next_cursor.partition_index)


def kafka_topic_id(topic_id: uuid.UUID) -> str:
    """A topic id as Kafka's tools print it: URL-safe base64 of its 16 bytes, no padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def describe_topic_partitions(bootstrap: str, command_config: str | None, names: list[str],
                              limit: int) -> dict[str, tuple[str, list]] | None:
    """`TopicPartitionsAdmin.describe` over a connection of its own; None when the broker does
    not offer DescribeTopicPartitions. Failures end the tool with one line."""
    security = client_security(load_properties_file(command_config, "--command-config"))

    async def work(admin: TopicPartitionsAdmin):
        if not await admin.offers_describe_topic_partitions():
            return None
        return await admin.describe(names, limit)
    return run_admin(bootstrap, lambda: TopicPartitionsAdmin(bootstrap, security), work)
