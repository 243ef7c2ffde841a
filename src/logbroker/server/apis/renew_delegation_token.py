"""RenewDelegationToken (api key 39), v1-2: push a token's expiry to now + `renew_period` (< 0:
delegation.token.expiry.time.ms), never past its maximum lifetime. Only its owner and renewers
(DELEGATION_TOKEN_OWNER_MISMATCH); an unknown HMAC is DELEGATION_TOKEN_NOT_FOUND, an expired
token DELEGATION_TOKEN_EXPIRED."""

from __future__ import annotations

from logbroker.server.apis._delegation_tokens import change_expiry

API_KEY = 39


async def handle(broker, request) -> dict:
    return await change_expiry(broker, request, broker.delegation_tokens.renew,
                               request.body.renew_period)
