"""ExpireDelegationToken (api key 40), v1-2: a negative `expiry_time_period` removes the token at
once; otherwise it expires after that period (never past its maximum). The same owner, renewer,
not-found and expired checks as RenewDelegationToken."""

from __future__ import annotations

from logbroker.errors import KafkaError
from logbroker.server.apis._delegation_tokens import NO_TIMESTAMP, in_store_thread, require_token_requests_allowed
from logbroker.server.authorization import principal

API_KEY = 40


async def handle(broker, request) -> dict:
    body = request.body
    period_ms = int(body.expiry_time_period.total_seconds() * 1000)
    try:
        require_token_requests_allowed(request)
        expiry = await in_store_thread(broker, lambda: broker.delegation_tokens.expire(
            body.hmac, principal(request), period_ms))
    except KafkaError as exc:
        return {"error_code": exc.code, "expiry_timestamp": NO_TIMESTAMP}
    return {"error_code": 0, "expiry_timestamp": expiry}
