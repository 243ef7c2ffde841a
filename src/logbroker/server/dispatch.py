"""Dispatch: one request frame in, one response (or none) out — and the one place where
exceptions become Kafka error codes.

Each API lives in its own module under `server/apis/` with `API_KEY` and
`handle(broker, request)`. A handler returns a dict (built into that version's kio response and
encoded here), ready chunks (the hand-written hot encoders, Fetch's file regions), None (no
response: acks=0) or CLOSE; an async handler returns the same from a coroutine.

A frame we cannot parse or an API we do not know closes the connection with one WARN line, as
Kafka does; an unexpected exception in a handler is one ERROR line and closes only that
connection. A client can send either at will, so both are rate-limited (`log_limits`), and a
traceback is written only at DEBUG: no client can fill the log with stack traces.

On a SASL listener a connection is gated (`connection.auth_gate`) until it authenticates: only
ApiVersions, SaslHandshake and SaslAuthenticate pass, and after a SaslHandshake v0 the frames are
raw SASL tokens with no request header (server/authenticator.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import functools
import logging
from dataclasses import dataclass
from time import perf_counter_ns
from typing import Any

from kio.index import load_response_schema

from logbroker.errors import KafkaError, UnknownServerError
from logbroker.log_limits import RateLimitedLog
from logbroker.protocol import codec
from logbroker.server.apis import REGISTRY
from logbroker.server.client_quotas import throttle_request
from logbroker.protocol.apis import ApiKey
from logbroker.server.network import CLOSE, CloseAfter, KafkaConnection
from logbroker.server.responses import build

log = logging.getLogger("kafka.server.KafkaApis")
request_log = logging.getLogger("kafka.request.logger")
limited = RateLimitedLog(log, burst=10, interval_s=60.0)


@dataclass(slots=True)
class RequestContext:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any
    connection: KafkaConnection | None
    # Client quotas (server/client_quotas.py): when the request arrived, its size, the event-loop
    # time its decoding and handler took, and whether its handler already counted it.
    start_ns: int = 0
    request_bytes: int = 0
    handler_ns: int = 0
    quota_done: bool = False


def error_code(exc: BaseException) -> int:
    """The Kafka error code for an exception; anything not a KafkaError is a bug and is logged."""
    if isinstance(exc, KafkaError):
        return exc.code
    limited.log(logging.ERROR, "unexpected", "Unexpected error: %r", exc, exc=exc)
    return UnknownServerError.code


@functools.cache
def _response_class(api_key: int, api_version: int) -> type:
    return load_response_schema(api_key, api_version)


class Dispatcher:
    def __init__(self, broker: Any) -> None:
        self.broker = broker

    def __call__(self, frame: memoryview, connection: KafkaConnection):
        start_ns = perf_counter_ns()
        if connection.auth_gate and connection.sasl.expects_raw_token:
            return self._raw_sasl_token(frame, connection)
        try:
            api_key, api_version, correlation_id, client_id, _, body, size = codec.decode_request_fields(frame)
        except codec.UnsupportedApiVersionsRequest as exc:
            return [exc.response]
        except KafkaError as exc:
            limited.log(logging.WARNING, "malformed", "Closing connection from %s: %s", connection.peer, exc)
            return CLOSE
        except Exception as exc:  # noqa: BLE001 - garbage from a client must not crash the broker
            limited.log(logging.WARNING, "malformed", "Closing connection from %s: malformed request (%r)",
                        connection.peer, exc, exc=exc)
            return CLOSE
        if connection.auth_gate and not connection.sasl.allows(api_key):
            limited.log(logging.WARNING, "sasl gate", "Closing connection from %s: %s", connection.peer,
                        connection.sasl.refusal(_api_name(api_key)))
            return CLOSE
        handler = REGISTRY[api_key]
        ctx = RequestContext(api_key, api_version, correlation_id, client_id, body, connection, start_ns, size)
        if request_log.isEnabledFor(logging.DEBUG):
            request_log.debug("Request %s v%d from %s (client %s, correlation %d)", handler.__module__,
                              api_version, connection.peer, client_id, correlation_id)
        try:
            result = handler(self.broker, ctx)
        except Exception as exc:  # noqa: BLE001
            return self._failed(ctx, exc)
        ctx.handler_ns = perf_counter_ns() - start_ns
        if type(result) is list:  # ready chunks (the hand-written encoders: Produce, Fetch)
            quotas = self.broker.client_quotas
            if quotas is None or not quotas.enabled or ctx.quota_done:
                return result  # the hot path: as they are
        elif asyncio.iscoroutine(result):
            return self._finish(ctx, result)
        try:
            return self._throttled(ctx, result)
        except Exception as exc:  # noqa: BLE001 - a response our encoder refuses is our bug
            return self._failed(ctx, exc)

    async def _finish(self, ctx: RequestContext, coroutine):
        try:
            return self._throttled(ctx, await coroutine)
        except Exception as exc:  # noqa: BLE001
            return self._failed(ctx, exc)

    def _throttled(self, ctx: RequestContext, result):
        """Encode `result`, first counting the request against the client's request quota (when
        any quota is configured and the handler did not count it) and carrying its throttle time."""
        quotas = self.broker.client_quotas
        if quotas is None or not quotas.enabled or ctx.quota_done or result is None or result is CLOSE:
            # Ready chunks (the hand-written encoders: Produce, Fetch) are the hot path: as they are.
            return result if type(result) is list else self.encode(ctx, result)
        throttle_ms = throttle_request(self.broker, ctx)
        if throttle_ms and isinstance(result, dict):
            result = {**result, "throttle_time": throttle_ms}
        elif throttle_ms and dataclasses.is_dataclass(result) and hasattr(result, "throttle_time"):
            result = dataclasses.replace(result, throttle_time=datetime.timedelta(milliseconds=throttle_ms))
        return self.encode(ctx, result)

    def _raw_sasl_token(self, frame: memoryview, connection: KafkaConnection):
        result = connection.sasl.raw_token(frame)
        if connection.sasl.state == "complete":
            connection.authenticated(connection.sasl.principal)
        return result

    def _failed(self, ctx: RequestContext, exc: Exception):
        # A KafkaError is the client's doing (WARN); anything else is a bug of ours (ERROR).
        limited.log(logging.WARNING if isinstance(exc, KafkaError) else logging.ERROR, f"failed {ctx.api_key}",
                    "Closing connection from %s: error handling %s v%d (correlation %d): %r",
                    ctx.connection.peer if ctx.connection else "?", _api_name(ctx.api_key),
                    ctx.api_version, ctx.correlation_id, exc,
                    exc=None if isinstance(exc, KafkaError) else exc)
        return CLOSE

    @staticmethod
    def encode(ctx: RequestContext, result):
        if isinstance(result, CloseAfter):
            return CloseAfter(Dispatcher.encode(ctx, result.response))
        if result is None or result is CLOSE or isinstance(result, list):
            return result
        body = result if dataclasses.is_dataclass(result) else build(_response_class(ctx.api_key, ctx.api_version), result)
        return [codec.encode_response(ctx.api_key, ctx.api_version, ctx.correlation_id, body)]


def _api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"API_{api_key}"
