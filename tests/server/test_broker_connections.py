"""BrokerConnections (client.py), the broker-to-broker client, against a real broker that
restarts: a request on the connection to the dead process reads EOF (StaleConnectionError); an
idempotent one is sent again on a new connection, with one log line; a broker that comes back at
another address gets a new connection."""

from __future__ import annotations

import asyncio
import logging
import socket

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest

from logbroker.client import BrokerConnections, ConnectionClosedError, StaleConnectionError
from logbroker.testing import TEST_OVERRIDES, BrokerProcess

API_VERSIONS = ApiVersionsRequest(client_software_name="test", client_software_version="1")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def fixed_port_broker(tmp_path):
    """A broker that listens on the same port after a restart."""
    process = BrokerProcess(tmp_path / "b", overrides={
        **TEST_OVERRIDES, "listeners": f"PLAINTEXT://127.0.0.1:{free_port()}"})
    yield process.start()
    process.kill()


def test_an_idempotent_request_on_a_stale_connection_is_sent_again_once(fixed_port_broker, caplog):
    broker = fixed_port_broker
    connections = BrokerConnections(endpoint=lambda _id: (broker.host, broker.port), client_id="broker-9-test")

    async def scenario():
        try:
            assert (await connections.request(1, API_VERSIONS)).error_code == 0
            broker.kill()
            broker.start()
            with caplog.at_level(logging.INFO, logger="kafka.clients.NetworkClient"):
                answer = await connections.request(1, API_VERSIONS, idempotent=True)
            assert answer.error_code == 0
            assert len([r for r in caplog.records if "broke under ApiVersionsRequest" in r.getMessage()]) == 1
            broker.kill()
            broker.start()
            with pytest.raises(StaleConnectionError):
                await connections.request(1, API_VERSIONS)  # not idempotent: the caller decides
            assert (await connections.request(1, API_VERSIONS)).error_code == 0  # a new connection
            broker.kill()
            with pytest.raises(ConnectionClosedError) as refused:
                await connections.request(1, API_VERSIONS, idempotent=True)
            # Sent again once, and the new connection could not be opened: not retried further.
            assert type(refused.value) is ConnectionClosedError
        finally:
            await connections.close()
    asyncio.run(scenario())


def test_a_connection_the_peer_closed_while_idle_is_opened_anew_for_any_request(fixed_port_broker):
    broker = fixed_port_broker
    connections = BrokerConnections(endpoint=lambda _id: (broker.host, broker.port), client_id="broker-9-test")

    async def scenario():
        try:
            assert (await connections.request(1, API_VERSIONS)).error_code == 0
            broker.kill()
            broker.start()
            connection = connections.get(1)
            for _ in range(200):  # the loop sees the old process's end of the connection
                if connection._reader.at_eof() or connection._writer.transport.is_closing():
                    break
                await asyncio.sleep(0.01)
            # Nothing was sent on the closed connection: not stale, even for a request that is
            # not idempotent (a share state write, a transaction marker).
            assert (await connections.request(1, API_VERSIONS)).error_code == 0
        finally:
            await connections.close()
    asyncio.run(scenario())


def test_a_broker_back_at_another_address_gets_a_new_connection(logbroker_process):
    broker = logbroker_process
    connections = BrokerConnections(endpoint=lambda _id: (broker.host, broker.port), client_id="broker-9-test")

    async def scenario():
        try:
            first = connections.get(1)
            assert (await connections.request(1, API_VERSIONS)).error_code == 0
            old_port = broker.port
            broker.kill()
            broker.start()
            assert broker.port != old_port
            assert (await connections.request(1, API_VERSIONS)).error_code == 0
            assert connections.get(1) is not first and connections.get(1).port == broker.port
        finally:
            await connections.close()
    asyncio.run(scenario())
