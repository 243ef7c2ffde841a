"""A secure cluster: brokers reach each other over the inter-broker listener with its security
(SASL over TLS, mutual TLS, the broker's own SCRAM credentials), every advertised listener is
registered in /brokers/ids/<id> as Kafka registers it, and a client gets each broker's address
on the listener it connected to."""

from __future__ import annotations

import base64
import json
import subprocess
import sys

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from cluster_helpers import CLUSTER_OVERRIDES, BrokerProcess, start_cluster, wait_for
from logbroker.security.sasl import SaslFailed
from logbroker.security.scram import ScramFormatter, ScramSaslClient, ScramSaslServer

ADMIN, ALICE = ("admin", "admin-secret"), ("alice", "alice-secret")
LISTENER_NOT_FOUND = 72
SCRAM_JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="{}" password="{}";'


def _openssl(*args: str, cwd) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def broker_pki(tmp_path_factory):
    """A test CA and one certificate for 127.0.0.1 that every broker uses both to serve and, for
    mutual TLS, to connect to the others (serverAuth and clientAuth). Returns (ca, cert, key)."""
    d = tmp_path_factory.mktemp("pki")
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    _openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
             "-subj", "/CN=secure-cluster-ca", cwd=d)
    _openssl("req", *ec, "-keyout", "broker.key", "-out", "broker.csr", "-subj", "/CN=broker", cwd=d)
    (d / "broker.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                                  "extendedKeyUsage=serverAuth,clientAuth\n")
    _openssl("x509", "-req", "-in", "broker.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", "broker.pem", "-days", "2", "-extfile", "broker.ext", cwd=d)
    (d / "keystore.pem").write_text((d / "broker.key").read_text() + (d / "broker.pem").read_text())
    return d / "ca.pem", d / "broker.pem", d / "broker.key"


def _add_scram_users(zk_connect: str, *users: tuple[str, str]) -> None:
    for name, password in users:
        subprocess.run([sys.executable, "-m", "logbroker.cli", "users", "--zookeeper", zk_connect,
                        "--add-scram", f"SCRAM-SHA-512=[name={name},password={password}]"],
                       check=True, capture_output=True, timeout=60)


def _registration(zk_client, broker_id: int) -> dict:
    return json.loads(zk_client.get(f"/brokers/ids/{broker_id}")[0])


def _ports(zk_client, broker_id: int) -> dict[str, int]:
    """Listener name → port, from the broker's registration."""
    return {e.split("://")[0]: int(e.rsplit(":", 1)[1]) for e in _registration(zk_client, broker_id)["endpoints"]}


@pytest.fixture
def sasl_ssl_cluster(tmp_path, zk_connect, zk_client, broker_pki):
    ca, cert, key = broker_pki
    _add_scram_users(zk_connect, ADMIN, ALICE)
    brokers = start_cluster(
        tmp_path, zk_connect,
        **{"listeners": "SASL_SSL://127.0.0.1:0",
           "inter.broker.listener.name": "SASL_SSL",
           "sasl.enabled.mechanisms": "SCRAM-SHA-512",
           "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
           "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": SCRAM_JAAS.format(*ADMIN),
           "ssl.keystore.location": str(cert.parent / "keystore.pem"),
           "ssl.truststore.location": str(ca),
           "ssl.client.auth": "required",
           "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
           "super.users": "User:admin",
           "connection.failed.authentication.delay.ms": "0"})
    yield brokers
    for broker in brokers:
        broker.stop()


def _sasl_ssl_client(broker_pki, brokers, user: tuple[str, str], **extra) -> dict:
    ca, cert, key = broker_pki
    return {"bootstrap.servers": ",".join(b.bootstrap for b in brokers), "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user[0], "sasl.password": user[1],
            "ssl.ca.location": str(ca), "ssl.certificate.location": str(cert),
            "ssl.key.location": str(key), **extra}


def _partition(admin: AdminClient, topic: str):
    md = admin.list_topics(topic, timeout=10).topics.get(topic)
    if md is None or md.error is not None or 0 not in md.partitions:
        return None
    return md.partitions[0]


def test_sasl_ssl_only_cluster_replicates_and_authorizes(sasl_ssl_cluster, broker_pki, zk_client):
    brokers = sasl_ssl_cluster
    registration = _registration(zk_client, 1)
    assert registration["endpoints"] == [f"SASL_SSL://127.0.0.1:{brokers[0].port}"]
    assert (registration["host"], registration["port"]) == (None, -1)  # no PLAINTEXT listener
    assert registration["listener_security_protocol_map"]["SASL_SSL"] == "SASL_SSL"

    admin = AdminClient(_sasl_ssl_client(broker_pki, brokers, ADMIN))
    admin.create_topics([NewTopic("secure", num_partitions=1, replication_factor=3,
                                  config={"min.insync.replicas": "2"})])["secure"].result(60)
    wait_for(lambda: (p := _partition(admin, "secure")) is not None and p.leader >= 0 and len(p.isrs) == 3,
             timeout_s=60, what="secure-0 led with an ISR of 3")

    producer = confluent_kafka.Producer(_sasl_ssl_client(broker_pki, brokers, ADMIN, acks="all",
                                                         **{"enable.idempotence": True}))
    acked = []
    for i in range(300):
        producer.produce("secure", value=f"record-{i}".encode(),
                         on_delivery=lambda err, msg: acked.append((err, msg.offset())))
    assert producer.flush(60) == 0
    assert [err for err, _ in acked if err is not None] == []
    assert sorted(offset for _, offset in acked) == list(range(300))
    # acks=all answered while the ISR stayed 3: every follower fetched over SASL_SSL.
    assert len(_partition(admin, "secure").isrs) == 3

    consumer = confluent_kafka.Consumer(_sasl_ssl_client(
        broker_pki, brokers, ADMIN, **{"group.id": "secure-readers", "auto.offset.reset": "earliest"}))
    consumer.subscribe(["secure"])
    values = []
    wait_for(lambda: values.extend(m.value() for m in consumer.consume(100, 1) if m.error() is None)
             or len(values) >= 300, timeout_s=60, what="300 records consumed")
    consumer.close()
    assert values == [f"record-{i}".encode() for i in range(300)]

    # The replicas hold the same bytes: each follower copied the leader's log over SASL_SSL.
    segments = [b.data_dir / "secure-0" / "00000000000000000000.log" for b in brokers]
    wait_for(lambda: len({s.read_bytes() for s in segments}) == 1, timeout_s=30,
             what="identical segments on all three brokers")

    refused = confluent_kafka.Producer(_sasl_ssl_client(broker_pki, brokers, ALICE,
                                                        **{"message.timeout.ms": 10000}))
    errors = []
    refused.produce("secure", value=b"intruder", on_delivery=lambda err, msg: errors.append(err))
    refused.flush(30)
    assert [e.code() for e in errors] == [confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED]


def test_each_listener_answers_its_own_ports(tmp_path, zk_connect, zk_client):
    two_listeners = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                     "inter.broker.listener.name": "PLAINTEXT",
                     "sasl.enabled.mechanisms": "PLAIN",
                     "listener.name.sasl_plaintext.plain.sasl.jaas.config":
                         'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'}
    brokers = start_cluster(tmp_path, zk_connect, count=2, **two_listeners)
    # Broker 3 has no SASL_PLAINTEXT listener: SASL clients cannot reach it.
    brokers.append(BrokerProcess(tmp_path / "broker-3", overrides={
        **CLUSTER_OVERRIDES, "broker.id": "3", "zookeeper.connect": zk_connect}).start())
    try:
        wait_for(lambda: zk_client.get_children("/brokers/ids") and
                 sorted(zk_client.get_children("/brokers/ids")) == ["1", "2", "3"], what="three registrations")
        ports = {b: _ports(zk_client, b) for b in (1, 2, 3)}
        assert set(ports[3]) == {"PLAINTEXT"} and set(ports[1]) == {"PLAINTEXT", "SASL_PLAINTEXT"}
        registration = _registration(zk_client, 2)
        assert (registration["host"], registration["port"]) == ("127.0.0.1", ports[2]["PLAINTEXT"])
        protocols = registration["listener_security_protocol_map"]  # all of the broker's map, as Kafka
        assert (protocols["PLAINTEXT"], protocols["SASL_PLAINTEXT"]) == ("PLAINTEXT", "SASL_PLAINTEXT")

        plaintext = AdminClient({"bootstrap.servers": f"127.0.0.1:{ports[1]['PLAINTEXT']}"})
        sasl = AdminClient({"bootstrap.servers": f"127.0.0.1:{ports[1]['SASL_PLAINTEXT']}",
                            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                            "sasl.username": ALICE[0], "sasl.password": ALICE[1]})
        plaintext.create_topics([NewTopic("on-3", num_partitions=1, replica_assignment=[[3]])])["on-3"].result(60)
        wait_for(lambda: (p := _partition(plaintext, "on-3")) is not None and p.leader == 3,
                 timeout_s=60, what="on-3 led by broker 3")
        for listener, admin, expected_ids in (("PLAINTEXT", plaintext, (1, 2, 3)), ("SASL_PLAINTEXT", sasl, (1, 2))):
            expected = {b: ("127.0.0.1", ports[b][listener]) for b in expected_ids}
            metadata = admin.list_topics("on-3", timeout=10)
            assert {b: (m.host, m.port) for b, m in metadata.brokers.items()} == expected, listener
            described = admin.describe_cluster().result(timeout=10)
            assert {n.id: (n.host, n.port) for n in described.nodes} == expected, listener
        # The leader is alive but has no SASL_PLAINTEXT endpoint: Kafka's LISTENER_NOT_FOUND.
        partition = sasl.list_topics("on-3", timeout=10).topics["on-3"].partitions[0]
        assert (partition.leader, partition.error.code()) == (-1, LISTENER_NOT_FOUND)
    finally:
        for broker in brokers:
            broker.stop()


def test_sasl_inter_broker_listener_needs_a_supported_mechanism(tmp_path, zk_connect):
    with pytest.raises(RuntimeError, match=r"sasl\.mechanism\.inter\.broker\.protocol"):
        start_cluster(tmp_path, zk_connect, count=1,
                      **{"listeners": "SASL_PLAINTEXT://127.0.0.1:0",
                         "security.inter.broker.protocol": "SASL_PLAINTEXT",
                         "sasl.enabled.mechanisms": "PLAIN"})


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_client_proves_the_password_and_checks_the_server(mechanism):
    credential = ScramFormatter(mechanism).credential("admin-secret")
    server = ScramSaslServer(mechanism, {"admin": credential}.get)
    client = ScramSaslClient(mechanism, "admin", "admin-secret")
    client.verify(server.evaluate(client.final_message(server.evaluate(client.first_message()))))
    assert (server.complete, server.username) == (True, "admin")

    wrong = ScramSaslClient(mechanism, "admin", "guess")
    server = ScramSaslServer(mechanism, {"admin": credential}.get)
    final = wrong.final_message(server.evaluate(wrong.first_message()))
    with pytest.raises(SaslFailed):
        server.evaluate(final)
    # A server that does not hold the user's keys cannot produce the signature the client expects.
    server = ScramSaslServer(mechanism, {"admin": credential}.get)
    client = ScramSaslClient(mechanism, "admin", "admin-secret")
    client.final_message(server.evaluate(client.first_message()))
    with pytest.raises(SaslFailed, match="server signature"):
        client.verify(b"v=" + base64.b64encode(b"\0" * 64))
