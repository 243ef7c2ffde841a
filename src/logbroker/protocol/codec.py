"""Frames to request objects and response objects to frames, via kio's generated message classes.

`decode_request(frame)` parses the header, checks the api and version against the table
(apis.SUPPORTED_APIS) and parses the body into the kio class of that api and version
(`kio.schema.<api>.v<N>.request`). `encode_response(...)` serialises a kio response object with its
header and size prefix. The hot responses (Produce, Fetch, Metadata, ListOffsets) have hand-written
encoders in `protocol.responses` instead, because kio's encoder is slow.

What a client can get wrong, and what happens (each error carries the correlation id for the log):

* unknown api key -> UnknownApiKeyError; a supported api at another version ->
  UnsupportedApiVersionError; a body that does not parse -> MalformedRequestError. The server
  closes the connection for all three, as Kafka does.
* ApiVersions at a version we do not support must be answered, not closed: Kafka sends
  UNSUPPORTED_VERSION and a v0 body listing what it does support, so the client can retry lower
  (clients.md 2; closing makes librdkafka fall back to a 0.10-era protocol). Like Kafka, we do
  not parse its body. `decode_request` raises UnsupportedApiVersionsRequest (not a KafkaError)
  whose `.response` is that answer, `encode_api_versions_unsupported(correlation_id)`.

Produce is decoded by hand (protocol/requests/produce.py): its body is that module's NamedTuples,
not kio's classes, and each partition's records are a read-only view of the frame, which is itself
a view of the one copy the frame decoder made of the socket's reads, or of the buffer a large
frame was read into (framing.py) — no other copy until the page cache. Every other API goes
through guard.py's walk and kio's reader.
"""

from __future__ import annotations

import io
import struct
from typing import Any, NamedTuple

from kio.index import load_request_schema
from kio.serial import entity_reader, entity_writer

from logbroker.protocol import apis
from logbroker.protocol.apis import ApiKey
from logbroker.protocol.errors import (
    MalformedRequestError,
    UnknownApiKeyError,
    UnsupportedApiVersionError,
    UnsupportedApiVersionsRequest,
)
from logbroker.protocol.guard import BodyRejected, check_body, prepare_guard
from logbroker.protocol.headers import parse_header_tail, peek_request_header, response_prefix
from logbroker.protocol.requests.produce import decode_produce_request

UNSUPPORTED_VERSION = 35
_PRODUCE = int(ApiKey.PRODUCE)  # an enum member is an attribute lookup through the enum's class


class Request(NamedTuple):
    """A decoded request. `body` is the kio request object of (api_key, api_version) — for
    Produce, protocol/requests/produce.py's ProduceRequest.

    A NamedTuple rather than a frozen dataclass: one is built per request, and this is 3x cheaper.
    """

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header_version: int
    body: Any
    size: int  # frame size in bytes, size prefix excluded


_readers: dict[tuple[int, int], tuple[type, Any]] = {}


def request_class(api_key: int, api_version: int) -> type:
    """The kio request class of a supported (api, version)."""
    return _reader(api_key, api_version)[0]


def _reader(api_key: int, api_version: int) -> tuple[type, Any]:
    entry = _readers.get((api_key, api_version))
    if entry is None:
        cls = load_request_schema(api_key, api_version)
        entry = _readers[(api_key, api_version)] = (cls, entity_reader(cls))
    return entry


def preload() -> None:
    """Import every supported request class and build its guard now (about 0.3 s) rather than
    on the first request of each (api, version); for broker startup."""
    for spec in apis.SUPPORTED_APIS.values():
        for version in range(spec.min_version, spec.max_version + 1):
            prepare_guard(_reader(spec.api_key, version)[0])


def decode_request(frame: bytes | memoryview) -> Request:
    """Decode one frame (what FrameDecoder returned: header + body, no size prefix)."""
    return Request._make(decode_request_fields(frame))


def decode_request_fields(frame: bytes | memoryview) -> tuple:
    """`decode_request`'s fields as a plain tuple, in Request's order: for the dispatcher, which
    copies them into its own per-request context at once (a Request built and dropped costs
    ~0.3 µs a request)."""
    api_key, api_version, correlation_id = peek_request_header(frame)
    spec = apis.SUPPORTED_APIS.get(api_key)
    if spec is None:
        raise UnknownApiKeyError(
            f"unknown or unsupported api key {api_key} (version {api_version}, "
            f"correlation id {correlation_id})",
            api_key=api_key, api_version=api_version, correlation_id=correlation_id)

    if not spec.min_version <= api_version <= spec.max_version:
        if api_key == ApiKey.API_VERSIONS:
            client_id, _ = parse_header_tail(frame, apis.request_header_version(api_key, api_version))
            raise UnsupportedApiVersionsRequest(
                api_version=api_version, correlation_id=correlation_id, client_id=client_id,
                response=encode_api_versions_unsupported(correlation_id))
        raise UnsupportedApiVersionError(
            f"{spec.name} v{api_version} is not supported (we support v{spec.min_version}"
            f"-v{spec.max_version}; correlation id {correlation_id})",
            api_key=api_key, api_version=api_version, correlation_id=correlation_id)

    header_version = 2 if spec.flexible_from is not None and api_version >= spec.flexible_from else 1
    client_id, pos = parse_header_tail(frame, header_version)
    try:
        if api_key == _PRODUCE:
            body = decode_produce_request(frame, pos, api_version)
        else:
            cls, reader = _reader(api_key, api_version)
            check_body(cls, frame, pos)
            body, _ = reader(frame, pos)
    except BodyRejected as e:
        raise _malformed(spec, api_version, correlation_id, str(e)) from None
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:  # noqa: BLE001 - kio's Rust panics arrive as a BaseException
        raise _malformed(spec, api_version, correlation_id, f"{type(e).__name__}: {e}") from None
    return api_key, api_version, correlation_id, client_id, header_version, body, len(frame)


def _malformed(spec: apis.ApiSpec, version: int, correlation_id: int, why: str) -> MalformedRequestError:
    return MalformedRequestError(
        f"malformed {spec.name} v{version} request (correlation id {correlation_id}): {why}",
        api_key=spec.api_key, api_version=version, correlation_id=correlation_id)


def encode_response(api_key: int, api_version: int, correlation_id: int, body: Any) -> bytes:
    """A whole response frame: size prefix, response header, then the kio `body` serialised."""
    cls = type(body)
    if cls.__api_key__ != api_key or cls.__version__ != api_version:
        raise ValueError(f"{cls.__module__}.{cls.__name__} is not a response to api {api_key} "
                         f"v{api_version}")
    buffer = io.BytesIO()
    entity_writer(cls)(buffer, body)
    data = buffer.getvalue()
    return response_prefix(correlation_id, apis.response_header_version(api_key, api_version),
                           len(data)) + data


_API_VERSION_ENTRY = struct.Struct(">hhh")


def encode_api_versions_unsupported(correlation_id: int) -> bytes:
    """The answer to an ApiVersions request at a version we do not support.

    Header v0 and a v0 body — error_code UNSUPPORTED_VERSION (35) and the whole table — as Kafka
    sends it, so that the client can pick a version from our ApiVersions row and ask again.
    """
    entries = apis.api_versions_entries()
    body = b"".join([struct.pack(">hi", UNSUPPORTED_VERSION, len(entries)),
                     *(_API_VERSION_ENTRY.pack(*entry) for entry in entries)])
    return response_prefix(correlation_id, 0, len(body)) + body


__all__ = [
    "MalformedRequestError",
    "Request",
    "UnknownApiKeyError",
    "UnsupportedApiVersionError",
    "UnsupportedApiVersionsRequest",
    "decode_request",
    "decode_request_fields",
    "encode_api_versions_unsupported",
    "encode_response",
    "preload",
    "request_class",
]
