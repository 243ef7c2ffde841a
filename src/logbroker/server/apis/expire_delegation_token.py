"""ExpireDelegationToken (api key 40), v1-2: a negative `expiry_time_period` removes the token at
once; otherwise it expires after that period (never past its maximum). The same owner, renewer,
not-found and expired checks as RenewDelegationToken."""

from __future__ import annotations

from logbroker.server.apis._delegation_tokens import change_expiry

API_KEY = 40


async def handle(broker, request) -> dict:
    return await change_expiry(broker, request, broker.delegation_tokens.expire,
                               request.body.expiry_time_period)
