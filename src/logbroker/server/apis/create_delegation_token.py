"""CreateDelegationToken (api key 38), v1-3: a new token for the requester, or (v3, KIP-373) for
another owner when the requester may CREATE_TOKENS on that user.

Renewers and owners must be `User` principals (INVALID_PRINCIPAL_TYPE). The answer carries the
token id and HMAC the client authenticates with; `max_lifetime` ≤ 0 takes the broker's
delegation.token.max.lifetime.ms, anything longer is capped by it.
"""

from __future__ import annotations

from logbroker.errors import (
    DelegationTokenAuthorizationFailedError,
    InvalidPrincipalTypeError,
    KafkaError,
)
from logbroker.security.acl import AclOperation, ResourceType
from logbroker.security.delegation_token import split_principal
from logbroker.server.apis._delegation_tokens import NO_TIMESTAMP, in_store_thread, require_token_requests_allowed
from logbroker.server.authorization import allowed, principal

API_KEY = 38


def _failed(code: int, requester: str) -> dict:
    kind, name = split_principal(requester)
    return {"error_code": code, "principal_type": kind, "principal_name": name,
            "token_requester_principal_type": kind, "token_requester_principal_name": name,
            "issue_timestamp": NO_TIMESTAMP, "expiry_timestamp": NO_TIMESTAMP,
            "max_timestamp": NO_TIMESTAMP,
            "token_id": "", "hmac": b""}


async def handle(broker, request) -> dict:
    body = request.body
    requester = principal(request)
    owner_type = getattr(body, "owner_principal_type", None)
    owner_name = getattr(body, "owner_principal_name", None)
    owner = f"{owner_type}:{owner_name}" if owner_type and owner_name else requester
    try:
        require_token_requests_allowed(request)
        broker.delegation_tokens.require_enabled()
        if any(r.principal_type != "User" for r in body.renewers) or (owner_type and owner_type != "User"):
            raise InvalidPrincipalTypeError("Delegation token owners and renewers must be User principals")
        if owner != requester and not allowed(broker, request, AclOperation.CREATE_TOKENS,
                                              ResourceType.USER, split_principal(owner)[1]):
            raise DelegationTokenAuthorizationFailedError(
                f"{requester} may not create delegation tokens for {owner}")
        renewers = tuple(dict.fromkeys(f"{r.principal_type}:{r.principal_name}" for r in body.renewers))
        lifetime_ms = int(body.max_lifetime.total_seconds() * 1000)
        info, token_hmac = await in_store_thread(broker, lambda: broker.delegation_tokens.create(
            owner=owner, requester=requester, renewers=renewers, max_lifetime_ms=lifetime_ms))
    except KafkaError as exc:
        return _failed(exc.code, requester)
    owner_kind, owner_user = split_principal(info.owner)
    requester_kind, requester_user = split_principal(info.token_requester)
    return {"error_code": 0, "principal_type": owner_kind, "principal_name": owner_user,
            "token_requester_principal_type": requester_kind,
            "token_requester_principal_name": requester_user,
            "issue_timestamp": info.issue_timestamp_ms, "expiry_timestamp": info.expiry_timestamp_ms,
            "max_timestamp": info.max_timestamp_ms, "token_id": info.token_id, "hmac": token_hmac}
