"""The logbroker.client connections of the tools that speak the Kafka protocol themselves, where
confluent-kafka's AdminClient has no call for what they need (`share-groups`, `transactions`,
and the quota and SCRAM requests of `configs`).

`AdminConnections` holds a connection to the first bootstrap broker and one to each broker the
tool talks to, opened on first use; `brokers` (id → host, port) is what the tool's Metadata
request found. `run_admin` runs a tool's asyncio work over one, closes every connection, and
turns what goes wrong into one line on stderr (exit code 1), as every tool does.
`client_security` reads the admin client's security properties (`--command-config`).

logbroker.client is imported only when a connection is made, so `logbroker --help` does not load
it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import click

from logbroker.cli.common import fail

T = TypeVar("T")
A = TypeVar("A", bound="AdminConnections")


def client_security(properties: dict[str, str]):
    """logbroker.client's ClientSecurity from client properties (security.protocol, sasl.mechanism,
    sasl.username/sasl.password or sasl.jaas.config (with tokenauth="true" for a delegation
    token, as Kafka's ScramLoginModule takes it), ssl.ca.location or ssl.truststore.location
    as PEM, ssl.endpoint.identification.algorithm)."""
    import ssl

    from logbroker.client import ClientSecurity
    protocol = properties.get("security.protocol", "PLAINTEXT").upper()
    ssl_context = None
    if protocol in ("SSL", "SASL_SSL"):
        ssl_context = ssl.create_default_context(
            cafile=properties.get("ssl.ca.location") or properties.get("ssl.truststore.location"))
        if properties.get("ssl.endpoint.identification.algorithm", "https") in ("", "none"):
            ssl_context.check_hostname = False
    if protocol not in ("SASL_PLAINTEXT", "SASL_SSL"):
        return ClientSecurity(protocol, ssl_context)
    username, password = properties.get("sasl.username", ""), properties.get("sasl.password", "")
    jaas = properties.get("sasl.jaas.config")
    token_auth = False
    if jaas and not username:
        from logbroker.security.jaas import parse_jaas
        options = parse_jaas(jaas)[2]
        username, password = options.get("username", ""), options.get("password", "")
        token_auth = options.get("tokenauth", "false").lower() == "true"  # a delegation token
    return ClientSecurity(protocol, ssl_context, properties.get("sasl.mechanism", "GSSAPI").upper(),
                          username, password, token_auth)


class AdminConnections:
    """A bootstrap connection and one connection per broker; see the module docstring."""

    def __init__(self, bootstrap: str, security=None, *, client_id: str) -> None:
        from logbroker.client import PLAINTEXT, KafkaConnection
        host, port = bootstrap.split(",")[0].strip().rsplit(":", 1)
        self._client_id = client_id
        self._security = security or PLAINTEXT
        self._bootstrap = KafkaConnection(host, int(port), client_id=client_id, timeout_s=10,
                                          security=self._security)
        self._connections: dict[int, object] = {}
        self.brokers: dict[int, tuple[str, int]] = {}

    def connection(self, broker_id: int):
        """The connection to a broker of `brokers`; fails (one line, exit 1) for another id."""
        from logbroker.client import KafkaConnection
        if broker_id not in self._connections:
            if broker_id not in self.brokers:
                fail(f"Broker {broker_id} is not in the cluster's metadata.")
            host, port = self.brokers[broker_id]
            self._connections[broker_id] = KafkaConnection(host, port, client_id=self._client_id,
                                                           timeout_s=10, security=self._security)
        return self._connections[broker_id]

    async def close(self) -> None:
        await self._bootstrap.close()
        for connection in self._connections.values():
            await connection.close()


def run_admin(bootstrap: str, open_admin: Callable[[], A], work: Callable[[A], Awaitable[T]], *,
              click_error_prefix: str = "") -> T:
    """Run `work(admin)` on a new event loop, the admin opened by `open_admin()` there and closed
    after. A broker that cannot be reached, a click.ClickException the work raises (its message
    after `click_error_prefix`) and any other error end the tool with one line on stderr."""
    async def main() -> T:
        admin = open_admin()
        try:
            return await work(admin)
        except OSError as exc:
            fail(f"Cannot reach a broker at {bootstrap}: {exc}.")
        finally:
            await admin.close()
    try:
        return asyncio.run(main())
    except click.ClickException as exc:
        fail(f"{click_error_prefix}{exc.message}.")
    except Exception as exc:  # noqa: BLE001 - a connection failure, said in one line
        fail(f"{type(exc).__name__}: {exc}.")
