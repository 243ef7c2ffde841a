"""Re-authentication (KIP-368) with connections.max.reauth.ms=2000 against a real broker: librdkafka
and kafka-python re-authenticate their open connections and keep producing and consuming across
several session lifetimes; a client that does not re-authenticate (a raw socket) has its connection
closed by the first request after the session expired, while a late SaslHandshake still starts a
re-authentication, as in Kafka."""

from __future__ import annotations

import re
import socket
import struct
import subprocess
import sys
import time
import uuid

import confluent_kafka
import kafka
import pytest

from logbroker.testing import BrokerProcess

REAUTH_MS = 2000
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'user_alice="alice-secret";')


@pytest.fixture(scope="module")
def reauth_broker(tmp_path_factory):
    base = tmp_path_factory.mktemp("reauth")
    properties = base / "server.properties"
    properties.write_text(f"log.dirs={base / 'data'}\n")
    subprocess.run([sys.executable, "-m", "logbroker.cli", "users", "--config", str(properties),
                    "--add-scram", "SCRAM-SHA-256=[name=scram,password=scram-pw]"], check=True, capture_output=True)
    overrides = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "security.inter.broker.protocol": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "connections.max.reauth.ms": str(REAUTH_MS),
        "group.initial.rebalance.delay.ms": "0",
    }
    with BrokerProcess(base, config_file=properties, overrides=overrides,
                       args=("--log-level", "kafka.server.SaslServerAuthenticator=DEBUG")) as broker:
        yield broker


def _authentications_per_connection(log_text: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for peer in re.findall(r"Authenticated (127\.0\.0\.1:\d+) as ", log_text):
        counts[peer] = counts.get(peer, 0) + 1
    return counts


def test_librdkafka_reauthenticates_and_keeps_producing_and_consuming(reauth_broker):
    config = {"bootstrap.servers": reauth_broker.bootstrap, "security.protocol": "SASL_PLAINTEXT",
              "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "scram", "sasl.password": "scram-pw"}
    topic = f"reauth-{uuid.uuid4().hex[:8]}"
    log_start = len(reauth_broker.new_log_text())
    errors: list = []
    producer = confluent_kafka.Producer({**config, "linger.ms": 5, "error_cb": errors.append})
    consumer = confluent_kafka.Consumer({**config, "group.id": topic, "auto.offset.reset": "earliest",
                                         "error_cb": errors.append})
    consumer.subscribe([topic])
    sent, received = 0, []
    end = time.monotonic() + 4 * REAUTH_MS / 1000  # four session lifetimes
    while time.monotonic() < end:
        producer.produce(topic, value=b"%d" % sent)
        sent += 1
        producer.poll(0)
        message = consumer.poll(0.05)
        if message is not None and message.error() is None:
            received.append(message.value())
    assert producer.flush(30) == 0
    deadline = time.monotonic() + 30
    while len(received) < sent and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            received.append(message.value())
    consumer.close()
    assert received == [b"%d" % i for i in range(sent)]
    assert errors == []
    log_text = reauth_broker.new_log_text()[log_start:]
    assert "session expired" not in log_text
    # The same connections authenticated again and again instead of reconnecting.
    assert max(_authentications_per_connection(log_text).values()) >= 3


def _request(api_key: int, version: int, correlation_id: int, body: bytes) -> bytes:
    frame = struct.pack(">hhih", api_key, version, correlation_id, -1) + body
    return struct.pack(">i", len(frame)) + frame


def _response(sock: socket.socket) -> bytes | None:
    prefix = sock.recv(4, socket.MSG_WAITALL)
    if len(prefix) < 4:
        return None
    return sock.recv(struct.unpack(">i", prefix)[0], socket.MSG_WAITALL)


def _plain_login(sock: socket.socket) -> int:
    """SaslHandshake v1 + SaslAuthenticate v1 with PLAIN; returns session_lifetime_ms."""
    mechanism = b"PLAIN"
    sock.sendall(_request(17, 1, 1, struct.pack(">h", len(mechanism)) + mechanism))
    assert struct.unpack_from(">ih", _response(sock)) == (1, 0)
    token = b"\0alice\0alice-secret"
    sock.sendall(_request(36, 1, 2, struct.pack(">i", len(token)) + token))
    body = _response(sock)
    correlation_id, error_code, message_length = struct.unpack_from(">ihh", body)
    assert (correlation_id, error_code) == (2, 0)
    pos = 8 + max(message_length, 0)
    (token_length,) = struct.unpack_from(">i", body, pos)
    (lifetime_ms,) = struct.unpack_from(">q", body, pos + 4 + token_length)
    return lifetime_ms


METADATA_V1_ALL = struct.pack(">i", -1)


def test_a_request_after_the_session_expired_closes_the_connection(reauth_broker):
    host, port = reauth_broker.bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=20) as sock:
        assert _plain_login(sock) == REAUTH_MS
        sock.sendall(_request(3, 1, 3, METADATA_V1_ALL))  # within the session: answered
        assert struct.unpack_from(">i", _response(sock))[0] == 3
        time.sleep(REAUTH_MS / 1000 + 0.5)
        sock.sendall(_request(3, 1, 4, METADATA_V1_ALL))
        assert _response(sock) is None  # closed, no answer
    assert re.search(r"Closing connection from 127\.0\.0\.1:\d+: session expired", reauth_broker.new_log_text())


def test_reauthenticating_after_expiry_with_a_handshake_keeps_the_connection(reauth_broker):
    host, port = reauth_broker.bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=20) as sock:
        _plain_login(sock)
        time.sleep(REAUTH_MS / 1000 + 0.5)
        assert _plain_login(sock) == REAUTH_MS  # a SaslHandshake still starts re-authentication
        sock.sendall(_request(3, 1, 5, METADATA_V1_ALL))
        assert struct.unpack_from(">i", _response(sock))[0] == 5


def test_kafka_python_reauthenticates_too(reauth_broker):
    topic = f"kp-{uuid.uuid4().hex[:8]}"
    log_start = len(reauth_broker.new_log_text())
    producer = kafka.KafkaProducer(bootstrap_servers=reauth_broker.bootstrap, security_protocol="SASL_PLAINTEXT",
                                   sasl_mechanism="PLAIN", sasl_plain_username="alice",
                                   sasl_plain_password="alice-secret")
    offsets = []
    for i in range(4):  # across two session lifetimes
        offsets.append(producer.send(topic, b"%d" % i).get(timeout=30).offset)
        time.sleep(REAUTH_MS / 1000 / 2)
    producer.close()
    assert offsets == [0, 1, 2, 3]
    log_text = reauth_broker.new_log_text()[log_start:]
    assert "session expired" not in log_text
    assert max(_authentications_per_connection(log_text).values()) >= 2
