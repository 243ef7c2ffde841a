"""AlterUserScramCredentials (api key 51), v0: add, replace or delete SCRAM credentials.

The client sends the salt and the salted password (never the password); the broker keeps salt,
stored_key, server_key and iterations (security/scram.py). Per user, as Kafka answers: an unknown
mechanism → UNSUPPORTED_SASL_MECHANISM; iterations outside 4096..16384, an empty name or salt →
UNACCEPTABLE_CREDENTIAL; deleting what does not exist → RESOURCE_NOT_FOUND; the same
(user, mechanism) twice → DUPLICATE_RESOURCE. A user's changes apply all or nothing.
"""

from __future__ import annotations

from collections import Counter

from logbroker.errors import (
    ClusterAuthorizationFailedError,
    DuplicateResourceError,
    ResourceNotFoundError,
    UnacceptableCredentialError,
    UnsupportedSaslMechanismError,
)
from logbroker.security.acl import AclOperation
from logbroker.security.scram import MAX_ITERATIONS, MECHANISM_BY_TYPE, MIN_ITERATIONS, ScramFormatter
from logbroker.server.authorization import cluster_allowed

API_KEY = 51


def handle(broker, request) -> dict:
    body = request.body
    stored = broker.credential_store.scram_users()
    denied = None if cluster_allowed(broker, request, AclOperation.ALTER) else (
        ClusterAuthorizationFailedError.code, "Not authorized to alter SCRAM credentials (needs "
                                              "Alter on the cluster).")
    changes = [(d.name, d.mechanism, None) for d in body.deletions] + \
              [(u.name, u.mechanism, u) for u in body.upsertions]
    seen = Counter((name, mechanism) for name, mechanism, _ in changes)
    errors: dict[str, tuple[int, str]] = {}
    for name, mechanism, upsertion in changes:
        if name in errors:
            continue
        problem = _check(name, mechanism, upsertion, stored, seen) or denied
        if problem:
            errors[name] = problem
    for name, mechanism, upsertion in changes:
        if name in errors:
            continue
        mechanism_name = MECHANISM_BY_TYPE[mechanism]
        if upsertion is None:
            broker.credential_store.delete_scram_credential(name, mechanism_name)
        else:
            credential = ScramFormatter(mechanism_name).credential_from_salted(
                upsertion.salted_password, upsertion.salt, upsertion.iterations)
            broker.credential_store.set_scram_credential(name, mechanism_name, credential)
    results = []
    for name in dict.fromkeys(name for name, _, _ in changes):
        code, message = errors.get(name, (0, None))
        results.append({"user": name, "error_code": code, "error_message": message})
    return {"results": results}


def _check(name, mechanism, upsertion, stored, seen) -> tuple[int, str] | None:
    if not name:
        return UnacceptableCredentialError.code, "Username must not be empty"
    if mechanism not in MECHANISM_BY_TYPE:
        return UnsupportedSaslMechanismError.code, f"Unknown SCRAM mechanism {mechanism}"
    if seen[(name, mechanism)] > 1:
        return DuplicateResourceError.code, "A user credential cannot be altered twice in the same request"
    mechanism_name = MECHANISM_BY_TYPE[mechanism]
    if upsertion is None:
        if mechanism_name not in stored.get(name, {}):
            return ResourceNotFoundError.code, "Attempt to delete a user credential that does not exist"
        return None
    if upsertion.iterations < MIN_ITERATIONS:
        return UnacceptableCredentialError.code, "Too few iterations"
    if upsertion.iterations > MAX_ITERATIONS:
        return UnacceptableCredentialError.code, "Too many iterations"
    if not upsertion.salt or not upsertion.salted_password:
        return UnacceptableCredentialError.code, "Salt and salted password must not be empty"
    return None
