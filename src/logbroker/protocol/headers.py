"""Request and response headers (RequestHeader.json, ResponseHeader.json).

Request header, after the frame's size prefix, big-endian:

    v0  request_api_key int16, request_api_version int16, correlation_id int32
    v1  + client_id: nullable string with an int16 length (-1 = null)
    v2  + tagged fields (an unsigned varint count, then tag / size / bytes each)

In v2 `client_id` stays the non-compact int16-length string (clients.md 3): Kafka special-cases
it so that a broker can read the client id of any request without knowing the api's versions.
The header version is 2 iff the request's api version is flexible (`apis.request_header_version`);
v0 belonged only to ControlledShutdown v0, which no client sends any more.

Response header: v0 is the correlation id; v1 adds the tagged-field section, which we always send
empty (one 0 byte). Flexible responses use v1, except ApiVersions (always v0, clients.md 1).
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from logbroker.protocol import apis
from logbroker.protocol.errors import RequestHeaderError
from logbroker.protocol.wire import skip_tagged_fields

_V0 = struct.Struct(">hhi")
_I16 = struct.Struct(">h")
_SIZE_CORRELATION = struct.Struct(">ii")

REQUEST_HEADER_V0_SIZE = _V0.size  # 8


class RequestHeader(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header_version: int


def peek_request_header(frame: bytes | memoryview) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id): the first 8 bytes, common to every header version."""
    if len(frame) < REQUEST_HEADER_V0_SIZE:
        raise RequestHeaderError(
            f"request of {len(frame)} bytes is shorter than a request header ({REQUEST_HEADER_V0_SIZE})")
    return _V0.unpack_from(frame, 0)


def parse_request_header(frame: bytes | memoryview, header_version: int) -> tuple[RequestHeader, int]:
    """Parse a request header of the given version: (header, offset of the body in `frame`).

    A client id that is not valid UTF-8 is decoded with replacement characters, as Java does,
    rather than refused: it is only ever logged.
    """
    api_key, api_version, correlation_id = peek_request_header(frame)
    client_id, pos = parse_header_tail(frame, header_version)
    return RequestHeader(api_key, api_version, correlation_id, client_id, header_version), pos


def parse_header_tail(frame: bytes | memoryview, header_version: int) -> tuple[str | None, int]:
    """(client_id, offset of the body): the part of the header after its first 8 bytes.

    The caller has checked that the frame holds those 8 bytes (`peek_request_header`).
    """
    if header_version == 0:
        return None, REQUEST_HEADER_V0_SIZE
    end = len(frame)
    try:
        (length,) = _I16.unpack_from(frame, REQUEST_HEADER_V0_SIZE)
        pos = REQUEST_HEADER_V0_SIZE + 2
        if length == -1:
            client_id = None
        elif length < 0:
            raise RequestHeaderError(f"client id has a negative length ({length})")
        else:
            if pos + length > end:
                raise RequestHeaderError(f"client id of {length} bytes runs past the end of the request")
            client_id = str(frame[pos:pos + length], "utf-8", "replace")
            pos += length
        if header_version >= 2:
            # No tagged fields are defined for the request header: skip whatever is there (an
            # empty section, one 0 byte, without a call: the usual case).
            pos = pos + 1 if frame[pos] == 0 else skip_tagged_fields(frame, pos, end)
    except (struct.error, IndexError, ValueError) as e:
        raise RequestHeaderError(f"malformed request header v{header_version}: {e}") from None
    return client_id, pos


def read_request_header(frame: bytes | memoryview) -> tuple[RequestHeader, int]:
    """Parse the header of a request to a supported api, at the version its api version implies.

    Raises UnknownApiKeyError for an api key not in the table (versions are not checked here).
    """
    api_key, api_version, _ = peek_request_header(frame)
    return parse_request_header(frame, apis.request_header_version(api_key, api_version))


def response_prefix(correlation_id: int, header_version: int, body_size: int) -> bytes:
    """The 4-byte frame size followed by the response header, for a body of `body_size` bytes."""
    if header_version == 0:
        return _SIZE_CORRELATION.pack(body_size + 4, correlation_id)
    return _SIZE_CORRELATION.pack(body_size + 5, correlation_id) + b"\x00"
