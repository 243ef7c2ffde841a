"""Limits that protect the broker, over raw sockets against real brokers: max.connections.per.ip
(and its overrides) closes a connection over the limit at once, max.connections (broker-wide and a
listener's own) holds new ones back until a connection closes, the counts come back however a connection ends, and a SASL client
cannot send a big frame before it has authenticated."""

from __future__ import annotations

import re
import select
import socket
import struct
import time
import uuid

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient

from logbroker.testing import BrokerProcess

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'user_alice="alice-secret";')
API_VERSIONS_V0 = struct.pack(">ihhih", 10, 18, 0, 42, 0)  # size, api key, version, correlation, client id -1


def _ports(broker: BrokerProcess) -> dict[str, int]:
    line = re.search(r"listening on (.*?), log dirs", broker.new_log_text())[1]
    return {name: int(port) for name, port in re.findall(r"(\w+)://[^:,\s]+:(\d+)", line)}


def _broker(base, overrides: dict):
    with BrokerProcess(base, overrides=overrides) as broker:
        broker.ports = _ports(broker)
        yield broker


def _connect(port: int, source: str = "127.0.0.1") -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=20, source_address=(source, 0))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST on close
    return sock


def _served(sock: socket.socket) -> bool:
    """Send ApiVersions v0; True when its answer comes back, False when the broker closed."""
    try:
        sock.sendall(API_VERSIONS_V0)
        return _response_correlation_id(sock) == 42
    except (ConnectionResetError, BrokenPipeError):
        return False


def _response_correlation_id(sock: socket.socket) -> int | None:
    """Read one whole response frame; its correlation id (None if the broker closed)."""
    prefix = sock.recv(4, socket.MSG_WAITALL)
    if len(prefix) < 4:
        return None
    body = sock.recv(struct.unpack(">i", prefix)[0], socket.MSG_WAITALL)
    return struct.unpack_from(">i", body)[0] if len(body) >= 4 else None


def _closed_by_broker(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def _log_count(broker: BrokerProcess, pattern: str, at_least: int = 1) -> int:
    deadline = time.monotonic() + 20
    while True:
        found = len(re.findall(pattern, broker.new_log_text()))
        if found >= at_least or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def _eventually_served(port: int, source: str) -> bool:
    """A new connection from `source` is served (a closed one's count is released asynchronously)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        with _connect(port, source) as sock:
            if _served(sock):
                return True
        time.sleep(0.1)
    return False


@pytest.fixture(scope="module")
def limited_broker(tmp_path_factory):
    overrides = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "max.connections.per.ip": "1",
        "max.connections.per.ip.overrides": "127.0.0.1:100,127.0.0.3:2",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "sasl.server.max.receive.size": "4096",
        "socket.request.max.bytes": "200000",
        "connection.failed.authentication.delay.ms": "0",
    }
    yield from _broker(tmp_path_factory.mktemp("limited"), overrides)


def test_connection_over_max_connections_per_ip_is_closed_at_once(limited_broker):
    port = limited_broker.ports["PLAINTEXT"]
    with _connect(port, "127.0.0.2") as first, _connect(port, "127.0.0.2") as second:
        assert _served(first)
        assert _closed_by_broker(second)
    assert _log_count(limited_broker, r"Rejected connection from 127\.0\.0\.2: the address already has 1 "
                                      r"connections, the limit set by max\.connections\.per\.ip \(")
    assert _eventually_served(port, "127.0.0.2")  # the first one's count was released


def test_per_ip_override_replaces_the_default_limit(limited_broker):
    port = limited_broker.ports["PLAINTEXT"]
    with _connect(port, "127.0.0.3") as a, _connect(port, "127.0.0.3") as b, _connect(port, "127.0.0.3") as c:
        assert _served(a) and _served(b)
        assert _closed_by_broker(c)
    assert _log_count(limited_broker, r"Rejected connection from 127\.0\.0\.3: the address already has 2 "
                                      r"connections, the limit set by max\.connections\.per\.ip\.overrides")


def test_counts_are_released_when_the_broker_closes_a_connection(limited_broker):
    port = limited_broker.ports["PLAINTEXT"]
    for _ in range(3):  # each bad frame closes the connection; the IP's one slot must come back
        with _connect(port, "127.0.0.2") as sock:
            if not _served(sock):
                assert _eventually_served(port, "127.0.0.2")
                continue
            sock.sendall(struct.pack(">i", -5))
            assert _closed_by_broker(sock)
    assert _eventually_served(port, "127.0.0.2")


def test_counts_are_released_when_the_sasl_listener_closes_an_unauthenticated_connection(limited_broker):
    port = limited_broker.ports["SASL_PLAINTEXT"]
    for _ in range(3):
        sock = _connect(port, "127.0.0.2")
        sock.sendall(struct.pack(">ihhih", 10, 3, 0, 1, -1))  # Metadata before authenticating
        assert _closed_by_broker(sock)
        sock.close()
        assert _eventually_served(port, "127.0.0.2")


def test_frame_over_sasl_server_max_receive_size_before_authentication_closes(limited_broker):
    port = limited_broker.ports["SASL_PLAINTEXT"]
    with _connect(port) as sock:
        sock.sendall(struct.pack(">i", 4097) + b"\0" * 64)  # the size is checked before the body arrives
        assert _closed_by_broker(sock)
    assert _log_count(limited_broker, r"Closing connection from 127\.0\.0\.1:\d+: .*4097")
    with _connect(port) as sock:
        assert _served(sock)


def test_requests_bigger_than_the_pre_authentication_limit_work_after_authentication(limited_broker):
    config = {"bootstrap.servers": f"127.0.0.1:{limited_broker.ports['SASL_PLAINTEXT']}",
              "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
              "sasl.username": "alice", "sasl.password": "alice-secret"}
    topic = f"big-{uuid.uuid4().hex[:8]}"
    value = bytes(range(256)) * 80  # 20 KiB: over sasl.server.max.receive.size, under socket.request.max.bytes
    producer = confluent_kafka.Producer(config)
    producer.produce(topic, value=value)
    assert producer.flush(20) == 0
    consumer = confluent_kafka.Consumer({**config, "group.id": topic, "auto.offset.reset": "earliest"})
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
    message, deadline = None, time.monotonic() + 20
    while (message is None or message.error()) and time.monotonic() < deadline:
        message = consumer.poll(0.5)
    consumer.close()
    assert message is not None and message.value() == value


def test_socket_request_max_bytes_applies_on_every_listener(limited_broker):
    for listener in ("PLAINTEXT", "SASL_PLAINTEXT"):
        with _connect(limited_broker.ports[listener]) as sock:
            sock.sendall(struct.pack(">i", 200001))
            assert _closed_by_broker(sock)


@pytest.fixture(scope="module")
def capped_broker(tmp_path_factory):
    overrides = {
        "listeners": "CLIENT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
        "listener.security.protocol.map": "CLIENT:PLAINTEXT,INTERNAL:PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
        "max.connections": "2",
        "listener.name.internal.max.connections": "1",
    }
    yield from _broker(tmp_path_factory.mktemp("capped"), overrides)


def test_max_connections_holds_new_connections_until_one_closes(capped_broker):
    port = capped_broker.ports["CLIENT"]
    first, second = _connect(port), _connect(port)
    assert _served(first) and _served(second)
    waiting = _connect(port)  # the kernel completes the handshake; the broker does not accept yet
    waiting.sendall(API_VERSIONS_V0)
    assert _log_count(capped_broker, r"Not accepting connections on listener CLIENT: max\.connections \(2\) reached")
    assert select.select([waiting], [], [], 1.0)[0] == []  # no answer while at the limit
    with _connect(capped_broker.ports["INTERNAL"]) as internal:  # the inter-broker listener is exempt
        assert _served(internal)
    first.close()
    assert _response_correlation_id(waiting) == 42  # accepted once a slot is free: answered
    assert _log_count(capped_broker, r"Accepting connections on listener CLIENT again")
    second.close()
    waiting.close()
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
    assert admin.list_topics(timeout=20).brokers  # every count came back


def test_a_listeners_own_max_connections_holds_its_new_connections(capped_broker):
    port = capped_broker.ports["INTERNAL"]
    first = _connect(port)
    assert _served(first)
    waiting = _connect(port)
    waiting.sendall(API_VERSIONS_V0)
    assert _log_count(capped_broker, r"Not accepting connections on listener INTERNAL: "
                                     r"listener\.name\.internal\.max\.connections \(1\) reached")
    assert select.select([waiting], [], [], 1.0)[0] == []
    first.close()
    assert _response_correlation_id(waiting) == 42
    waiting.close()
