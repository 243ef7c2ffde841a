"""HTTP Basic authentication of registry requests against the broker's SASL users.

A broker with a SASL listener has users: PLAIN users from the JAAS `user_<name>="<password>"`
options of its listeners, SCRAM users from the credential store (/config/users on a cluster).
Such a broker's registry asks every request for Basic credentials and checks them against both (a
password is accepted when it matches the PLAIN entry or any SCRAM credential of the user); a
principal `User:<name>` listed in `super.users` may also change configs and modes and delete.
A broker without SASL users serves the registry without authentication, as Confluent's does by
default. Successful checks are remembered for CACHE_TTL_S by a hash of the header, so a client's
requests do not each pay for PBKDF2.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import time
from collections.abc import Callable
from dataclasses import dataclass

from logbroker.schema_registry import errors
from logbroker.security.scram import MECHANISMS, ScramFormatter

CACHE_TTL_S = 30.0


@dataclass(frozen=True, slots=True)
class RegistryUser:
    name: str
    is_super_user: bool


class BasicAuthenticator:
    """`plain_users()` gives the PLAIN users now (the JAAS configs may change at run time);
    `scram_credential(user, mechanism)` is the credential store's lookup (None: no such user)."""

    def __init__(self, *, plain_users: Callable[[], dict[str, str]], scram_mechanisms: tuple[str, ...],
                 scram_credential: Callable, super_users: frozenset[str]) -> None:
        self.plain_users = plain_users
        self.scram_mechanisms = tuple(m for m in scram_mechanisms if m in MECHANISMS)
        self.scram_credential = scram_credential
        self.super_users = super_users
        self._verified: dict[bytes, tuple[float, RegistryUser]] = {}

    def authenticate(self, authorization: str | None) -> RegistryUser:
        """The user of an `Authorization` header; raises Unauthorized. May block for PBKDF2."""
        if not authorization or not authorization[:6].lower() == "basic ":
            raise errors.Unauthorized()
        digest = hashlib.sha256(authorization.encode()).digest()
        cached = self._verified.get(digest)
        now = time.monotonic()
        if cached is not None and now - cached[0] < CACHE_TTL_S:
            return cached[1]
        try:
            name, sep, password = base64.b64decode(authorization[6:].strip(), validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            raise errors.Unauthorized() from None
        if not sep or not self._password_matches(name, password):
            raise errors.Unauthorized()
        user = RegistryUser(name, f"User:{name}" in self.super_users)
        if len(self._verified) > 10_000:
            self._verified.clear()
        self._verified[digest] = (now, user)
        return user

    def _password_matches(self, name: str, password: str) -> bool:
        expected = self.plain_users().get(name)
        if expected is not None and hmac.compare_digest(expected.encode(), password.encode()):
            return True
        for mechanism in self.scram_mechanisms:
            credential = self.scram_credential(name, mechanism)
            if credential is not None and ScramFormatter(mechanism).password_matches(password, credential):
                return True
        return False


def require_super_user(user: RegistryUser | None, action: str) -> None:
    """403 unless `user` is a super user (None: authentication is off, anyone may)."""
    if user is not None and not user.is_super_user:
        raise errors.Forbidden(f"User {user.name} is denied operation {action}: it needs a super user "
                               "(super.users)")


def broker_authenticator(broker) -> BasicAuthenticator | None:
    """The authenticator for `broker`'s users, or None when no listener uses SASL. The PLAIN users
    follow `broker.config`, which dynamic broker configs replace (JAAS entries among them)."""
    from logbroker.security.authorizer import parse_super_users
    config = broker.config
    sasl_listeners = [e.listener_name for e in config.listeners
                      if config.listener_security_protocol_map[e.listener_name] in ("SASL_PLAINTEXT", "SASL_SSL")]
    if not sasl_listeners:
        return None
    scram: list[str] = []
    for name in sasl_listeners:
        scram.extend(m for m in config.listener_value(name, "sasl.enabled.mechanisms") if m in MECHANISMS and m not in scram)
    cached: list = [None, {}]  # (the config they were read from, the PLAIN users)

    def plain_users() -> dict[str, str]:
        if cached[0] is not broker.config:
            cached[:] = [broker.config, _plain_users(broker.config, sasl_listeners)]
        return cached[1]
    return BasicAuthenticator(plain_users=plain_users, scram_mechanisms=tuple(scram),
                              scram_credential=lambda user, mechanism: broker.credential_store.scram_credential(user, mechanism),
                              super_users=parse_super_users(config.super_users))


def _plain_users(config, listeners: list[str]) -> dict[str, str]:
    from logbroker.security.jaas import plain_users
    users: dict[str, str] = {}
    for name in listeners:
        if "PLAIN" in config.listener_value(name, "sasl.enabled.mechanisms"):
            jaas = config.listener_jaas_config(name, "PLAIN")
            users.update(plain_users(jaas) if jaas else {})
    return users
