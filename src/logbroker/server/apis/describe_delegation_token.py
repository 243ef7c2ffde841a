"""DescribeDelegationToken (api key 41), v1-3: the tokens of the given owners (null: every owner;
an empty list: none) that the requester may see — its own, those it requested or may renew, and
any it has DESCRIBE on (the DELEGATION_TOKEN resource, by token id), as in Kafka. Each comes with
its HMAC."""

from __future__ import annotations

from logbroker.errors import KafkaError
from logbroker.security.acl import AclOperation, ResourceType
from logbroker.security.delegation_token import split_principal
from logbroker.server.apis._delegation_tokens import require_token_requests_allowed
from logbroker.server.authorization import allowed, principal

API_KEY = 41


def handle(broker, request) -> dict:
    owners = request.body.owners
    try:
        require_token_requests_allowed(request)
        if owners is not None and not owners:
            broker.delegation_tokens.require_enabled()
            return {"error_code": 0, "tokens": []}
        me = principal(request)

        def may_describe(info) -> bool:
            return info.may_describe(me) or allowed(broker, request, AclOperation.DESCRIBE,
                                                    ResourceType.DELEGATION_TOKEN, info.token_id,
                                                    log_denied=False)
        wanted = None if owners is None else [f"{o.principal_type}:{o.principal_name}" for o in owners]
        tokens = broker.delegation_tokens.describe(wanted, may_describe)
    except KafkaError as exc:
        return {"error_code": exc.code, "tokens": []}
    return {"error_code": 0, "tokens": [_described(info, token_hmac) for info, token_hmac in tokens]}


def _described(info, token_hmac: bytes) -> dict:
    owner_kind, owner_name = split_principal(info.owner)
    requester_kind, requester_name = split_principal(info.token_requester)
    return {"principal_type": owner_kind, "principal_name": owner_name,
            "token_requester_principal_type": requester_kind,
            "token_requester_principal_name": requester_name,
            "issue_timestamp": info.issue_timestamp_ms, "expiry_timestamp": info.expiry_timestamp_ms,
            "max_timestamp": info.max_timestamp_ms, "token_id": info.token_id, "hmac": token_hmac,
            "renewers": [dict(zip(("principal_type", "principal_name"), split_principal(r)))
                         for r in info.renewers]}
