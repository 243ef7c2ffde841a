"""HTTP Basic authentication of the registry against the broker's SASL users (PLAIN from JAAS,
SCRAM from the credential store): reads need a user, config/mode changes and deletes a super user."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from registry_http import Registry

from logbroker.testing import SCHEMA_REGISTRY_OVERRIDES, TEST_OVERRIDES, BrokerProcess

PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret"}
JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="admin" password="admin-secret" '
        + " ".join(f'user_{u}="{p}"' for u, p in PASSWORDS.items()) + ";")
OVERRIDES = {
    **TEST_OVERRIDES, **SCHEMA_REGISTRY_OVERRIDES,
    "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
    "security.inter.broker.protocol": "SASL_PLAINTEXT",
    "sasl.mechanism.inter.broker.protocol": "PLAIN",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "super.users": "User:admin",
}
UNAUTHORIZED = (401, {"error_code": 401, "message": "Unauthorized"})


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    broker = BrokerProcess(tmp_path_factory.mktemp("secured"), overrides=OVERRIDES).start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "PLAIN", "sasl.username": "admin", "sasl.password": "admin-secret"})
    upsert = UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                          b"carol-secret")
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(timeout=10)
    broker.admin = admin
    broker.url = broker.schema_registry_url()
    yield broker
    broker.kill()


def test_requests_without_valid_credentials_get_401(secured):
    status, body, headers = Registry(secured.url).call("GET", "/subjects")
    assert (status, body) == UNAUTHORIZED
    assert {k.lower(): v for k, v in headers.items()}["www-authenticate"].startswith("Basic")
    assert Registry(secured.url, user="alice", password="wrong").get("/subjects") == UNAUTHORIZED
    assert Registry(secured.url, user="mallory", password="x").get("/subjects") == UNAUTHORIZED
    assert Registry(secured.url, user="carol", password="alice-secret").get("/subjects") == UNAUTHORIZED


def test_plain_and_scram_users_read_and_register(secured):
    alice = Registry(secured.url, user="alice", password="alice-secret")
    carol = Registry(secured.url, user="carol", password="carol-secret")
    schema_id = alice.register("alice-value", '"string"')
    assert carol.get("/subjects/alice-value/versions/1")[1]["id"] == schema_id
    assert carol.register("carol-value", '"string"') == schema_id


def test_config_mode_and_deletes_need_a_super_user(secured):
    alice = Registry(secured.url, user="alice", password="alice-secret")
    admin = Registry(secured.url, user="admin", password="admin-secret")
    alice.register("guarded", '"int"')
    for method, path, body in (("PUT", "/config", {"compatibility": "NONE"}),
                               ("PUT", "/mode/guarded", {"mode": "READONLY"}),
                               ("DELETE", "/subjects/guarded", None),
                               ("DELETE", "/subjects/guarded/versions/1", None)):
        status, answer, _ = alice.call(method, path, body)
        assert (status, answer["error_code"]) == (403, 40301), (method, path)
    assert alice.get("/subjects/guarded/versions") == (200, [1])
    assert admin.put("/config/guarded", {"compatibility": "NONE"}) == (200, {"compatibility": "NONE"})
    assert admin.delete("/subjects/guarded") == (200, [1])


def test_a_plain_user_added_by_a_dynamic_jaas_config_is_accepted(secured):
    dave = Registry(secured.url, user="dave", password="dave-secret")
    assert dave.get("/subjects") == UNAUTHORIZED
    jaas = JAAS.removesuffix(";") + ' user_dave="dave-secret";'
    futures = secured.admin.incremental_alter_configs([ConfigResource(ResourceType.BROKER, "0", incremental_configs=[
        ConfigEntry("listener.name.sasl_plaintext.plain.sasl.jaas.config", jaas,
                    incremental_operation=AlterConfigOpType.SET)])])
    next(iter(futures.values())).result(10)
    assert dave.get("/subjects")[0] == 200
