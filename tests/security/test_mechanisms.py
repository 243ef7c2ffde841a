"""The SASL mechanisms and principal names as pure functions: RFC 7677's SCRAM-SHA-256 example,
PLAIN, JAAS parsing."""

from __future__ import annotations

import base64

import pytest

from logbroker.security import scram
from logbroker.security.jaas import plain_users
from logbroker.security.principal import ssl_principal
from logbroker.security.sasl import PlainSaslServer, SaslAuthenticationFailed, SaslFailed
from logbroker.security.scram import ScramCredential, ScramFormatter, ScramSaslServer


def _rfc7677_server(monkeypatch) -> ScramSaslServer:
    monkeypatch.setattr(scram.secrets, "token_urlsafe", lambda n: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    credential = ScramFormatter("SCRAM-SHA-256").credential(
        "pencil", iterations=4096, salt=base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ=="))
    return ScramSaslServer("SCRAM-SHA-256", {"user": credential}.get)


def test_scram_sha_256_matches_the_rfc_7677_example(monkeypatch):
    server = _rfc7677_server(monkeypatch)
    assert server.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO") == (
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    final = server.evaluate(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                            b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete and server.username == "user"


def test_scram_wrong_proof_fails(monkeypatch):
    server = _rfc7677_server(monkeypatch)
    server.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    with pytest.raises(SaslFailed, match="Invalid client credentials"):
        server.evaluate(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                        b"p=AAAAZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")


@pytest.mark.parametrize("message", [b"", b"garbage", b"n,,r=abc", b"\xff\xfe", b"y,,n=user"])
def test_garbage_scram_client_first_fails(monkeypatch, message):
    with pytest.raises(SaslFailed):
        _rfc7677_server(monkeypatch).evaluate(message)


def test_unknown_scram_user_fails(monkeypatch):
    with pytest.raises(SaslFailed):
        _rfc7677_server(monkeypatch).evaluate(b"n,,n=nobody,r=abc")


def test_scram_credential_text_round_trips_and_never_holds_the_password():
    credential = ScramFormatter("SCRAM-SHA-512").credential("hunter2", iterations=8192)
    text = credential.to_text()
    assert "hunter2" not in text and text.endswith("iterations=8192")
    assert ScramCredential.from_text(text) == credential
    assert ScramFormatter("SCRAM-SHA-512").password_matches("hunter2", credential)
    assert not ScramFormatter("SCRAM-SHA-512").password_matches("hunter3", credential)


def test_plain_checks_the_password_and_refuses_another_authorization_id():
    users = {"alice": "secret"}
    ok = PlainSaslServer(lambda u, p: users.get(u) == p)
    assert ok.evaluate(b"\0alice\0secret") == b"" and ok.complete and ok.username == "alice"
    with pytest.raises(SaslAuthenticationFailed, match="Invalid username or password"):
        PlainSaslServer(lambda u, p: users.get(u) == p).evaluate(b"\0alice\0wrong")
    with pytest.raises(SaslAuthenticationFailed, match="authorization id"):
        PlainSaslServer(lambda u, p: users.get(u) == p).evaluate(b"bob\0alice\0secret")


def test_jaas_plain_users():
    text = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
            'password="admin-secret" user_admin="admin-secret" user_alice="a\\"b";')
    assert plain_users(text) == {"admin": "admin-secret", "alice": 'a"b'}


def test_ssl_principal_is_the_subject_in_rfc_2253_order():
    subject = ((("countryName", "GB"),), (("organizationName", "Example, Ltd"),),
               (("commonName", "alice"),))
    assert ssl_principal(subject) == "User:CN=alice,O=Example\\, Ltd,C=GB"
    assert ssl_principal(None) == "User:ANONYMOUS"


def _token_server(expiry_ms: int, now_ms: int) -> tuple[ScramSaslServer, scram.ScramSaslClient]:
    credential = ScramFormatter("SCRAM-SHA-256").credential("token-hmac-b64")
    server = ScramSaslServer("SCRAM-SHA-256", {}.get, clock_ms=lambda: now_ms,
                             token_lookup={"tok1": ("alice", credential, expiry_ms)}.get)
    return server, scram.ScramSaslClient("SCRAM-SHA-256", "tok1", "token-hmac-b64", token_auth=True)


def test_scram_with_tokenauth_authenticates_as_the_tokens_owner():
    server, client = _token_server(expiry_ms=2000, now_ms=1000)
    first = client.first_message()
    assert first.endswith(b",tokenauth=true")
    client.verify(server.evaluate(client.final_message(server.evaluate(first))))
    assert server.complete and server.username == "alice" and server.token_authenticated


def test_scram_with_an_expired_token_fails():
    server, client = _token_server(expiry_ms=1000, now_ms=2000)
    with pytest.raises(SaslAuthenticationFailed, match="Delegation Token expired"):
        server.evaluate(client.final_message(server.evaluate(client.first_message())))


def test_tokenauth_without_tokens_or_for_an_unknown_token_fails():
    no_tokens = ScramSaslServer("SCRAM-SHA-256", {}.get)
    with pytest.raises(SaslFailed):
        no_tokens.evaluate(b"n,,n=tok1,r=abc,tokenauth=true")
    server, _ = _token_server(expiry_ms=2000, now_ms=1000)
    with pytest.raises(SaslFailed):
        server.evaluate(b"n,,n=other,r=abc,tokenauth=true")
