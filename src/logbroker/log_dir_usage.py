"""What each broker's log dirs hold, from DescribeLogDirs: for `logbroker log-dirs`, the Log dirs
table of `logbroker status` and the web console's overview.

confluent-kafka (librdkafka) has no DescribeLogDirs call, so this asks over logbroker.client
connections: the brokers from a Metadata request to the bootstrap broker, then each broker over
a connection of its own (a broker only describes its own dirs).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from logbroker.client import PLAINTEXT, ClientSecurity, KafkaConnection
from logbroker.errors import KafkaError, error_name


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


async def describe_log_dirs(connection: KafkaConnection) -> list:
    """The DescribeLogDirs v4 results of the broker at the other end, every partition; a
    top-level error (CLUSTER_AUTHORIZATION_FAILED) raises KafkaError."""
    from kio.schema.describe_log_dirs.v4.request import DescribeLogDirsRequest
    response = await connection.request(DescribeLogDirsRequest(topics=None))
    code = int(response.error_code)
    if code:
        raise KafkaError(f"DescribeLogDirs answered {error_name(code)}")
    return list(response.results)


def log_dir_usage(bootstrap: str, security: ClientSecurity = PLAINTEXT) -> list[LogDirUsage]:
    """Every log dir of every broker of the cluster at `bootstrap`. Runs its own event loop;
    raises OSError or KafkaError when a broker cannot be reached or refuses."""
    async def main() -> list[LogDirUsage]:
        host, port = bootstrap.split(",")[0].strip().rsplit(":", 1)
        connections = [KafkaConnection(host, int(port), client_id="logbroker-log-dirs", timeout_s=10,
                                       security=security)]
        usage = []
        try:
            for broker_id, (b_host, b_port) in sorted((await broker_addresses(connections[0])).items()):
                connections.append(KafkaConnection(b_host, b_port, client_id="logbroker-log-dirs",
                                                   timeout_s=10, security=security))
                usage += [LogDirUsage(broker_id, d.log_dir,
                                      sum(p.partition_size for t in d.topics for p in t.partitions),
                                      d.total_bytes, d.usable_bytes)
                          for d in await describe_log_dirs(connections[-1])]
        finally:
            for connection in connections:
                await connection.close()
        return usage
    return asyncio.run(main())
