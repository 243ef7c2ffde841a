"""What each broker's log dirs hold, from DescribeLogDirs: for `logbroker log-dirs`, the Log dirs
table of `logbroker status`, the web console's overview, and the local and remote sizes of each
partition in `logbroker topics --describe` and the console's topic page.

confluent-kafka (librdkafka) has no DescribeLogDirs call, so this asks over logbroker.client
connections: the brokers from a Metadata request to the bootstrap broker, then each broker over
a connection of its own (a broker only describes its own dirs).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from logbroker.client import PLAINTEXT, ClientSecurity, KafkaConnection
from logbroker.errors import KafkaError, error_name
from logbroker.protocol.responses.describe_log_dirs import (
    LogDirPartition,
    LogDirResult,
    decode_describe_log_dirs_response,
)


@dataclass(frozen=True, slots=True)
class LogDirUsage:
    """One log dir of one broker. -1 bytes where the broker does not say (a failed dir)."""

    broker_id: int
    log_dir: str
    size_bytes: int  # every partition's .log files
    total_bytes: int
    usable_bytes: int


async def broker_addresses(connection: KafkaConnection) -> dict[int, tuple[str, int]]:
    """Broker id → (host, port), from a Metadata request for no topics."""
    from kio.schema.metadata.v12.request import MetadataRequest
    response = await connection.request(MetadataRequest(
        topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    return {b.node_id: (b.host, b.port) for b in response.brokers}


async def describe_log_dirs(connection: KafkaConnection) -> list[LogDirResult]:
    """The DescribeLogDirs v4 results of the broker at the other end, every partition, with each tiered partition's remote log where the broker knows
    it; a top-level error (CLUSTER_AUTHORIZATION_FAILED) raises KafkaError. Decoded by hand
    (protocol/responses/describe_log_dirs.py): kio refuses the tagged field that carries the
    remote log."""
    from kio.schema.describe_log_dirs.v4.request import DescribeLogDirsRequest
    frame = await connection.request_frame(DescribeLogDirsRequest(topics=None))
    try:
        code, results = decode_describe_log_dirs_response(4, frame)
    except ValueError as e:
        raise KafkaError(str(e)) from None
    if code:
        raise KafkaError(f"DescribeLogDirs answered {error_name(code)}")
    return results


def log_dir_usage(bootstrap: str, security: ClientSecurity = PLAINTEXT) -> list[LogDirUsage]:
    """Every log dir of every broker of the cluster at `bootstrap`. Runs its own event loop;
    raises OSError or KafkaError when a broker cannot be reached or refuses."""
    return [LogDirUsage(broker_id, d.log_dir, sum(p.partition_size for t in d.topics for p in t.partitions),
                        d.total_bytes, d.usable_bytes)
            for broker_id, results in sorted(_every_broker(bootstrap, security).items()) for d in results]


def replica_sizes(bootstrap: str, security: ClientSecurity = PLAINTEXT, *,
                  topics: set[str]) -> dict[tuple[int, str, int], LogDirPartition]:
    """(broker id, topic, partition) → that broker's current replica of a partition of `topics`:
    its local bytes and, for a tiered partition the broker knows the remote segments of, its
    remote log (`remote`). For `logbroker topics --describe` and the console's topic page, which
    show the leader's. Raises as log_dir_usage does."""
    return {(broker_id, t.name, p.partition_index): p
            for broker_id, results in _every_broker(bootstrap, security).items()
            for d in results for t in d.topics if t.name in topics
            for p in t.partitions if not p.is_future_key}


def _every_broker(bootstrap: str, security: ClientSecurity) -> dict[int, list[LogDirResult]]:
    """Broker id → its DescribeLogDirs results, each broker over a connection of its own."""
    async def main() -> dict[int, list[LogDirResult]]:
        host, port = bootstrap.split(",")[0].strip().rsplit(":", 1)
        connections = [KafkaConnection(host, int(port), client_id="logbroker-log-dirs", timeout_s=10,
                                       security=security)]
        answers = {}
        try:
            for broker_id, (b_host, b_port) in sorted((await broker_addresses(connections[0])).items()):
                connections.append(KafkaConnection(b_host, b_port, client_id="logbroker-log-dirs",
                                                   timeout_s=10, security=security))
                answers[broker_id] = await describe_log_dirs(connections[-1])
        finally:
            for connection in connections:
                await connection.close()
        return answers
    return asyncio.run(main())
