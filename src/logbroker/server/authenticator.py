"""SaslServerAuthenticator: the SASL state of one connection on a SASL_PLAINTEXT or SASL_SSL
listener, as Kafka's broker keeps it.

Until authentication completes only ApiVersions, SaslHandshake and SaslAuthenticate are answered;
anything else closes the connection (the dispatcher checks `KafkaConnection.auth_gate`). The
states:

    handshake ──SaslHandshake v1──▶ authenticate ──SaslAuthenticate…──▶ complete
        │                                                                  │
        └─SaslHandshake v0─▶ raw-authenticate (size-prefixed raw tokens,   │
                             no Kafka header: the pre-KIP-152 flow)        │
    complete ──SaslHandshake v1 (re-authentication, KIP-368)──▶ authenticate

A failed exchange answers SASL_AUTHENTICATION_FAILED (the raw flow has no way to say it), waits
connection.failed.authentication.delay.ms, then closes — so a client guessing passwords gets one
guess per delay per connection. With connections.max.reauth.ms > 0 the session expires; SaslAuthenticate
v1+ tells the client when (session_lifetime_ms), and any request after expiry but a SaslHandshake
(which starts the re-authentication, late) closes the connection, as Kafka's SocketServer does.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import struct
from collections.abc import Callable
from dataclasses import dataclass

from logbroker.errors import (
    IllegalSaslStateError,
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
)
from logbroker.security.sasl import PlainSaslServer, SaslAuthenticationFailed, SaslFailed
from logbroker.security.scram import MECHANISMS as SCRAM_MECHANISMS, ScramFormatter, ScramSaslServer
from logbroker.server.network import CloseAfter, CLOSE

log = logging.getLogger("kafka.server.SaslServerAuthenticator")

SUPPORTED_MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS)


@dataclass(frozen=True, slots=True)
class SaslSettings:
    """What a listener's authenticators share."""

    listener_name: str
    mechanisms: tuple[str, ...]
    plain_users: dict[str, str]  # from the listener's PlainLoginModule JAAS entry
    scram_credential: Callable  # (username, mechanism) → ScramCredential | None
    failed_authentication_delay_ms: int
    reauth_ms: int
    clock_ms: Callable[[], int]
    # Delegation tokens: (token id, mechanism) → (owner, ScramCredential, expiry ms) | None, and
    # the wall clock their expiry is in. None: SCRAM with tokenauth=true is refused.
    delegation_token: Callable | None = None
    wall_clock_ms: Callable[[], int] | None = None


class SaslServerAuthenticator:
    def __init__(self, settings: SaslSettings, peer: str) -> None:
        self.settings = settings
        self.peer = peer
        self.state = "handshake"
        self.mechanism: str | None = None
        self.principal: str | None = None
        self.session_expiry_ms = 0
        self.token_authenticated = False  # authenticated with a delegation token (SCRAM tokenauth)
        self._server = None

    # -- the gate ---------------------------------------------------------------------------
    @property
    def expects_raw_token(self) -> bool:
        return self.state == "raw-authenticate"

    def allows(self, api_key: int) -> bool:
        """Whether a request of `api_key` may be handled now (False: close the connection).

        Once the session has expired only a SaslHandshake (re-authentication) passes, as in
        Kafka's SocketServer: any other request closes the connection."""
        if self.state == "complete":
            return not self.session_expiry_ms or self.settings.clock_ms() < self.session_expiry_ms \
                or api_key == 17
        return api_key in (17, 18, 36)

    def refusal(self, api_name: str) -> str:
        if self.state == "complete":
            return f"session expired (connections.max.reauth.ms) before {api_name}; re-authenticate"
        return f"Unexpected Kafka request of type {api_name} during SASL handshake"

    # -- SaslHandshake ----------------------------------------------------------------------
    def handshake(self, version: int, mechanism: str):
        enabled = list(self.settings.mechanisms)
        if self.state not in ("handshake", "complete"):
            log.info("Failed authentication with %s: SaslHandshake in state %s", self.peer, self.state)
            return CloseAfter({"error_code": IllegalSaslStateError.code, "mechanisms": enabled})
        if self.state == "complete" and version == 0:
            return CloseAfter({"error_code": IllegalSaslStateError.code, "mechanisms": enabled})
        if mechanism not in enabled:
            log.info("Failed authentication with %s: unsupported SASL mechanism %r (enabled: %s)",
                     self.peer, mechanism, ",".join(enabled))
            self.state = "failed"
            return self._delayed(CloseAfter({"error_code": UnsupportedSaslMechanismError.code,
                                             "mechanisms": enabled}))
        self.mechanism = mechanism
        self.state = "authenticate" if version >= 1 else "raw-authenticate"
        if mechanism == "PLAIN":
            self._server = PlainSaslServer(self._plain_password_ok)
        else:
            tokens = self.settings.delegation_token
            self._server = ScramSaslServer(
                mechanism, lambda user: self.settings.scram_credential(user, mechanism),
                token_lookup=(lambda token_id: tokens(token_id, mechanism)) if tokens else None,
                clock_ms=self.settings.wall_clock_ms)
        return {"error_code": 0, "mechanisms": enabled}

    # -- SaslAuthenticate -------------------------------------------------------------------
    def authenticate(self, version: int, token: bytes):
        if self.state != "authenticate":
            log.info("Failed authentication with %s: SaslAuthenticate in state %s", self.peer, self.state)
            message = f"Unexpected SaslAuthenticate request in state {self.state}"
            self.state = "failed"
            return CloseAfter({"error_code": IllegalSaslStateError.code, "error_message": message,
                               "auth_bytes": b""})
        try:
            challenge = self._server.evaluate(token)
        except SaslFailed as exc:
            self.state = "failed"
            message = self._client_message(exc)
            log.info("Failed authentication with %s (%s: %s)", self.peer, self.mechanism, exc)
            return self._delayed(CloseAfter({"error_code": SaslAuthenticationFailedError.code,
                                             "error_message": message, "auth_bytes": b""}))
        response = {"error_code": 0, "error_message": None, "auth_bytes": challenge}
        if self._server.complete:
            self._complete()
            if self.state == "failed":
                return self._delayed(CloseAfter({
                    "error_code": SaslAuthenticationFailedError.code, "auth_bytes": b"",
                    "error_message": "Cannot change principals during re-authentication"}))
            if self.session_expiry_ms:
                response["session_lifetime"] = self.settings.reauth_ms
        return response

    def raw_token(self, frame) -> object:
        """A raw SASL token after SaslHandshake v0: answer the raw challenge, size-prefixed."""
        try:
            challenge = self._server.evaluate(bytes(frame))
        except SaslFailed as exc:
            self.state = "failed"
            log.info("Failed authentication with %s (%s: %s)", self.peer, self.mechanism, exc)
            return self._delayed(CLOSE)
        if self._server.complete:
            self._complete()
            if self.state == "failed":
                return self._delayed(CLOSE)
        return [struct.pack(">i", len(challenge)) + challenge]

    # -- helpers ----------------------------------------------------------------------------
    def _complete(self) -> None:
        principal = f"User:{self._server.username}"
        if self.principal is not None and principal != self.principal:
            # Re-authentication must not change who the connection is (KIP-368).
            log.info("Failed re-authentication with %s: principal changed from %s to %s",
                     self.peer, self.principal, principal)
            self.state = "failed"
            return
        self.principal = principal
        self.token_authenticated = getattr(self._server, "token_authenticated", False)
        self.state = "complete"
        reauth = self.settings.reauth_ms
        self.session_expiry_ms = self.settings.clock_ms() + reauth if reauth > 0 else 0
        log.debug("Authenticated %s as %s with %s", self.peer, principal, self.mechanism)

    def _client_message(self, exc: SaslFailed) -> str:
        if isinstance(exc, SaslAuthenticationFailed):
            return str(exc)
        return ("Authentication failed during authentication due to invalid credentials with "
                f"SASL mechanism {self.mechanism}")

    def _delayed(self, result):
        delay_ms = self.settings.failed_authentication_delay_ms
        if delay_ms <= 0:
            return result

        async def later():
            await asyncio.sleep(delay_ms / 1000)
            return result
        return later()

    def _plain_password_ok(self, username: str, password: str) -> bool:
        expected = self.settings.plain_users.get(username)
        if expected is not None:
            return hmac.compare_digest(expected.encode(), password.encode())
        for mechanism in SCRAM_MECHANISMS:
            credential = self.settings.scram_credential(username, mechanism)
            if credential is not None:
                return ScramFormatter(mechanism).password_matches(password, credential)
        return False
