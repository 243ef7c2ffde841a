"""The registry inside the broker: `schema.registry.listeners` (`http://host:port`, `https://…`, a
comma-separated list like `listeners`) served by uvicorn on the broker's event loop.

Start order: the sockets are bound when the broker starts (so a port 0 is known at once, and a
taken port fails the start); then, in the background, the KafkaStore creates `_schemas` if need be
and reads it to its end; only then do the listeners accept, so no request is answered from a state
that lacks an acknowledged registration. `https://` listeners take the broker's PEM TLS keys
(`ssl.keystore.location` …, or `listener.name.schema_registry.ssl.*`). The registry's Kafka
reader fetches `_schemas` from its leader on the inter-broker listener with that listener's security.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from dataclasses import dataclass

import uvicorn

from logbroker.server.config_defs import REGISTRY_URL

log = logging.getLogger("io.confluent.kafka.schemaregistry.rest.SchemaRegistryMain")

TLS_LISTENER = "SCHEMA_REGISTRY"


@dataclass(frozen=True, slots=True)
class RegistryListener:
    scheme: str
    host: str
    port: int


def parse_listeners(values: list[str]) -> list[RegistryListener]:
    """The entries of schema.registry.listeners (KafkaConfig has checked each against REGISTRY_URL)."""
    return [RegistryListener(m.group(1), m.group(2), int(m.group(3)))
            for m in (REGISTRY_URL.match(value.strip()) for value in values)]


def reader_endpoint(broker):
    """(leader_address, security) for reading `_schemas`: a function giving the (host, port) of
    the topic's leader on the inter-broker listener (None while it has none), and that listener's
    client security (as brokers reach each other; on a single node, this broker itself)."""
    from logbroker.server.listener_security import inter_broker_security
    from logbroker.types import TopicPartition
    config = broker.config
    tp = TopicPartition(config.schema_registry_topic, 0)
    security = broker.inter_broker_security or inter_broker_security(config)

    def leader_address() -> tuple[str, int] | None:
        state = broker.store.partition_state(tp)
        if state is None or state.leader < 0:
            return None
        if broker.zk is not None:
            info = broker.inter_broker_endpoint(state.leader)
            return None if info is None else (info.host, info.port)
        bound = next((l for l in broker.listeners if l.name == config.inter_broker_listener_name),
                     broker.listeners[0])
        return ("127.0.0.1" if bound.host in ("", "0.0.0.0", "::") else bound.host), bound.port
    return leader_address, security


class SchemaRegistryServer:
    def __init__(self, broker) -> None:
        from logbroker.schema_registry.app import RegistryApp
        from logbroker.schema_registry.auth import broker_authenticator
        from logbroker.schema_registry.kafka_store import KafkaStore
        from logbroker.schema_registry.metrics import RegistryMetrics
        from logbroker.schema_registry.service import SchemaRegistry
        config = broker.config
        self.broker = broker
        self.listeners = parse_listeners(config.schema_registry_listeners)
        leader_address, security = reader_endpoint(broker)
        self.store = KafkaStore(broker, topic=config.schema_registry_topic,
                                replication_factor=config.schema_registry_topic_replication_factor,
                                leader_address=leader_address, security=security)
        self.registry = SchemaRegistry(self.store)
        self.metrics = RegistryMetrics(self.store.state)
        forwarder = None
        if broker.zk is not None:
            from logbroker.schema_registry.forwarding import LeaderForwarder
            forwarder = LeaderForwarder(broker.zk.client, self.store.leader_id, self._forwarding_ssl_context())
        self.app = RegistryApp(self.registry, authenticator=broker_authenticator(broker),
                               forwarder=forwarder, metrics=self.metrics)
        self.urls: list[str] = []
        self._sockets: list[socket.socket] = []
        self._servers: list = []
        self._tasks: list[asyncio.Task] = []

    def bind(self) -> None:
        """Bind every listener now (raises OSError when a port is taken)."""
        for listener in self.listeners:
            host = listener.host or "0.0.0.0"
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            sock = socket.create_server((host, listener.port), family=family, backlog=128)
            self._sockets.append(sock)
            shown = self._advertised_host(listener.host)
            self.urls.append(f"{listener.scheme}://{shown}:{sock.getsockname()[1]}")

    def _advertised_host(self, host: str) -> str:
        if host and host not in ("0.0.0.0", "::"):
            return f"[{host}]" if ":" in host else host
        return self.broker.advertised_listener().host

    def start(self) -> None:
        self._tasks.append(asyncio.get_running_loop().create_task(self._serve(), name="schema-registry"))

    async def _serve(self) -> None:
        try:
            await self._start_serving()
        except Exception:  # noqa: BLE001 - the broker goes on; the log says why the registry does not
            log.exception("The schema registry could not start")

    async def _start_serving(self) -> None:
        await self.store.start()
        for listener, sock in zip(self.listeners, self._sockets):
            config = uvicorn.Config(self.app, log_level="warning", access_log=False, lifespan="off",
                                    timeout_graceful_shutdown=5)
            config.load()
            if listener.scheme == "https":
                config.ssl = self._ssl_context()
            server = _Server(config)
            self._servers.append(server)
            self._tasks.append(asyncio.get_running_loop().create_task(server.serve(sockets=[sock])))
        if self.broker.zk is not None:
            from logbroker.schema_registry.forwarding import publish_url
            await asyncio.get_running_loop().run_in_executor(
                None, publish_url, self.broker.zk.client, self.broker.broker_id, self.urls[0])
        log.info("Schema registry serving on %s", ", ".join(self.urls))

    def _forwarding_ssl_context(self):
        """What checks the leader's certificate when the registries speak https: the truststore of
        the registry's TLS keys if one is set, else the system's CAs."""
        config = self.broker.config
        get = lambda key: config.listener_value(TLS_LISTENER, key)  # noqa: E731
        if not any(l.scheme == "https" for l in self.listeners) or not (
                get("ssl.truststore.location") or get("ssl.truststore.certificates")):
            return None
        from logbroker.server.tls import client_ssl_context
        return client_ssl_context(get, TLS_LISTENER)

    def _ssl_context(self):
        from logbroker.server.tls import server_ssl_context
        config = self.broker.config
        return server_ssl_context(lambda key: config.listener_value(TLS_LISTENER, key), TLS_LISTENER)

    async def close(self) -> None:
        for server in self._servers:
            server.should_exit = True
        if self._tasks:
            self._tasks[0].cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
        for sock in self._sockets:
            sock.close()
        await self.store.close()


class _Server(uvicorn.Server):
    """uvicorn without its signal handlers: the broker's own handle SIGTERM and SIGINT."""

    @contextlib.contextmanager
    def capture_signals(self):
        yield


async def start_schema_registry(broker) -> SchemaRegistryServer:
    server = SchemaRegistryServer(broker)
    server.bind()
    server.start()
    return server
