"""Errors the protocol layer raises about what a client sent.

Each is a `KafkaError` from `logbroker.errors`, so `server/dispatch.py` can map it like any other.
They carry what the server needs for its one log line (api key, version, correlation id) before it
closes the connection, which is what Kafka does for every one of them: a frame or request header it
cannot trust leaves no way to answer in step with the client.

The one request that is answered instead of closed, ApiVersions at a version we do not support,
raises `UnsupportedApiVersionsRequest`, which is deliberately not a KafkaError: it carries the
ready answer, and the connection stays open (see codec.py).
"""

from __future__ import annotations

from logbroker.errors import InvalidRequestError, UnsupportedVersionError


class InvalidReceiveError(InvalidRequestError):
    """A frame's size prefix is negative or above `socket.request.max.bytes`.

    Kafka's InvalidReceiveException: raised as soon as the 4-byte prefix is read, before any of the
    body is buffered, so a bogus prefix cannot make the broker allocate.
    """

    def __init__(self, message: str, *, size: int, max_size: int) -> None:
        super().__init__(message)
        self.size = size
        self.max_size = max_size


class RequestHeaderError(InvalidRequestError):
    """The request header is truncated or malformed: there is no correlation id to answer to."""


class _RequestError:
    api_key: int
    api_version: int
    correlation_id: int

    def _init(self, api_key: int, api_version: int, correlation_id: int) -> None:
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id


class UnknownApiKeyError(_RequestError, InvalidRequestError):
    """The api key is not one this broker implements (or not a Kafka api at all)."""

    def __init__(self, message: str, *, api_key: int, api_version: int, correlation_id: int) -> None:
        InvalidRequestError.__init__(self, message)
        self._init(api_key, api_version, correlation_id)


class UnsupportedApiVersionError(_RequestError, UnsupportedVersionError):
    """A known api at a version outside the range we advertise (never raised for ApiVersions)."""

    def __init__(self, message: str, *, api_key: int, api_version: int, correlation_id: int) -> None:
        UnsupportedVersionError.__init__(self, message)
        self._init(api_key, api_version, correlation_id)


class MalformedRequestError(_RequestError, InvalidRequestError):
    """The header was fine but the body does not parse as the schema of its api and version."""

    def __init__(self, message: str, *, api_key: int, api_version: int, correlation_id: int) -> None:
        InvalidRequestError.__init__(self, message)
        self._init(api_key, api_version, correlation_id)


class UnsupportedApiVersionsRequest(Exception):  # noqa: N818 - a request to answer, not a failure
    """An ApiVersions request at a version we do not support: send `response` and keep going.

    `response` is the whole frame Kafka sends here (UNSUPPORTED_VERSION with a v0 body listing
    every api we support), built by `codec.encode_api_versions_unsupported(correlation_id)`.
    Not a KafkaError on purpose, so that a handler of KafkaError that closes the connection
    cannot catch it by accident.
    """

    def __init__(self, *, api_version: int, correlation_id: int, client_id: str | None,
                 response: bytes) -> None:
        super().__init__(f"ApiVersions v{api_version} is not supported (correlation id "
                         f"{correlation_id}); answering UNSUPPORTED_VERSION with a v0 body")
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id
        self.response = response
