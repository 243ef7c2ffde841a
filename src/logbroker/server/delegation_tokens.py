"""DelegationTokenManager: create, renew, expire, describe and purge delegation tokens (KIP-48) as
Kafka's broker does, and the SCRAM credential a token authenticates with.

Tokens are on only when `delegation.token.secret.key` (or the old `delegation.token.master.key`)
is set; otherwise every token request answers DELEGATION_TOKEN_AUTH_DISABLED. The tokens live in
the metadata store (the file on a single node, /delegation_token in ZooKeeper on a cluster); the
HMAC of each is recomputed from the secret, and its SCRAM credentials (both mechanisms, from the
base64 HMAC as password) are derived on first use and cached here.

Times are wall-clock milliseconds (`clock.time_ms`), as the timestamps clients are given. Store
writes block on ZooKeeper on a cluster: handlers call the mutating methods from a thread.
"""

from __future__ import annotations

import hmac as hmac_module
import logging

from logbroker.errors import (
    DelegationTokenAuthDisabledError,
    DelegationTokenExpiredError,
    DelegationTokenNotFoundError,
    DelegationTokenOwnerMismatchError,
)
from logbroker.security.delegation_token import (
    TokenInformation,
    new_token_id,
    split_principal,
    token_hmac,
    token_password,
)

log = logging.getLogger("kafka.server.DelegationTokenManager")


class DelegationTokenManager:
    def __init__(self, *, config, store, clock) -> None:
        self.secret_key: str | None = config.delegation_token_secret_key or config.delegation_token_master_key
        self.max_lifetime_ms: int = config.delegation_token_max_lifetime_ms
        self.default_renew_ms: int = config.delegation_token_expiry_time_ms
        self._store = store
        self._clock = clock
        self._credentials: dict[tuple[str, str], object] = {}  # (token id, mechanism) → ScramCredential

    @property
    def enabled(self) -> bool:
        return bool(self.secret_key)

    def require_enabled(self) -> None:
        if not self.enabled:
            raise DelegationTokenAuthDisabledError(
                "Delegation Token feature is not enabled: set delegation.token.secret.key on every broker")

    def hmac(self, token_id: str) -> bytes:
        return token_hmac(token_id, self.secret_key or "")

    # -- the four APIs ----------------------------------------------------------------------------
    def create(self, *, owner: str, requester: str, renewers: tuple[str, ...],
               max_lifetime_ms: int) -> tuple[TokenInformation, bytes]:
        """A new token; its lifetime is the request's (≤ 0: the broker's maximum), capped by
        delegation.token.max.lifetime.ms, and it expires after delegation.token.expiry.time.ms
        unless renewed."""
        self.require_enabled()
        now = self._clock.time_ms()
        lifetime = self.max_lifetime_ms if max_lifetime_ms <= 0 else min(max_lifetime_ms, self.max_lifetime_ms)
        max_ts = now + lifetime
        info = TokenInformation(token_id=new_token_id(), owner=owner, token_requester=requester,
                                renewers=renewers, issue_timestamp_ms=now,
                                expiry_timestamp_ms=min(max_ts, now + self.default_renew_ms),
                                max_timestamp_ms=max_ts)
        self._store.put_delegation_token(info)
        log.info("Created delegation token %s for %s", info.token_id, owner)
        return info, self.hmac(info.token_id)

    def renew(self, token_hmac_bytes: bytes, principal: str, renew_period_ms: int) -> int:
        """The new expiry: now + the period (< 0: the broker's default), never past the token's
        maximum. Only its owner and renewers may renew it."""
        info = self._live_token(token_hmac_bytes, principal)
        now = self._clock.time_ms()
        period = self.default_renew_ms if renew_period_ms < 0 else renew_period_ms
        expiry = min(info.max_timestamp_ms, now + period)
        self._store.put_delegation_token(info.with_expiry(expiry))
        return expiry

    def expire(self, token_hmac_bytes: bytes, principal: str, expiry_period_ms: int) -> int:
        """A negative period expires (removes) the token now; otherwise it expires after the period."""
        info = self._live_token(token_hmac_bytes, principal)
        now = self._clock.time_ms()
        if expiry_period_ms < 0:
            self._remove(info.token_id)
            log.info("Expired delegation token %s at the request of %s", info.token_id, principal)
            return now
        expiry = min(info.max_timestamp_ms, now + expiry_period_ms)
        self._store.put_delegation_token(info.with_expiry(expiry))
        return expiry

    def describe(self, owners: list[str] | None, may_describe) -> list[tuple[TokenInformation, bytes]]:
        """The tokens `may_describe(info)` allows, of `owners` (None: every owner)."""
        self.require_enabled()
        tokens = sorted(self._store.delegation_tokens().values(), key=lambda t: t.issue_timestamp_ms)
        return [(t, self.hmac(t.token_id)) for t in tokens
                if (owners is None or t.owner in owners) and may_describe(t)]

    # -- SCRAM ------------------------------------------------------------------------------------
    def scram_token(self, token_id: str, mechanism: str):
        """(owner's user name, ScramCredential, expiry timestamp ms) of a token, or None."""
        if not self.enabled:
            return None
        info = self._store.delegation_tokens().get(token_id)
        if info is None:
            return None
        credential = self._credentials.get((token_id, mechanism))
        if credential is None:
            from logbroker.security.scram import ScramFormatter
            credential = ScramFormatter(mechanism).credential(token_password(self.hmac(token_id)))
            self._credentials[(token_id, mechanism)] = credential
        return split_principal(info.owner)[1], credential, min(info.expiry_timestamp_ms, info.max_timestamp_ms)

    # -- expiry -----------------------------------------------------------------------------------
    def purge_expired(self) -> int:
        """Remove every expired token (the delegation.token.expiry.check.interval.ms task); the count."""
        now = self._clock.time_ms()
        expired = [t.token_id for t in self._store.delegation_tokens().values() if t.expired(now)]
        for token_id in expired:
            self._remove(token_id)
            log.info("Purged expired delegation token %s", token_id)
        return len(expired)

    def _remove(self, token_id: str) -> None:
        self._store.remove_delegation_token(token_id)
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            self._credentials.pop((token_id, mechanism), None)

    def _live_token(self, token_hmac_bytes: bytes, principal: str) -> TokenInformation:
        self.require_enabled()
        info = next((t for t in self._store.delegation_tokens().values()
                     if hmac_module.compare_digest(self.hmac(t.token_id), token_hmac_bytes)), None)
        if info is None:
            raise DelegationTokenNotFoundError("Delegation Token is not found on server.")
        if not info.may_renew(principal):
            raise DelegationTokenOwnerMismatchError(
                f"{principal} is neither the owner nor a renewer of delegation token {info.token_id}")
        if info.expired(self._clock.time_ms()):
            raise DelegationTokenExpiredError(f"Delegation token {info.token_id} has expired")
        return info
