"""What the four delegation-token APIs share: who may ask for tokens at all, and running a token
change off the event loop where the store blocks (ZooKeeper on a cluster).

Kafka's allowTokenRequests: tokens are made, renewed, expired and described only over connections
that authenticated a real principal — SASL (not with a token itself) or TLS with a client
certificate. PLAINTEXT, one-way TLS and token-authenticated connections get
DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, before the feature is even checked.
"""

from __future__ import annotations

import asyncio

from kio.serial.readers import tz_aware_from_i64
from kio.static.primitive import i64

from logbroker.errors import DelegationTokenRequestNotAllowedError, KafkaError
from logbroker.security.principal import ANONYMOUS
from logbroker.server.authorization import principal

# Kafka answers -1 for a failed request's timestamps; `build` would make a negative int null.
NO_TIMESTAMP = tz_aware_from_i64(i64(-1))


def require_token_requests_allowed(request) -> None:
    connection = request.connection
    protocol = connection.security.security_protocol if connection is not None else "PLAINTEXT"
    sasl = connection.sasl if connection is not None else None
    if (protocol == "PLAINTEXT" or (sasl is not None and sasl.token_authenticated)
            or (protocol == "SSL" and principal(request) == ANONYMOUS)):
        raise DelegationTokenRequestNotAllowedError(
            "Delegation Token requests are not allowed on PLAINTEXT/1-way SSL channels and on "
            "delegation token authenticated channels.")


async def in_store_thread(broker, work):
    """`work()` in a thread on a cluster (its store writes block on ZooKeeper), inline on one node."""
    if broker.zk is None:
        return work()
    return await asyncio.get_running_loop().run_in_executor(None, work)


async def change_expiry(broker, request, change, period) -> dict:
    """Renew or Expire: `change(hmac, principal, period_ms)` on the token store (in its thread),
    answered with the new expiry timestamp or the error it raised."""
    period_ms = int(period.total_seconds() * 1000)
    try:
        require_token_requests_allowed(request)
        expiry = await in_store_thread(broker, lambda: change(request.body.hmac, principal(request), period_ms))
    except KafkaError as exc:
        return {"error_code": exc.code, "expiry_timestamp": NO_TIMESTAMP}
    return {"error_code": 0, "expiry_timestamp": expiry}
