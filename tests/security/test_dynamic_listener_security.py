"""A listener's TLS keystore and SASL JAAS users changed on a running broker (dynamic per-broker
configs, `listener.name.<listener>.…`): new connections see the new certificate (checked with the
ssl module's peer certificate) or the new users; a keystore that does not load is refused and the
old certificate kept."""

from __future__ import annotations

import gc
import re
import shutil
import socket
import ssl
import subprocess

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from logbroker.testing import BrokerProcess

TIMEOUT_S = 15
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="admin" password="admin-secret" user_admin="admin-secret"{extra};')


@pytest.fixture
def broker(tmp_path, pki):
    keystore = tmp_path / "keystore.pem"
    shutil.copy(pki.broker_keystore, keystore)
    overrides = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "security.inter.broker.protocol": "PLAINTEXT",
        "listener.name.ssl.ssl.keystore.location": str(keystore),
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS.format(extra=""),
    }
    process = BrokerProcess(tmp_path / "broker", overrides=overrides).start()
    line = re.search(r"listening on (.*?), log dirs", process.new_log_text())[1]
    process.ports = {name: int(port) for name, port in re.findall(r"(\w+)://[^:,\s]+:(\d+)", line)}
    process.keystore = keystore
    yield process
    gc.collect()
    process.kill()


def renewed_keystore(pki, path) -> None:
    """A new certificate for the same name (CN=localhost), signed by the test CA, with its key."""
    d = pki.ca.parent
    name = path.stem
    subprocess.run(["openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", "/CN=localhost"],
                   cwd=d, check=True, capture_output=True)
    (d / f"{name}.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    subprocess.run(["openssl", "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                    "-CAcreateserial", "-out", f"{name}.crt", "-days", "2", "-extfile", f"{name}.ext"],
                   cwd=d, check=True, capture_output=True)
    path.write_text((d / f"{name}.key").read_text() + (d / f"{name}.crt").read_text())


def certificate_in(path) -> bytes:
    """The DER of the (first) certificate in a PEM keystore."""
    pem = re.search(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----", path.read_text(), re.S)[0]
    return ssl.PEM_cert_to_DER_cert(pem)


def served_certificate(broker, pki) -> bytes:
    context = ssl.create_default_context(cafile=str(pki.ca))
    with socket.create_connection(("127.0.0.1", broker.ports["SSL"]), timeout=TIMEOUT_S) as raw, \
            context.wrap_socket(raw, server_hostname="localhost") as tls:
        return tls.getpeercert(binary_form=True)


def set_listener_config(broker, name: str, value: str):
    """IncrementalAlterConfigs SET on broker 0 over the PLAINTEXT listener; the KafkaError or None."""
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{broker.ports['PLAINTEXT']}"})
    futures = admin.incremental_alter_configs([ConfigResource(ResourceType.BROKER, "0", incremental_configs=[
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)])])
    try:
        next(iter(futures.values())).result(TIMEOUT_S)
    except KafkaException as exc:
        return exc.args[0]
    return None


def test_a_renewed_certificate_is_served_to_new_connections(broker, pki, tmp_path):
    old = certificate_in(broker.keystore)
    assert served_certificate(broker, pki) == old
    renewed = tmp_path / "renewed.pem"
    renewed_keystore(pki, renewed)
    assert certificate_in(renewed) != old

    assert set_listener_config(broker, "listener.name.ssl.ssl.keystore.location", str(renewed)) is None

    assert served_certificate(broker, pki) == certificate_in(renewed)


def test_a_certificate_renewed_in_place_is_reloaded_when_its_location_is_set_again(broker, pki, tmp_path):
    old = certificate_in(broker.keystore)
    renewed_keystore(pki, tmp_path / "in-place.pem")
    shutil.copy(tmp_path / "in-place.pem", broker.keystore)
    assert served_certificate(broker, pki) == old  # not reloaded on its own

    assert set_listener_config(broker, "listener.name.ssl.ssl.keystore.location", str(broker.keystore)) is None

    assert served_certificate(broker, pki) == certificate_in(broker.keystore) != old


def test_a_keystore_that_does_not_load_is_refused_and_the_old_certificate_kept(broker, pki, tmp_path):
    old = certificate_in(broker.keystore)
    broken = tmp_path / "broken.pem"
    broken.write_text("-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n")

    error = set_listener_config(broker, "listener.name.ssl.ssl.keystore.location", str(broken))

    assert error.code() == KafkaError.INVALID_REQUEST
    assert error.str().startswith("Invalid dynamic configuration: ")
    assert "ssl.keystore.location" in error.str()
    assert served_certificate(broker, pki) == old
    missing = set_listener_config(broker, "listener.name.ssl.ssl.keystore.location", str(tmp_path / "none.pem"))
    assert missing.code() == KafkaError.INVALID_REQUEST
    assert served_certificate(broker, pki) == old


def test_new_jaas_users_can_log_in_on_new_connections(broker):
    def logs_in(user: str, password: str) -> bool:
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{broker.ports['SASL_PLAINTEXT']}",
                             "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                             "sasl.username": user, "sasl.password": password})
        try:
            admin.list_topics(timeout=5)
            return True
        except KafkaException:
            return False

    assert logs_in("admin", "admin-secret")
    assert not logs_in("bob", "bob-secret")

    assert set_listener_config(broker, "listener.name.sasl_plaintext.plain.sasl.jaas.config",
                               JAAS.format(extra=' user_bob="bob-secret"')) is None

    assert logs_in("bob", "bob-secret")
    assert logs_in("admin", "admin-secret")
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{broker.ports['PLAINTEXT']}"})
    resource = ConfigResource(ResourceType.BROKER, "0")
    configs = admin.describe_configs([resource])[resource].result(TIMEOUT_S)
    jaas = configs["listener.name.sasl_plaintext.plain.sasl.jaas.config"]
    assert (jaas.value, jaas.is_sensitive, jaas.is_read_only, jaas.source) == (None, True, False, 2)
