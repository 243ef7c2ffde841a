"""Decoding enforces the schema's nullability: a null where the schema forbids one is
refused while parsing, as Kafka refuses it ("non-nullable field X was serialized as null"), so no
handler ever sees it. The frames are written out byte by byte, as a hostile client sends them."""

from __future__ import annotations

import struct

import pytest

from logbroker.protocol.apis import SUPPORTED_APIS, ApiKey
from logbroker.protocol.codec import decode_request
from logbroker.protocol.errors import MalformedRequestError

NULL_ARRAY = b"\xff\xff\xff\xff"
NULL_COMPACT = b"\x00"


def header(api_key: int, version: int, *, flexible: bool) -> bytes:
    client_id = b"fuzz"
    return (struct.pack(">hhih", api_key, version, 7, len(client_id)) + client_id
            + (b"\x00" if flexible else b""))


# The five requests that reached a handler as None in a fuzz run.
CAPTURED = {
    "produce v9, topic_data null": (
        header(ApiKey.PRODUCE, 9, flexible=True)
        + NULL_COMPACT + struct.pack(">hi", -1, 30000) + NULL_COMPACT + b"\x00",
        "ProduceRequest.topic_data"),
    "list_offsets v1, topics null": (
        header(ApiKey.LIST_OFFSETS, 1, flexible=False) + struct.pack(">i", -1) + NULL_ARRAY,
        "ListOffsetsRequest.topics"),
    "fetch v4, topics null": (
        header(ApiKey.FETCH, 4, flexible=False)
        + struct.pack(">iiiib", -1, 500, 1, 1 << 20, 0) + NULL_ARRAY,
        "FetchRequest.topics"),
    "describe_configs v1, resources null": (
        header(ApiKey.DESCRIBE_CONFIGS, 1, flexible=False) + NULL_ARRAY + b"\x00",
        "DescribeConfigsRequest.resources"),
    "create_acls v1, creations null": (
        header(ApiKey.CREATE_ACLS, 1, flexible=False) + NULL_ARRAY,
        "CreateAclsRequest.creations"),
    "create_topics v4, a topic name null": (
        header(ApiKey.CREATE_TOPICS, 4, flexible=False) + struct.pack(">i", 1) + b"\xff\xff"
        + struct.pack(">ihii", 1, 1, 0, 0) + struct.pack(">ib", 1000, 0),
        "CreatableTopic.name"),
    "sync_group v5, assignment bytes null": (
        header(ApiKey.SYNC_GROUP, 5, flexible=True)
        + b"\x02g" + struct.pack(">i", 1) + b"\x02m" + NULL_COMPACT + b"\x00\x00"
        + b"\x02" + b"\x02m" + NULL_COMPACT + b"\x00" + b"\x00",
        "SyncGroupRequestAssignment.assignment"),
}


@pytest.mark.parametrize("name", list(CAPTURED))
def test_null_in_a_non_nullable_field_is_refused_while_decoding(name):
    frame, field = CAPTURED[name]
    with pytest.raises(MalformedRequestError, match=f"non-nullable field {field} was serialized as null"):
        decode_request(memoryview(frame))


def test_null_where_the_schema_allows_it_still_decodes():
    # Metadata v1: topics null means every topic; Produce v9: transactional_id null.
    request = decode_request(memoryview(header(ApiKey.METADATA, 1, flexible=False) + NULL_ARRAY))
    assert request.body.topics is None


@pytest.mark.parametrize("length", [-2, -32768])
def test_a_string_length_below_minus_one_is_refused(length):
    frame = header(ApiKey.FIND_COORDINATOR, 0, flexible=False) + struct.pack(">h", length)
    with pytest.raises(MalformedRequestError, match="string length"):
        decode_request(memoryview(frame))


def test_a_long_form_compact_zero_is_null_too():
    # uvarint 0 written in two bytes (0x80 0x00) must not slip past the null check.
    frame = (header(ApiKey.PRODUCE, 9, flexible=True)
             + NULL_COMPACT + struct.pack(">hi", -1, 30000) + b"\x80\x00" + b"\x00")
    with pytest.raises(MalformedRequestError, match="non-nullable field ProduceRequest.topic_data"):
        decode_request(memoryview(frame))


def test_every_supported_api_is_guarded_from_the_schema():
    """Every (api, version) of the table gets a guard walker built from kio's classes — an API
    added to SUPPORTED_APIS later is covered without code of its own."""
    from logbroker.protocol import codec, guard
    for spec in SUPPORTED_APIS.values():
        for version in range(spec.min_version, spec.max_version + 1):
            guard.prepare_guard(codec.request_class(spec.api_key, version))
