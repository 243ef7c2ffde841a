"""SCRAM users on a ZooKeeper cluster: the first admin bootstrapped through ZooKeeper before any
broker starts, users created and deleted through any broker's API and seen by every broker, and
the znodes written as Kafka writes them (/config/users/<name>, /config/changes notices)."""

from __future__ import annotations

import base64
import json
import subprocess
import sys

import confluent_kafka
import pytest
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from cluster_helpers import start_cluster, wait_for
from logbroker.security.scram import ScramCredential, ScramFormatter

SASL_CLUSTER = {
    "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
    "security.inter.broker.protocol": "SASL_PLAINTEXT",
    "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
    # Brokers reach each other as the bootstrapped admin.
    "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
    "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config":
        'org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="admin-secret";',
    "connection.failed.authentication.delay.ms": "0",
}


def _client(broker, mechanism: str, user: str, password: str) -> dict:
    return {"bootstrap.servers": broker.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}


def _logs_in(broker, mechanism: str, user: str, password: str) -> bool:
    """Whether `user` authenticates on `broker` (the bootstrap connection goes to it alone)."""
    try:
        AdminClient(_client(broker, mechanism, user, password)).list_topics(timeout=3)
        return True
    except confluent_kafka.KafkaException:
        return False


def _znode_json(zk_client, path: str) -> dict:
    return json.loads(zk_client.get(path)[0])


def _user_notices(zk_client) -> list[dict]:
    return [_znode_json(zk_client, f"/config/changes/{c}") for c in sorted(zk_client.get_children("/config/changes"))]


@pytest.fixture
def scram_cluster(tmp_path, zk_connect, zk_client):
    subprocess.run([sys.executable, "-m", "logbroker.cli", "users", "--zookeeper", zk_connect,
                    "--add-scram", "SCRAM-SHA-256=[name=admin,password=admin-secret]"],
                   check=True, capture_output=True, timeout=60)
    brokers = start_cluster(tmp_path, zk_connect, **SASL_CLUSTER)
    yield brokers
    for broker in brokers:
        broker.stop()


def test_admin_bootstrapped_through_zookeeper_is_stored_as_kafka_stores_it(tmp_path, zk_connect, zk_client):
    subprocess.run([sys.executable, "-m", "logbroker.cli", "users", "--zookeeper", zk_connect,
                    "--add-scram", "SCRAM-SHA-256=[name=admin,password=admin-secret]"],
                   check=True, capture_output=True, timeout=60)
    properties = tmp_path / "server.properties"  # a cluster's config: the same znodes
    properties.write_text(f"zookeeper.connect={zk_connect}\nlog.dirs={tmp_path / 'data'}\n")
    subprocess.run([sys.executable, "-m", "logbroker.cli", "users", "--config", str(properties), "--add-scram",
                    "SCRAM-SHA-512=[name=admin,password=admin-512,iterations=8192]"],
                   check=True, capture_output=True, timeout=60)
    znode = _znode_json(zk_client, "/config/users/admin")
    assert znode["version"] == 1 and sorted(znode["config"]) == ["SCRAM-SHA-256", "SCRAM-SHA-512"]
    text = znode["config"]["SCRAM-SHA-512"]
    assert [part.split("=", 1)[0] for part in text.split(",")] == ["salt", "stored_key", "server_key", "iterations"]
    assert text.endswith(",iterations=8192")
    credential = ScramCredential.from_text(text)
    assert len(base64.b64decode(text.split(",")[1].split("=", 1)[1])) == 64  # SHA-512 stored key
    assert ScramFormatter("SCRAM-SHA-512").password_matches("admin-512", credential)
    assert not ScramFormatter("SCRAM-SHA-512").password_matches("admin-secret", credential)
    assert {"version": 2, "entity_path": "users/admin"} in _user_notices(zk_client)
    described = subprocess.run([sys.executable, "-m", "logbroker.cli", "users", "--zookeeper", zk_connect,
                                "--describe"], check=True, capture_output=True, text=True, timeout=60).stdout
    assert "user-principal 'admin' are SCRAM-SHA-256=iterations=4096,SCRAM-SHA-512=iterations=8192" in described


def test_user_created_through_one_broker_logs_in_on_another(scram_cluster, zk_client):
    b1, b2, b3 = scram_cluster
    assert _logs_in(b3, "SCRAM-SHA-256", "admin", "admin-secret")  # the bootstrapped admin, everywhere
    assert not _logs_in(b3, "SCRAM-SHA-512", "bob", "bob-pw")
    admin1 = AdminClient(_client(b1, "SCRAM-SHA-256", "admin", "admin-secret"))
    upsert = UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"bob-pw")
    for future in admin1.alter_user_scram_credentials([upsert]).values():
        future.result(timeout=30)
    assert wait_for(lambda: _logs_in(b3, "SCRAM-SHA-512", "bob", "bob-pw"), timeout_s=30)
    assert not _logs_in(b3, "SCRAM-SHA-512", "bob", "wrong")
    config = _znode_json(zk_client, "/config/users/bob")["config"]
    assert list(config) == ["SCRAM-SHA-512"] and config["SCRAM-SHA-512"].endswith(",iterations=8192")
    assert {"version": 2, "entity_path": "users/bob"} in _user_notices(zk_client)

    admin2 = AdminClient(_client(b2, "SCRAM-SHA-256", "admin", "admin-secret"))
    described = wait_for(lambda: (d := admin2.describe_user_scram_credentials().result(timeout=30))
                         and "bob" in d and d)
    assert [(i.mechanism, i.iterations) for i in described["bob"].scram_credential_infos] == \
        [(ScramMechanism.SCRAM_SHA_512, 8192)]
    assert [(i.mechanism, i.iterations) for i in described["admin"].scram_credential_infos] == \
        [(ScramMechanism.SCRAM_SHA_256, 4096)]

    deletion = UserScramCredentialDeletion("bob", ScramMechanism.SCRAM_SHA_512)
    for future in admin2.alter_user_scram_credentials([deletion]).values():
        future.result(timeout=30)
    assert wait_for(lambda: not _logs_in(b3, "SCRAM-SHA-512", "bob", "bob-pw"), timeout_s=30)
    assert _znode_json(zk_client, "/config/users/bob") == {"version": 1, "config": {}}
