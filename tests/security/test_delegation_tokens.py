"""Delegation tokens (KIP-48) against a real broker: CreateDelegationToken, Renew, Expire and
Describe over SASL/SCRAM, owners and renewers checked, SCRAM authentication with a token, expiry
refusing it and the periodic purge removing it.

No Python Kafka client can authenticate with a token: librdkafka's SCRAM client sends no
extensions and kafka-python and aiokafka have no `tokenauth` either (and none of the three has the
delegation-token admin calls). So the requests go through logbroker.client, whose SCRAM client
sends the `tokenauth=true` extension as Kafka's Java ScramLoginModule does; the broker side is the
one under test.
"""

from __future__ import annotations

import asyncio
import base64
import json
import struct
import subprocess
import sys

import pytest
from kio.schema.create_delegation_token.v3.request import CreatableRenewers, CreateDelegationTokenRequest
from kio.schema.describe_delegation_token.v3.request import DescribeDelegationTokenOwner, DescribeDelegationTokenRequest
from kio.schema.expire_delegation_token.v2.request import ExpireDelegationTokenRequest
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.renew_delegation_token.v2.request import RenewDelegationTokenRequest
from kio.static.primitive import i64Timedelta
import datetime

from logbroker.client import ClientSecurity, KafkaConnection, SaslAuthenticationError
from logbroker.testing import BrokerProcess, wait_for

EXPIRY_MS = 60_000
MAX_LIFETIME_MS = 3_600_000
USERS = ("alice", "bob", "carol")
TOKEN_OVERRIDES = {
    "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
    "security.inter.broker.protocol": "SASL_PLAINTEXT",
    "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
    "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
    "delegation.token.expiry.time.ms": str(EXPIRY_MS),
    "delegation.token.max.lifetime.ms": str(MAX_LIFETIME_MS),
    "delegation.token.expiry.check.interval.ms": "300",
}


METADATA = MetadataRequest(topics=(), allow_auto_topic_creation=False,
                           include_topic_authorized_operations=False)


def _sasl_broker(base, overrides) -> BrokerProcess:
    properties = base / "server.properties"
    properties.write_text(f"log.dirs={base / 'data'}\n")
    for user in USERS:
        subprocess.run([sys.executable, "-m", "logbroker.cli", "users", "--config", str(properties),
                        "--add-scram", f"SCRAM-SHA-256=[name={user},password={user}-pw]"],
                       check=True, capture_output=True)
    return BrokerProcess(base, config_file=properties, overrides=overrides,
                         args=("--log-level", "kafka.server.SaslServerAuthenticator=DEBUG"))


@pytest.fixture(scope="module")
def token_broker(tmp_path_factory):
    overrides = {**TOKEN_OVERRIDES, "delegation.token.secret.key": "cluster-secret"}
    with _sasl_broker(tmp_path_factory.mktemp("tokens"), overrides) as broker:
        yield broker


def ms(value: int) -> i64Timedelta:
    return i64Timedelta.parse(datetime.timedelta(milliseconds=value))


def call(broker: BrokerProcess, body, *, user: str | None = None, password: str | None = None,
         token_auth: bool = False, mechanism: str = "SCRAM-SHA-256", error_only: bool = False):
    """One request over a new connection, authenticated as `user` (or PLAINTEXT without one).
    `error_only`: just the response's error code — a failed Create/Renew/Expire carries Kafka's
    -1 timestamps, which kio's reader refuses to decode."""
    security = ClientSecurity("SASL_PLAINTEXT", None, mechanism, user, password or f"{user}-pw",
                              token_auth) if user else ClientSecurity()

    async def go():
        connection = KafkaConnection(broker.host, broker.port, security=security, timeout_s=10)
        try:
            if error_only:  # correlation id, the header's tagged fields, then error_code
                return struct.unpack_from(">h", await connection.request_frame(body), 5)[0]
            return await connection.request(body)
        finally:
            await connection.close()
    return asyncio.run(go())


def create(broker, user: str, *, renewers=(), max_lifetime_ms: int = -1, owner: str | None = None,
           error_only: bool = False):
    return call(broker, CreateDelegationTokenRequest(
        owner_principal_type="User" if owner else None, owner_principal_name=owner,
        renewers=tuple(CreatableRenewers(principal_type="User", principal_name=r) for r in renewers),
        max_lifetime=ms(max_lifetime_ms)), user=user, error_only=error_only)


def password(response) -> str:
    return base64.b64encode(response.hmac).decode()


def describe(broker, user: str, owners=None):
    body = DescribeDelegationTokenRequest(owners=None if owners is None else tuple(
        DescribeDelegationTokenOwner(principal_type="User", principal_name=o) for o in owners))
    return call(broker, body, user=user)


def test_create_returns_a_token_with_kafkas_lifetimes(token_broker):
    response = create(token_broker, "alice", renewers=("bob",))
    assert response.error_code == 0
    assert (response.principal_type, response.principal_name) == ("User", "alice")
    assert response.token_requester_principal_name == "alice"
    assert len(response.token_id) == 22 and len(response.hmac) == 64  # base64 UUID, HMAC-SHA512
    issue = response.issue_timestamp.timestamp() * 1000
    assert response.expiry_timestamp.timestamp() * 1000 - issue == EXPIRY_MS
    assert response.max_timestamp.timestamp() * 1000 - issue == MAX_LIFETIME_MS
    capped = create(token_broker, "alice", max_lifetime_ms=10 * MAX_LIFETIME_MS)
    assert (capped.max_timestamp - capped.issue_timestamp).total_seconds() * 1000 == MAX_LIFETIME_MS
    short = create(token_broker, "alice", max_lifetime_ms=5000)  # expiry never past the maximum
    assert (short.expiry_timestamp - short.issue_timestamp).total_seconds() * 1000 == 5000
    stored = json.loads((token_broker.data_dir / "logbroker-metadata.json").read_text())["delegation_tokens"]
    assert stored[response.token_id]["owner"] == "User%3Aalice"
    assert stored[response.token_id]["renewers"] == ["User%3Abob"]
    assert "hmac" not in json.dumps(stored)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_with_a_token_authenticates_as_its_owner(token_broker, mechanism):
    token = create(token_broker, "alice")
    token_broker.new_log_text()
    metadata = call(token_broker, METADATA,
                    user=token.token_id, password=password(token), token_auth=True, mechanism=mechanism)
    assert len(metadata.brokers) == 1
    assert f"as User:alice with {mechanism}" in token_broker.new_log_text()
    # A token-authenticated connection may not ask for tokens (Kafka's allowTokenRequests).
    assert call(token_broker, DescribeDelegationTokenRequest(owners=None), user=token.token_id,
                password=password(token), token_auth=True).error_code == 64


def test_a_wrong_hmac_or_a_token_id_without_tokenauth_is_refused(token_broker):
    token = create(token_broker, "alice")
    with pytest.raises(SaslAuthenticationError):
        call(token_broker, METADATA,
             user=token.token_id, password=base64.b64encode(b"x" * 64).decode(), token_auth=True)
    with pytest.raises(SaslAuthenticationError):  # the token id is no SCRAM user
        call(token_broker, METADATA,
             user=token.token_id, password=password(token))


def test_only_owner_and_renewers_renew(token_broker):
    token = create(token_broker, "alice", renewers=("bob",))
    renewed = call(token_broker, RenewDelegationTokenRequest(hmac=token.hmac, renew_period=ms(120_000)), user="bob")
    assert renewed.error_code == 0
    assert renewed.expiry_timestamp > token.expiry_timestamp
    assert renewed.expiry_timestamp <= token.max_timestamp
    carol = call(token_broker, RenewDelegationTokenRequest(hmac=token.hmac, renew_period=ms(1000)), user="carol",
                 error_only=True)
    assert carol == 63  # DELEGATION_TOKEN_OWNER_MISMATCH
    unknown = call(token_broker, RenewDelegationTokenRequest(hmac=b"\0" * 64, renew_period=ms(1000)), user="alice",
                   error_only=True)
    assert unknown == 62  # DELEGATION_TOKEN_NOT_FOUND
    listed = describe(token_broker, "alice", owners=["alice"])
    mine = [t for t in listed.tokens if t.token_id == token.token_id]
    assert len(mine) == 1 and mine[0].expiry_timestamp == int(renewed.expiry_timestamp.timestamp() * 1000)


def test_describe_lists_tokens_with_renewers_and_hmac(token_broker):
    token = create(token_broker, "bob", renewers=("carol",))
    for user in ("bob", "carol"):
        found = [t for t in describe(token_broker, user).tokens if t.token_id == token.token_id]
        assert len(found) == 1 and found[0].hmac == token.hmac
        assert [(r.principal_type, r.principal_name) for r in found[0].renewers] == [("User", "carol")]
    # Without an authorizer DESCRIBE on every token is allowed, so others see it too (as in Kafka).
    assert token.token_id in {t.token_id for t in describe(token_broker, "alice").tokens}
    assert describe(token_broker, "bob", owners=[]).tokens == ()
    assert {t.principal_name for t in describe(token_broker, "bob", owners=["bob"]).tokens} == {"bob"}


def test_an_expired_token_is_refused_and_purged(token_broker):
    token = create(token_broker, "alice")
    expired = call(token_broker, ExpireDelegationTokenRequest(hmac=token.hmac, expiry_time_period=ms(0)), user="alice")
    assert expired.error_code == 0
    # Expiry is "now": within the purge interval the token is refused as expired, then gone.
    wait_for(lambda: token.token_id not in {t.token_id for t in describe(token_broker, "alice").tokens},
             timeout_s=15, what="the purge of the expired token")
    with pytest.raises(SaslAuthenticationError):
        call(token_broker, METADATA,
             user=token.token_id, password=password(token), token_auth=True)
    again = call(token_broker, RenewDelegationTokenRequest(hmac=token.hmac, renew_period=ms(1000)), user="alice",
                 error_only=True)
    assert again == 62  # purged: not found


def test_renewing_a_token_past_its_expiry_is_delegation_token_expired(token_broker):
    token = create(token_broker, "alice", max_lifetime_ms=1)
    wait_for(lambda: call(token_broker, RenewDelegationTokenRequest(hmac=token.hmac, renew_period=ms(1000)),
                          user="alice", error_only=True) == 66, timeout_s=10, what="the token to expire")


def test_expire_now_removes_the_token(token_broker):
    token = create(token_broker, "alice")
    response = call(token_broker, ExpireDelegationTokenRequest(hmac=token.hmac, expiry_time_period=ms(-1)), user="alice")
    assert response.error_code == 0
    assert token.token_id not in {t.token_id for t in describe(token_broker, "alice").tokens}
    with pytest.raises(SaslAuthenticationError):
        call(token_broker, METADATA,
             user=token.token_id, password=password(token), token_auth=True)


def test_owner_other_than_requester_and_renewer_types(token_broker):
    other = create(token_broker, "alice", owner="carol")  # no authorizer: CREATE_TOKENS allowed
    assert other.error_code == 0
    assert (other.principal_name, other.token_requester_principal_name) == ("carol", "alice")
    bad = call(token_broker, CreateDelegationTokenRequest(
        owner_principal_type=None, owner_principal_name=None,
        renewers=(CreatableRenewers(principal_type="Group", principal_name="ops"),),
        max_lifetime=ms(-1)), user="alice", error_only=True)
    assert bad == 67  # INVALID_PRINCIPAL_TYPE


def test_tokens_survive_a_restart(token_broker):
    token = create(token_broker, "alice")
    token_broker.restart()
    metadata = call(token_broker, METADATA,
                    user=token.token_id, password=password(token), token_auth=True)
    assert len(metadata.brokers) == 1


def test_plaintext_connections_may_not_ask_for_tokens(shared_broker):
    response = call(shared_broker, CreateDelegationTokenRequest(
        owner_principal_type=None, owner_principal_name=None, renewers=(), max_lifetime=ms(-1)),
        error_only=True)
    assert response == 64  # DELEGATION_TOKEN_REQUEST_NOT_ALLOWED


def test_tokens_are_off_without_a_secret_key(tmp_path):
    with _sasl_broker(tmp_path, TOKEN_OVERRIDES) as broker:
        assert create(broker, "alice", error_only=True) == 61  # DELEGATION_TOKEN_AUTH_DISABLED
        assert describe(broker, "alice").error_code == 61


def _tool(broker, tmp_path, user: str, *args: str) -> subprocess.CompletedProcess:
    config = tmp_path / f"{user}.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
                      f"sasl.username={user}\nsasl.password={user}-pw\n")
    return subprocess.run([sys.executable, "-m", "logbroker.cli", "delegation-tokens",
                           "--bootstrap-server", broker.bootstrap, "--command-config", str(config), *args],
                          capture_output=True, text=True, timeout=60)


def test_the_delegation_tokens_tool_creates_renews_describes_and_expires(token_broker, tmp_path):
    created = _tool(token_broker, tmp_path, "alice", "--create", "--renewer-principal", "User:bob")
    assert created.returncode == 0, created.stderr
    token_id = created.stdout.split("Created delegation token with tokenId : ")[1].split()[0]
    row = next(line for line in created.stdout.splitlines() if line.startswith(token_id))
    hmac_text, owner, requester, renewers = row.split()[1:5]
    assert (owner, requester, renewers) == ("User:alice", "User:alice", "[User:bob]")
    renewed = _tool(token_broker, tmp_path, "bob", "--renew", "--hmac", hmac_text, "--renew-time-period", "100000")
    assert renewed.returncode == 0 and "Completed renew operation. New expiry date" in renewed.stdout
    refused = _tool(token_broker, tmp_path, "carol", "--renew", "--hmac", hmac_text)
    assert refused.returncode == 1 and "DELEGATION_TOKEN_OWNER_MISMATCH" in refused.stderr
    described = _tool(token_broker, tmp_path, "alice", "--describe", "--owner-principal", "User:alice")
    assert described.returncode == 0 and token_id in described.stdout
    expired = _tool(token_broker, tmp_path, "alice", "--expire", "--hmac", hmac_text)
    assert expired.returncode == 0 and "Completed expire operation" in expired.stdout
    assert token_id not in _tool(token_broker, tmp_path, "alice", "--describe").stdout


def test_with_an_authorizer_only_owners_renewers_and_acls_see_or_make_tokens(tmp_path):
    overrides = {**TOKEN_OVERRIDES, "delegation.token.secret.key": "cluster-secret",
                 "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:admin"}
    with _sasl_broker(tmp_path, overrides) as broker:
        token = create(broker, "alice", renewers=("bob",))
        assert token.error_code == 0
        for user, sees in (("alice", True), ("bob", True), ("carol", False)):
            assert (token.token_id in {t.token_id for t in describe(broker, user).tokens}) == sees, user
        # KIP-373: a token for another owner needs CreateTokens on that user.
        assert create(broker, "alice", owner="carol", error_only=True) == 65  # DELEGATION_TOKEN_AUTHORIZATION_FAILED
