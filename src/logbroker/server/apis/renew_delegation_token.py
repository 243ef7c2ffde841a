"""RenewDelegationToken (api key 39), v1-2: push a token's expiry to now + `renew_period` (< 0:
delegation.token.expiry.time.ms), never past its maximum lifetime. Only its owner and renewers
(DELEGATION_TOKEN_OWNER_MISMATCH); an unknown HMAC is DELEGATION_TOKEN_NOT_FOUND, an expired
token DELEGATION_TOKEN_EXPIRED."""

from __future__ import annotations

from logbroker.errors import KafkaError
from logbroker.server.apis._delegation_tokens import NO_TIMESTAMP, in_store_thread, require_token_requests_allowed
from logbroker.server.authorization import principal

API_KEY = 39


async def handle(broker, request) -> dict:
    body = request.body
    period_ms = int(body.renew_period.total_seconds() * 1000)
    try:
        require_token_requests_allowed(request)
        expiry = await in_store_thread(broker, lambda: broker.delegation_tokens.renew(
            body.hmac, principal(request), period_ms))
    except KafkaError as exc:
        return {"error_code": exc.code, "expiry_timestamp": NO_TIMESTAMP}
    return {"error_code": 0, "expiry_timestamp": expiry}
