"""What the SASL mechanisms share: their two failures, and PLAIN (RFC 4616).

Kafka's SaslServerAuthenticator distinguishes two failures, and so do we: a
SaslAuthenticationFailed carries a message meant for the client (PLAIN's "Invalid username or
password"), while any other SaslFailed reaches the client only as the generic "Authentication
failed during authentication due to invalid credentials with SASL mechanism X" — the detail is
for the broker's log, so that a client cannot probe which users exist.
"""

from __future__ import annotations

from collections.abc import Callable


class SaslFailed(Exception):
    """A failed exchange; the client sees the generic message."""


class SaslAuthenticationFailed(SaslFailed):
    """A failed exchange whose message the client sees as it is."""


class PlainSaslServer:
    """SASL PLAIN: one message, `authzid NUL authcid NUL password`, no server data.

    `verify(username, password)` is True when the password is right; the caller decides where
    users come from (a JAAS setting, the SCRAM store).
    """

    def __init__(self, verify: Callable[[str, str], bool]) -> None:
        self._verify = verify
        self.username: str | None = None
        self.complete = False

    def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslFailed("PLAIN exchange already complete")
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise SaslAuthenticationFailed("Invalid SASL/PLAIN response: expected 3 tokens, got "
                                           f"{len(parts)}")
        try:
            authzid, username, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise SaslAuthenticationFailed("Invalid SASL/PLAIN response: not UTF-8") from None
        if not username:
            raise SaslAuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationFailed("Authentication failed: password not specified")
        if not self._verify(username, password):
            raise SaslAuthenticationFailed("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslAuthenticationFailed("Authentication failed: Client requested an "
                                           "authorization id that is different from username")
        self.username = username
        self.complete = True
        return b""
