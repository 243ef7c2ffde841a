"""Client quotas with the authorizer on: AlterClientQuotas needs ALTER_CONFIGS and
DescribeClientQuotas DESCRIBE_CONFIGS on the cluster (CLUSTER_AUTHORIZATION_FAILED otherwise), and
`logbroker configs --command-config` reaches a SASL listener."""

from __future__ import annotations

import subprocess
import sys

import pytest
from confluent_kafka.admin import AclOperation, ResourceType

from acl_helpers import PASSWORDS, SASL_OVERRIDES, allow, create_acls, forget_admins
from logbroker.testing import BrokerProcess

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def quota_acl_broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("quota-acl-broker"), overrides=SASL_OVERRIDES) as broker:
        yield broker
        forget_admins()


def configs(broker, user: str, tmp_path, *args: str) -> subprocess.CompletedProcess:
    properties = tmp_path / f"{user}.properties"
    properties.write_text(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                          f"sasl.username={user}\nsasl.password={PASSWORDS[user]}\n")
    return subprocess.run([sys.executable, "-m", "logbroker.cli", "configs", "--bootstrap-server",
                           broker.bootstrap, "--command-config", str(properties), *args],
                          capture_output=True, text=True, timeout=90)


def test_quota_apis_need_cluster_config_operations(quota_acl_broker, tmp_path):
    alter = ["--alter", "--entity-type", "clients", "--entity-name", "acl-app", "--add-config",
             "producer_byte_rate=1000"]
    describe = ["--describe", "--entity-type", "clients"]
    refused = configs(quota_acl_broker, "alice", tmp_path, *describe)
    assert refused.returncode == 1 and "(CLUSTER_AUTHORIZATION_FAILED)" in refused.stderr
    assert configs(quota_acl_broker, "admin", tmp_path, *alter).returncode == 0  # the super user
    create_acls(quota_acl_broker, allow("User:alice", AclOperation.DESCRIBE_CONFIGS, "kafka-cluster",
                                        resource=ResourceType.BROKER))
    described = configs(quota_acl_broker, "alice", tmp_path, *describe)
    assert described.stdout.splitlines() == ["Quota configs for client-id 'acl-app' are producer_byte_rate=1000.0"]
    refused = configs(quota_acl_broker, "alice", tmp_path, "--alter", "--entity-type", "clients",
                      "--entity-name", "acl-app", "--delete-config", "producer_byte_rate")
    assert refused.returncode == 1 and "(CLUSTER_AUTHORIZATION_FAILED)" in refused.stderr
    create_acls(quota_acl_broker, allow("User:alice", AclOperation.ALTER_CONFIGS, "kafka-cluster",
                                        resource=ResourceType.BROKER))
    assert configs(quota_acl_broker, "alice", tmp_path, "--alter", "--entity-type", "clients",
                   "--entity-name", "acl-app", "--delete-config", "producer_byte_rate").returncode == 0


def metadata_throttled(broker, user: str) -> bool:
    """Whether Metadata requests of the SASL user `user` come back throttled (a few tries)."""
    import asyncio

    from kio.index import load_request_schema

    from logbroker.cli.admin_connections import client_security
    from logbroker.client import KafkaConnection
    from logbroker.server.responses import build

    security = client_security({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                                "sasl.username": user, "sasl.password": PASSWORDS[user]})

    async def probe() -> bool:
        connection = KafkaConnection(broker.host, broker.port, client_id="same-app", security=security)
        body = build(load_request_schema(3, 12), {"topics": None, "allow_auto_topic_creation": False,
                                                  "include_topic_authorized_operations": False})
        try:
            for _ in range(20):
                if (await connection.request(body)).throttle_time.total_seconds() > 0:
                    return True
            return False
        finally:
            await connection.close()
    return asyncio.run(probe())


def test_a_user_quota_applies_to_the_authenticated_principal(quota_acl_broker, tmp_path):
    assert configs(quota_acl_broker, "admin", tmp_path, "--alter", "--entity-type", "users", "--entity-name",
                   "bob", "--add-config", "request_percentage=0.0001").returncode == 0
    assert metadata_throttled(quota_acl_broker, "bob")
    assert not metadata_throttled(quota_acl_broker, "alice")  # same client id, another user
