"""Delegation tokens (KIP-48) as values: a token's information, its HMAC, its SCRAM credential,
and the JSON Kafka stores it as (pure; no I/O).

A token is its id (22 characters of URL-safe base64 of a random UUID) plus the HMAC-SHA512 of that
id under the cluster's `delegation.token.secret.key`. The HMAC is never stored: every broker with
the same secret recomputes it, so a token made through one broker authenticates on any. A client
authenticates with SCRAM, user name the token id and password the base64 of the HMAC, adding the
`tokenauth=true` extension to its first message; the connection's principal is the token's owner.

Invariants of a TokenInformation: `issue_timestamp_ms <= expiry_timestamp_ms <= max_timestamp_ms`;
renewing or expiring moves `expiry_timestamp_ms`, never `max_timestamp_ms`.

The stored form is Kafka's ZooKeeper-era DelegationTokenInfoZNode JSON (version 3), principals
sanitized as Kafka writes them:

    {"version":3,"owner":"User%3Aalice","tokenRequester":"User%3Aalice","renewers":["User%3Abob"],
     "issueTimestamp":…,"maxTimestamp":…,"expiryTimestamp":…,"tokenId":"…"}
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import uuid
from dataclasses import dataclass, replace

from logbroker.metadata.sanitizer import desanitize, sanitize

TOKEN_JSON_VERSION = 3


@dataclass(frozen=True, slots=True)
class TokenInformation:
    token_id: str
    owner: str  # "User:alice"
    token_requester: str
    renewers: tuple[str, ...]
    issue_timestamp_ms: int
    expiry_timestamp_ms: int
    max_timestamp_ms: int

    def with_expiry(self, expiry_timestamp_ms: int) -> TokenInformation:
        return replace(self, expiry_timestamp_ms=expiry_timestamp_ms)

    def expired(self, now_ms: int) -> bool:
        return self.expiry_timestamp_ms < now_ms or self.max_timestamp_ms < now_ms

    def may_renew(self, principal: str) -> bool:
        """Kafka's allowedToRenew: the owner and the named renewers."""
        return principal == self.owner or principal in self.renewers

    def may_describe(self, principal: str) -> bool:
        """Who sees a token without a DESCRIBE ACL on it: its owner, requester and renewers."""
        return principal in (self.owner, self.token_requester) or principal in self.renewers


def new_token_id() -> str:
    """Kafka's CoreUtils.generateUuidAsBase64: URL-safe base64 of a random UUID, no padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def token_hmac(token_id: str, secret_key: str) -> bytes:
    """HmacSHA512 of the token id under the secret key, as Kafka's DelegationTokenManager.createHmac."""
    return hmac.new(secret_key.encode(), token_id.encode(), hashlib.sha512).digest()


def token_password(token_hmac_bytes: bytes) -> str:
    """What a client sends as its SCRAM password: the HMAC in base64 (kafka-delegation-tokens prints it)."""
    return base64.b64encode(token_hmac_bytes).decode()


def encode_token(info: TokenInformation) -> bytes:
    return json.dumps({
        "version": TOKEN_JSON_VERSION,
        "owner": sanitize(info.owner),
        "tokenRequester": sanitize(info.token_requester),
        "renewers": [sanitize(r) for r in info.renewers],
        "issueTimestamp": info.issue_timestamp_ms,
        "maxTimestamp": info.max_timestamp_ms,
        "expiryTimestamp": info.expiry_timestamp_ms,
        "tokenId": info.token_id,
    }, separators=(",", ":")).encode()


def decode_token(data: bytes) -> TokenInformation:
    """A stored token; ValueError when the JSON is not one (version 1 has no tokenRequester:
    the owner asked for it)."""
    try:
        d = json.loads(data)
        owner = desanitize(d["owner"])
        return TokenInformation(
            token_id=str(d["tokenId"]), owner=owner,
            token_requester=desanitize(d.get("tokenRequester") or d["owner"]),
            renewers=tuple(desanitize(r) for r in d.get("renewers", ())),
            issue_timestamp_ms=int(d["issueTimestamp"]), expiry_timestamp_ms=int(d["expiryTimestamp"]),
            max_timestamp_ms=int(d["maxTimestamp"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"not a delegation token ({exc!r})") from None


def split_principal(principal: str) -> tuple[str, str]:
    """"User:alice" → ("User", "alice")."""
    kind, _, name = principal.partition(":")
    return kind, name
