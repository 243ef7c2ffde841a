"""One Kafka request to one chosen broker, through logbroker's own client (kio message classes):
for the cluster tests that must address a particular broker, which the real clients' admin calls
do not let them choose."""

from __future__ import annotations

import asyncio

from logbroker.client import KafkaConnection


def send(broker, body):
    """Send `body` (a kio request) to `broker` (a BrokerProcess) and return the decoded response."""
    async def round_trip():
        connection = KafkaConnection(broker.host, broker.port)
        try:
            return await connection.request(body)
        finally:
            await connection.close()
    return asyncio.run(round_trip())
