"""The logbroker.client connections of the tools that speak the Kafka protocol themselves, where
confluent-kafka's AdminClient has no call for what they need (`share-groups`, `transactions`,
and the quota and SCRAM requests of `configs`).

`AdminConnections` holds a connection to the first bootstrap broker and one to each broker the
tool talks to, opened on first use; `brokers` (id → host, port) is what the tool's Metadata
request found. `run_admin` runs a tool's asyncio work over one, closes every connection, and
turns what goes wrong into one line on stderr (exit code 1), as every tool does.
`client_security` (logbroker.client's) reads the admin client's security properties
(`--command-config`).

Only the tools that need these connections import this module, so `logbroker --help` does not
load logbroker.client.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import click

from logbroker.cli.common import fail
from logbroker.client import client_security  # noqa: F401 - the tools take it from here

T = TypeVar("T")
A = TypeVar("A", bound="AdminConnections")


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
