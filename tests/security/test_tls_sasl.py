"""TLS and SASL with real clients (confluent-kafka, kafka-python) against a real broker, and the
bad-input cases over raw sockets: each must close one connection with one log line while the
broker keeps serving everyone else."""

from __future__ import annotations

import re
import socket
import ssl
import struct
import subprocess
import sys
import time
import uuid

import confluent_kafka
import kafka
import kafka.errors
import pytest
from confluent_kafka.admin import AdminClient

from logbroker.testing import BrokerProcess

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" user_admin="admin-secret" '
              'user_alice="alice-secret";')


def _ports(broker: BrokerProcess) -> dict[str, int]:
    line = re.search(r"listening on (.*?), log dirs", broker.new_log_text())[1]
    return {name: int(port) for name, port in re.findall(r"(\w+)://[^:,\s]+:(\d+)", line)}


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory, pki):
    base = tmp_path_factory.mktemp("tls-broker")
    overrides = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,MTLS://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL",
        "ssl.keystore.location": str(pki.broker_keystore),
        "ssl.truststore.location": str(pki.ca),
        "listener.name.mtls.ssl.client.auth": "required",
        "group.initial.rebalance.delay.ms": "0",
    }
    with BrokerProcess(base, overrides=overrides) as broker:
        broker.ports = _ports(broker)
        yield broker


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory, pki):
    base = tmp_path_factory.mktemp("sasl-broker")
    data = base / "data"
    properties = base / "server.properties"
    properties.write_text(f"log.dirs={data}\n")
    for spec in ("SCRAM-SHA-256=[name=scram256,password=pw-256]",
                 "SCRAM-SHA-512=[name=scram512,password=pw-512,iterations=8192],"
                 "SCRAM-SHA-256=[name=admin,password=admin-secret]"):
        subprocess.run([sys.executable, "-m", "logbroker.cli", "users", "--config", str(properties),
                        "--add-scram", spec], check=True, capture_output=True)
    overrides = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "security.inter.broker.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "ssl.keystore.location": str(pki.broker_keystore),
        "connection.failed.authentication.delay.ms": "50",
        "group.initial.rebalance.delay.ms": "0",
    }
    with BrokerProcess(base, overrides=overrides) as broker:
        broker.ports = _ports(broker)
        yield broker


# -- helpers --------------------------------------------------------------------------------

def _confluent_roundtrip(config: dict, n: int = 50) -> list[bytes]:
    topic = f"t-{uuid.uuid4().hex[:8]}"
    producer = confluent_kafka.Producer(config)
    for i in range(n):
        producer.produce(topic, value=b"v%d" % i)
    assert producer.flush(20) == 0
    consumer = confluent_kafka.Consumer({**config, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + 20
    while len(values) < n and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value())
    consumer.close()
    return values


def _kafka_python_roundtrip(config: dict, n: int = 20) -> list[bytes]:
    topic = f"k-{uuid.uuid4().hex[:8]}"
    producer = kafka.KafkaProducer(**config)
    for i in range(n):
        producer.send(topic, b"k%d" % i)
    producer.flush(20)
    producer.close()
    consumer = kafka.KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=10000, **config)
    values = []
    for message in consumer:
        values.append(message.value)
        if len(values) == n:
            break
    consumer.close()
    return values


def _request(api_key: int, version: int, body: bytes, correlation_id: int = 1) -> bytes:
    header = struct.pack(">hhih", api_key, version, correlation_id, 4) + b"test"
    frame = header + body
    return struct.pack(">i", len(frame)) + frame


def _string(text: str) -> bytes:
    return struct.pack(">h", len(text)) + text.encode()


def _read_frame(sock: socket.socket) -> bytes | None:
    data = b""
    while len(data) < 4:
        chunk = sock.recv(4 - len(data))
        if not chunk:
            return None
        data += chunk
    (size,) = struct.unpack(">i", data)
    body = b""
    while len(body) < size:
        chunk = sock.recv(size - len(body))
        if not chunk:
            return None
        body += chunk
    return body


def _closed(sock: socket.socket) -> bool:
    sock.settimeout(5)
    try:
        return sock.recv(1) == b""
    except (ConnectionResetError, ssl.SSLError):
        return True


def _wait_for_log(broker: BrokerProcess, pattern: str) -> int:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        found = len(re.findall(pattern, broker.new_log_text()))
        if found:
            return found
        time.sleep(0.05)
    return 0


# -- TLS ------------------------------------------------------------------------------------

def test_ssl_listener_round_trip_with_confluent_kafka(tls_broker, pki):
    config = {"bootstrap.servers": f"127.0.0.1:{tls_broker.ports['SSL']}", "security.protocol": "SSL",
              "ssl.ca.location": str(pki.ca)}
    assert _confluent_roundtrip(config) == [b"v%d" % i for i in range(50)]


def test_ssl_listener_round_trip_with_kafka_python(tls_broker, pki):
    config = {"bootstrap_servers": f"127.0.0.1:{tls_broker.ports['SSL']}", "security_protocol": "SSL",
              "ssl_cafile": str(pki.ca)}
    assert _kafka_python_roundtrip(config) == [b"k%d" % i for i in range(20)]


def test_large_fetch_over_tls_arrives_whole(tls_broker, pki):
    # Regions bigger than one TLS chunk go out in pieces (pread + encrypt), not by sendfile.
    config = {"bootstrap.servers": f"127.0.0.1:{tls_broker.ports['SSL']}", "security.protocol": "SSL",
              "ssl.ca.location": str(pki.ca)}
    topic = f"big-{uuid.uuid4().hex[:8]}"
    producer = confluent_kafka.Producer({**config, "linger.ms": 50, "batch.size": 1_000_000})
    payload = bytes(range(256)) * 400  # 100 KiB
    for _ in range(40):
        producer.produce(topic, value=payload)
    assert producer.flush(20) == 0
    consumer = confluent_kafka.Consumer({**config, "group.id": topic, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got, deadline = 0, time.monotonic() + 20
    while got < 40 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            assert message.value() == payload
            got += 1
    consumer.close()
    assert got == 40


def test_mutual_tls_accepts_a_client_certificate_and_refuses_a_client_without_one(tls_broker, pki):
    bootstrap = f"127.0.0.1:{tls_broker.ports['MTLS']}"
    with_cert = {"bootstrap.servers": bootstrap, "security.protocol": "SSL", "ssl.ca.location": str(pki.ca),
                 "ssl.certificate.location": str(pki.client_cert), "ssl.key.location": str(pki.client_key)}
    assert _confluent_roundtrip(with_cert, n=5) == [b"v%d" % i for i in range(5)]
    admin = AdminClient({"bootstrap.servers": bootstrap, "security.protocol": "SSL",
                         "ssl.ca.location": str(pki.ca)})
    with pytest.raises(confluent_kafka.KafkaException):
        admin.list_topics(timeout=3)
    assert _wait_for_log(tls_broker, r"on SSL listener MTLS: TLS handshake failed")


def test_tls_client_hello_on_plaintext_port_closes_with_one_log_line(tls_broker, pki):
    context = ssl.create_default_context(cafile=str(pki.ca))
    with socket.create_connection(("127.0.0.1", tls_broker.ports["PLAINTEXT"])) as raw:
        with pytest.raises((ssl.SSLError, ConnectionResetError, OSError)):
            context.wrap_socket(raw, server_hostname="localhost")
    assert _wait_for_log(tls_broker, r"a TLS handshake arrived on PLAINTEXT listener PLAINTEXT") == 1
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{tls_broker.ports['PLAINTEXT']}"})
    assert admin.list_topics(timeout=10).brokers


def test_plaintext_request_on_tls_port_closes_with_one_log_line(tls_broker, pki):
    with socket.create_connection(("127.0.0.1", tls_broker.ports["SSL"])) as sock:
        sock.sendall(_request(18, 0, b""))
        assert _closed(sock)
    assert _wait_for_log(tls_broker, r"on SSL listener SSL: TLS handshake failed \(a plaintext client\?\)") == 1
    config = {"bootstrap.servers": f"127.0.0.1:{tls_broker.ports['SSL']}", "security.protocol": "SSL",
              "ssl.ca.location": str(pki.ca)}
    assert AdminClient(config).list_topics(timeout=10).brokers


def test_metadata_advertises_the_listener_the_client_connected_to(tls_broker, pki):
    config = {"bootstrap.servers": f"127.0.0.1:{tls_broker.ports['SSL']}", "security.protocol": "SSL",
              "ssl.ca.location": str(pki.ca)}
    brokers = AdminClient(config).list_topics(timeout=10).brokers
    assert [b.port for b in brokers.values()] == [tls_broker.ports["SSL"]]


# -- SASL -----------------------------------------------------------------------------------

def _sasl(broker, mechanism, user, password, listener="SASL_PLAINTEXT", pki=None) -> dict:
    config = {"bootstrap.servers": f"127.0.0.1:{broker.ports[listener]}", "security.protocol": listener,
              "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}
    if pki is not None:
        config["ssl.ca.location"] = str(pki.ca)
    return config


@pytest.mark.parametrize(("mechanism", "user", "password"), [
    ("PLAIN", "alice", "alice-secret"),
    ("PLAIN", "scram256", "pw-256"),  # a PLAIN user checked against the SCRAM store
    ("SCRAM-SHA-256", "scram256", "pw-256"),
    ("SCRAM-SHA-512", "scram512", "pw-512"),
])
def test_sasl_round_trip_with_confluent_kafka(sasl_broker, mechanism, user, password):
    assert _confluent_roundtrip(_sasl(sasl_broker, mechanism, user, password), n=10) == \
        [b"v%d" % i for i in range(10)]


@pytest.mark.parametrize(("mechanism", "user", "password"), [
    ("PLAIN", "alice", "alice-secret"),
    ("SCRAM-SHA-256", "scram256", "pw-256"),
    ("SCRAM-SHA-512", "scram512", "pw-512"),
])
def test_sasl_round_trip_with_kafka_python(sasl_broker, mechanism, user, password):
    config = {"bootstrap_servers": f"127.0.0.1:{sasl_broker.ports['SASL_PLAINTEXT']}",
              "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": mechanism,
              "sasl_plain_username": user, "sasl_plain_password": password}
    assert _kafka_python_roundtrip(config, n=10) == [b"k%d" % i for i in range(10)]


def test_sasl_ssl_round_trip(sasl_broker, pki):
    config = _sasl(sasl_broker, "SCRAM-SHA-512", "scram512", "pw-512", listener="SASL_SSL", pki=pki)
    assert _confluent_roundtrip(config, n=10) == [b"v%d" % i for i in range(10)]
    kp = {"bootstrap_servers": f"127.0.0.1:{sasl_broker.ports['SASL_SSL']}", "security_protocol": "SASL_SSL",
          "ssl_cafile": str(pki.ca), "sasl_mechanism": "PLAIN", "sasl_plain_username": "alice",
          "sasl_plain_password": "alice-secret"}
    assert _kafka_python_roundtrip(kp, n=5) == [b"k%d" % i for i in range(5)]


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_wrong_password_is_an_authentication_error_and_others_keep_working(sasl_broker, mechanism):
    user = "alice" if mechanism == "PLAIN" else "scram256"
    errors = []
    producer = confluent_kafka.Producer({**_sasl(sasl_broker, mechanism, user, "wrong"),
                                         "error_cb": errors.append})
    deadline = time.monotonic() + 10
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert any(e.code() == confluent_kafka.KafkaError._AUTHENTICATION for e in errors)
    del producer
    assert _wait_for_log(sasl_broker, rf"Failed authentication with .* \({mechanism}: ")
    assert AdminClient(_sasl(sasl_broker, "PLAIN", "alice", "alice-secret")).list_topics(timeout=10).brokers


def _handshake(sock: socket.socket, mechanism: str, version: int = 1) -> tuple[int, list[str]]:
    sock.sendall(_request(17, version, _string(mechanism)))
    body = _read_frame(sock)
    error_code, count = struct.unpack_from(">hi", body, 4)
    pos, mechanisms = 10, []
    for _ in range(count):
        (n,) = struct.unpack_from(">h", body, pos)
        mechanisms.append(body[pos + 2:pos + 2 + n].decode())
        pos += 2 + n
    return error_code, mechanisms


def test_unknown_mechanism_gets_unsupported_sasl_mechanism_with_the_enabled_list(sasl_broker):
    with socket.create_connection(("127.0.0.1", sasl_broker.ports["SASL_PLAINTEXT"])) as sock:
        error_code, mechanisms = _handshake(sock, "GSSAPI")
        assert error_code == 33
        assert mechanisms == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        assert _closed(sock)


def test_garbage_scram_message_gets_sasl_authentication_failed(sasl_broker):
    with socket.create_connection(("127.0.0.1", sasl_broker.ports["SASL_PLAINTEXT"])) as sock:
        assert _handshake(sock, "SCRAM-SHA-256")[0] == 0
        token = b"\xff\x00garbage, not SCRAM"
        sock.sendall(_request(36, 1, struct.pack(">i", len(token)) + token, correlation_id=2))
        body = _read_frame(sock)
        correlation_id, error_code, n = struct.unpack_from(">ihh", body)
        assert (correlation_id, error_code) == (2, 58)
        assert b"Authentication failed" in body[8:8 + n]
        assert _closed(sock)


def test_requests_before_authentication_close_the_connection(sasl_broker):
    with socket.create_connection(("127.0.0.1", sasl_broker.ports["SASL_PLAINTEXT"])) as sock:
        sock.sendall(_request(3, 0, struct.pack(">i", 0)))  # Metadata v0, all topics
        assert _closed(sock)
    assert _wait_for_log(sasl_broker, r"Unexpected Kafka request of type METADATA during SASL handshake")


def test_handshake_v0_then_raw_plain_token_authenticates(sasl_broker):
    with socket.create_connection(("127.0.0.1", sasl_broker.ports["SASL_PLAINTEXT"])) as sock:
        assert _handshake(sock, "PLAIN", version=0)[0] == 0
        token = b"\0alice\0alice-secret"
        sock.sendall(struct.pack(">i", len(token)) + token)
        assert _read_frame(sock) == b""  # PLAIN's empty server message, raw and size-prefixed
        sock.sendall(_request(3, 0, struct.pack(">i", 0), correlation_id=7))
        body = _read_frame(sock)
        assert body is not None and struct.unpack_from(">i", body)[0] == 7


def test_users_cli_alters_and_describes_through_the_broker(sasl_broker):
    admin_config = sasl_broker.base_dir / "admin.properties"
    admin_config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
                            "sasl.username=admin\nsasl.password=admin-secret\n")
    bootstrap = f"127.0.0.1:{sasl_broker.ports['SASL_PLAINTEXT']}"
    cli = [sys.executable, "-m", "logbroker.cli", "users", "--bootstrap-server", bootstrap,
           "--command-config", str(admin_config)]
    subprocess.run([*cli, "--alter", "--add-scram", "SCRAM-SHA-512=[name=bob,password=bob-pw]"],
                   check=True, capture_output=True, timeout=30)
    assert AdminClient(_sasl(sasl_broker, "SCRAM-SHA-512", "bob", "bob-pw")).list_topics(timeout=10).brokers
    described = subprocess.run([*cli, "--describe"], check=True, capture_output=True, text=True, timeout=30).stdout
    assert "user-principal 'bob' are SCRAM-SHA-512=iterations=4096" in described
    assert "user-principal 'scram512' are SCRAM-SHA-512=iterations=8192" in described
    store = (sasl_broker.data_dir / "logbroker-metadata.json").read_text()
    assert "bob-pw" not in store and "stored_key=" in store
