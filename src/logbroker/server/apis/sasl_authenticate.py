"""SaslAuthenticate (api key 36), v0-2: one SASL token each way, after SaslHandshake v1.

A failed exchange answers SASL_AUTHENTICATION_FAILED with a message and closes the connection
after connection.failed.authentication.delay.ms. v1+ carries session_lifetime_ms
(connections.max.reauth.ms; 0 = no limit).
"""

from __future__ import annotations

from logbroker.errors import IllegalSaslStateError
from logbroker.server.network import CloseAfter

API_KEY = 36


def handle(broker, request):
    connection = request.connection
    sasl = connection.sasl if connection is not None else None
    if sasl is None:
        return CloseAfter({"error_code": IllegalSaslStateError.code, "auth_bytes": b"",
                           "error_message": "SaslAuthenticate on a listener without SASL"})
    result = sasl.authenticate(request.api_version, request.body.auth_bytes)
    if sasl.state == "complete":
        connection.authenticated(sasl.principal)
    return result
