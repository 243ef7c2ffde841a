from __future__ import annotations

import struct

import pytest
from kio.schema.request_header.v1.header import RequestHeader as KioHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as KioHeaderV2

from logbroker.protocol.errors import RequestHeaderError, UnknownApiKeyError
from logbroker.protocol.headers import (
    parse_request_header,
    read_request_header,
    response_prefix,
)
from protocol_helpers import kio_body_bytes


def test_header_v0_is_key_version_correlation_id():
    frame = struct.pack(">hhi", 3, 1, 42) + b"body"
    header, pos = parse_request_header(frame, 0)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (3, 1, 42, None)
    assert pos == 8


def test_header_v1_reads_client_id():
    frame = kio_body_bytes(KioHeaderV1(request_api_key=3, request_api_version=4, correlation_id=7,
                                       client_id="rdkafka")) + b"BODY"
    header, pos = parse_request_header(frame, 1)
    assert header == (3, 4, 7, "rdkafka", 1)
    assert frame[pos:] == b"BODY"


@pytest.mark.parametrize("version", [1, 2])
def test_null_client_id(version):
    frame = struct.pack(">hhih", 18, 3, 1, -1) + (b"\x00" if version == 2 else b"") + b"BODY"
    header, pos = parse_request_header(frame, version)
    assert header.client_id is None
    assert frame[pos:] == b"BODY"


def test_header_v2_client_id_is_a_non_compact_string_then_tagged_fields():
    frame = kio_body_bytes(KioHeaderV2(request_api_key=18, request_api_version=3, correlation_id=9,
                                       client_id="kafka-python")) + b"BODY"
    assert frame[8:10] == b"\x00\x0c"  # int16 length, not a varint
    header, pos = parse_request_header(frame, 2)
    assert header == (18, 3, 9, "kafka-python", 2)
    assert frame[pos:] == b"BODY"


def test_header_v2_skips_unknown_tagged_fields():
    tags = b"\x02" + b"\x05\x03abc" + b"\x09\x00"
    frame = struct.pack(">hhih", 3, 12, 5, 2) + b"id" + tags + b"BODY"
    header, pos = parse_request_header(frame, 2)
    assert header.client_id == "id"
    assert frame[pos:] == b"BODY"


def test_empty_client_id_is_not_null():
    frame = struct.pack(">hhih", 3, 1, 5, 0)
    assert parse_request_header(frame, 1)[0].client_id == ""


def test_invalid_utf8_client_id_is_replaced_not_refused():
    frame = struct.pack(">hhih", 3, 1, 5, 2) + b"\xff\xfe"
    assert parse_request_header(frame, 1)[0].client_id == "\ufffd\ufffd"


@pytest.mark.parametrize("frame, version", [
    (b"\x00\x03\x00", 1),  # shorter than the fixed part
    (struct.pack(">hhi", 3, 1, 5), 1),  # no client id length
    (struct.pack(">hhih", 3, 1, 5, 10) + b"short", 1),  # client id past the end
    (struct.pack(">hhih", 3, 1, 5, -2), 1),  # negative length other than -1
    (struct.pack(">hhih", 3, 12, 5, -1), 2),  # no tagged-field count
    (struct.pack(">hhih", 3, 12, 5, -1) + b"\x01\x00\x10ab", 2),  # tag longer than the frame
    (struct.pack(">hhih", 3, 12, 5, -1) + b"\xff\xff\xff\xff\xff\x01", 2),  # varint too long
])
def test_malformed_headers_raise_request_header_error(frame, version):
    with pytest.raises(RequestHeaderError):
        parse_request_header(frame, version)


def test_read_request_header_picks_the_version_from_the_api():
    flexible = struct.pack(">hhih", 3, 9, 1, 1) + b"c" + b"\x00" + b"B"
    legacy = struct.pack(">hhih", 3, 8, 1, 1) + b"c" + b"B"
    assert read_request_header(flexible)[0].header_version == 2
    assert read_request_header(flexible)[1] == len(flexible) - 1
    assert read_request_header(legacy)[0].header_version == 1
    assert read_request_header(legacy)[1] == len(legacy) - 1


def test_read_request_header_of_an_unknown_api():
    with pytest.raises(UnknownApiKeyError):
        read_request_header(struct.pack(">hhih", 999, 0, 1, -1))


def test_response_prefix_v0_and_v1():
    assert response_prefix(7, 0, 10) == struct.pack(">ii", 14, 7)
    assert response_prefix(7, 1, 10) == struct.pack(">ii", 15, 7) + b"\x00"
