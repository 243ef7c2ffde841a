"""SaslHandshake (api key 17), v0-1: the client names its mechanism.

v1 means SaslAuthenticate requests carry the tokens; v0 means raw size-prefixed tokens follow
(server/authenticator.py). An unknown mechanism gets UNSUPPORTED_SASL_MECHANISM with the enabled
list, then the connection closes. On a listener without SASL the answer is ILLEGAL_SASL_STATE.
"""

from __future__ import annotations

from logbroker.errors import IllegalSaslStateError

API_KEY = 17


def handle(broker, request):
    sasl = request.connection.sasl if request.connection is not None else None
    if sasl is None:
        return {"error_code": IllegalSaslStateError.code, "mechanisms": []}
    return sasl.handshake(request.api_version, request.body.mechanism)
