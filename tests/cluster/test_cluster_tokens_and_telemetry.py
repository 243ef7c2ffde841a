"""Delegation tokens and client-metrics subscriptions on a ZooKeeper cluster, stored where Kafka
stores them: a token made through one broker authenticates on another and its expiry there is
seen by the first (/delegation_token/tokens/<id>, notices in /delegation_token/token_changes); a
subscription altered through one broker is described by another (/config/client-metrics/<name>
with a /config/changes notice)."""

from __future__ import annotations

import asyncio
import base64
import datetime
import json
import subprocess
import sys

import pytest
from kio.schema.create_delegation_token.v3.request import CreateDelegationTokenRequest
from kio.schema.describe_configs.v4.request import DescribeConfigsRequest, DescribeConfigsResource
from kio.schema.expire_delegation_token.v2.request import ExpireDelegationTokenRequest
from kio.schema.metadata.v12.request import MetadataRequest

from cluster_helpers import start_cluster, wait_for
from logbroker.client import ClientSecurity, ConnectionClosedError, KafkaConnection

JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="admin-secret";'
TOKEN_CLUSTER = {
    "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
    "security.inter.broker.protocol": "SASL_PLAINTEXT",
    "sasl.enabled.mechanisms": "SCRAM-SHA-256",
    "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
    "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": JAAS,
    "connection.failed.authentication.delay.ms": "0",
    "delegation.token.secret.key": "cluster-secret",
}
METADATA = MetadataRequest(topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False)


@pytest.fixture
def token_cluster(tmp_path, zk_connect):
    for user in ("admin", "alice"):
        subprocess.run([sys.executable, "-m", "logbroker.cli", "users", "--zookeeper", zk_connect, "--add-scram",
                        f"SCRAM-SHA-256=[name={user},password={user}-secret]"], check=True, capture_output=True,
                       timeout=60)
    brokers = start_cluster(tmp_path, zk_connect, count=2, **TOKEN_CLUSTER)
    yield brokers
    for broker in brokers:
        broker.stop()


def call(broker, body, user: str, password: str, *, token_auth: bool = False):
    security = ClientSecurity("SASL_PLAINTEXT", None, "SCRAM-SHA-256", user, password, token_auth)

    async def go():
        connection = KafkaConnection(broker.host, broker.port, security=security, timeout_s=10)
        try:
            return await connection.request(body)
        finally:
            await connection.close()
    return asyncio.run(go())


def token_logs_in(broker, token) -> bool:
    try:
        call(broker, METADATA, token.token_id, base64.b64encode(token.hmac).decode(), token_auth=True)
        return True
    except ConnectionClosedError:
        return False


def test_a_token_made_on_one_broker_works_on_another_until_expired(token_cluster, zk_client):
    b1, b2 = token_cluster
    token = call(b1, CreateDelegationTokenRequest(owner_principal_type=None, owner_principal_name=None,
                                                  renewers=(), max_lifetime=datetime.timedelta(hours=1)),
                 "alice", "alice-secret")
    assert token.error_code == 0
    stored = json.loads(zk_client.get(f"/delegation_token/tokens/{token.token_id}")[0])
    assert stored["version"] == 3 and stored["owner"] == "User%3Aalice" and stored["tokenId"] == token.token_id
    assert stored["maxTimestamp"] - stored["issueTimestamp"] == 3_600_000
    notices = [zk_client.get(f"/delegation_token/token_changes/{c}")[0]
               for c in zk_client.get_children("/delegation_token/token_changes")]
    assert token.token_id.encode() in notices
    assert wait_for(lambda: token_logs_in(b2, token), timeout_s=30)
    expired = call(b2, ExpireDelegationTokenRequest(hmac=token.hmac, expiry_time_period=datetime.timedelta(milliseconds=-1)),
                   "alice", "alice-secret")
    assert expired.error_code == 0
    assert not zk_client.exists(f"/delegation_token/tokens/{token.token_id}")
    assert wait_for(lambda: not token_logs_in(b1, token), timeout_s=30)


def test_a_client_metrics_subscription_altered_on_one_broker_is_described_by_another(token_cluster, zk_client, tmp_path):
    b1, b2 = token_cluster
    config = tmp_path / "admin.properties"
    config.write_text(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\nsasl.jaas.config={JAAS}\n")
    altered = subprocess.run([sys.executable, "-m", "logbroker.cli", "client-metrics", "--bootstrap-server", b1.bootstrap,
                              "--command-config", str(config), "--alter", "--name", "all producers",
                              "--metrics", "org.apache.kafka.producer.", "--interval", "1000"],
                             capture_output=True, text=True, timeout=60)
    assert altered.returncode == 0, altered.stderr
    znode = json.loads(zk_client.get("/config/client-metrics/all%20producers")[0])
    assert znode["config"] == {"metrics": "org.apache.kafka.producer.", "interval.ms": "1000"}
    notices = [json.loads(zk_client.get(f"/config/changes/{c}")[0]) for c in zk_client.get_children("/config/changes")]
    assert {"version": 2, "entity_path": "client-metrics/all%20producers"} in notices

    def described_on_b2():
        response = call(b2, DescribeConfigsRequest(resources=(DescribeConfigsResource(
            resource_type=16, resource_name="all producers", configuration_keys=None),)), "admin", "admin-secret")
        values = {c.name: c.value for c in response.results[0].configs}
        return values.get("interval.ms") == "1000" and values
    values = wait_for(described_on_b2, timeout_s=30)
    assert values["metrics"] == "org.apache.kafka.producer."
