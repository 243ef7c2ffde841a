"""The hand-written Fetch response encoder against kio's, byte for byte, at every version.

Our encoder leaves each partition's records as an opaque object in the chunk list; for the
comparison the test substitutes their bytes, which kio encodes inline.
"""

from __future__ import annotations

import struct
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.index import load_response_schema

from logbroker.protocol.responses import common
from logbroker.protocol.responses.common import NodeEndpoint
from logbroker.protocol.responses.fetch import (
    FetchPartitionData,
    FetchTopicData,
    chunks_size,
    encode_fetch_response,
)
from protocol_helpers import FakeRecords, error_codes, join_chunks, kio_build, kio_response_frame

VERSIONS = range(4, 19)
settings_ = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])

int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
names = st.text(max_size=12)
pairs32_64 = st.none() | st.just((-1, -1)) | st.tuples(int32, int64)
pairs64_32 = st.none() | st.just((-1, -1)) | st.tuples(int64, int32)
records = st.none() | st.binary(max_size=80).map(FakeRecords) | st.binary(min_size=1, max_size=20)

partitions = st.builds(
    FetchPartitionData,
    partition_index=int32, error_code=error_codes, high_watermark=int64,
    last_stable_offset=int64, log_start_offset=int64,
    aborted_transactions=st.none() | st.lists(st.tuples(int64, int64), max_size=2),
    preferred_read_replica=int32,
    records=records,
    diverging_epoch=pairs32_64,
    current_leader=st.none() | st.just((-1, -1)) | st.tuples(int32, int32),
    snapshot_id=pairs64_32,
)
topics = st.lists(st.builds(FetchTopicData, topic=names, partitions=st.lists(partitions, max_size=3),
                            topic_id=st.none() | st.uuids()), max_size=3)
endpoints = st.lists(st.builds(NodeEndpoint, node_id=int32, host=names, port=int32,
                               rack=st.none() | names), max_size=2)


def records_bytes(records) -> bytes:
    if records is None:
        return b""  # no records are sent as an empty set, never as null
    return records.data if isinstance(records, FakeRecords) else bytes(records)


def kio_fetch_response(version, topics, *, throttle_time_ms=0, error_code=0, session_id=0,
                       node_endpoints=()):
    def partition(p):
        values = {
            "partition_index": p.partition_index, "error_code": p.error_code,
            "high_watermark": p.high_watermark, "last_stable_offset": p.last_stable_offset,
            "log_start_offset": p.log_start_offset,
            "aborted_transactions": None if p.aborted_transactions is None else [
                {"producer_id": a, "first_offset": b} for a, b in p.aborted_transactions],
            "preferred_read_replica": p.preferred_read_replica,
            "records": records_bytes(p.records),
        }
        if p.diverging_epoch:
            values["diverging_epoch"] = {"epoch": p.diverging_epoch[0], "end_offset": p.diverging_epoch[1]}
        if p.current_leader:
            values["current_leader"] = {"leader_id": p.current_leader[0], "leader_epoch": p.current_leader[1]}
        if p.snapshot_id:
            values["snapshot_id"] = {"end_offset": p.snapshot_id[0], "epoch": p.snapshot_id[1]}
        return values

    values = {
        "throttle_time": throttle_time_ms, "error_code": error_code, "session_id": session_id,
        "responses": [{"topic": t.topic, "topic_id": t.topic_id,
                       "partitions": [partition(p) for p in t.partitions]} for t in topics],
        "node_endpoints": [e._asdict() for e in node_endpoints],
    }
    return kio_build(load_response_schema(1, version), values)


def check_chunks(chunks, topics):
    """Record objects are passed through as they are, the size prefix counts them."""
    objects = [p.records for t in topics for p in t.partitions
               if isinstance(p.records, FakeRecords) and p.records.size]
    assert [c for c in chunks if isinstance(c, FakeRecords)] == objects
    for obj in objects:
        assert any(c is obj for c in chunks)
    assert all(isinstance(c, (bytes, FakeRecords)) for c in chunks)
    (size,) = struct.unpack_from(">i", chunks[0])
    assert size + 4 == chunks_size(chunks)


@pytest.mark.parametrize("version", VERSIONS)
@settings_
@given(topics=topics, throttle_time_ms=int32, error_code=error_codes, session_id=int32,
       node_endpoints=endpoints, correlation_id=int32)
def test_fetch_response_matches_kio(version, topics, throttle_time_ms, error_code, session_id,
                                    node_endpoints, correlation_id):
    chunks = encode_fetch_response(version, correlation_id, topics, throttle_time_ms=throttle_time_ms,
                                   error_code=error_code, session_id=session_id,
                                   node_endpoints=node_endpoints)
    check_chunks(chunks, topics)
    expected = kio_response_frame(
        kio_fetch_response(version, topics, throttle_time_ms=throttle_time_ms, error_code=error_code,
                           session_id=session_id, node_endpoints=node_endpoints), correlation_id)
    assert join_chunks(chunks) == expected


@pytest.mark.parametrize("version", VERSIONS)
def test_typical_fetch_response_matches_kio(version):
    batch = FakeRecords(b"\x00" * 8 + b"R" * 200)
    topics = [
        FetchTopicData("events", [
            FetchPartitionData(0, 0, high_watermark=10, last_stable_offset=10, log_start_offset=0,
                               records=batch),
            FetchPartitionData(1, 0, high_watermark=0, last_stable_offset=0, log_start_offset=0),
            FetchPartitionData(2, 1, high_watermark=-1, aborted_transactions=[],
                               records=FakeRecords(b"")),
        ], topic_id=uuid.UUID(int=0x1234)),
        FetchTopicData("other", [FetchPartitionData(0, 0, 5, 5, 0, records=FakeRecords(b"S" * 50))],
                       topic_id=uuid.uuid4()),
    ]
    chunks = encode_fetch_response(version, 7, topics, session_id=0)
    check_chunks(chunks, topics)
    assert len(chunks) == 5  # bytes, records, bytes, records, bytes
    assert join_chunks(chunks) == kio_response_frame(kio_fetch_response(version, topics), 7)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_read_committed_consumers_fetch_matches_kio(version):
    # From v12 a partition with no aborted transaction and no tagged field is encoded in one
    # piece; the others (aborted transactions, a leader hint) the long way: side by side here.
    topics = [FetchTopicData("events", [
        FetchPartitionData(0, 0, 12, 12, 0, aborted_transactions=(), records=FakeRecords(b"R" * 300)),
        FetchPartitionData(1, 0, 9, 4, 0, aborted_transactions=[(7, 3), (8, 5)],
                           records=FakeRecords(b"T" * 40)),
        FetchPartitionData(2, 0, 3, 3, 0, aborted_transactions=()),
        FetchPartitionData(3, 6, -1, aborted_transactions=(), current_leader=(2, 9)),
        FetchPartitionData(4, 0, 1, 1, 1, aborted_transactions=(), preferred_read_replica=3),
    ], topic_id=uuid.UUID(int=0x99))]
    chunks = encode_fetch_response(version, 11, topics)
    check_chunks(chunks, topics)
    assert join_chunks(chunks) == kio_response_frame(kio_fetch_response(version, topics), 11)


def test_empty_fetch_response_is_one_chunk():
    chunks = encode_fetch_response(12, 3, [])
    assert len(chunks) == 1 and isinstance(chunks[0], bytes)
    assert join_chunks(chunks) == kio_response_frame(kio_fetch_response(12, []), 3)


@pytest.mark.parametrize("version", [3, 19])
def test_versions_outside_the_encoder_are_refused(version):
    with pytest.raises(ValueError):
        encode_fetch_response(version, 1, [])


def test_only_names_a_topic_can_have_are_kept_encoded():
    # Produce and Fetch answers encode each topic's name once and keep it (a bounded cache). A
    # client may name topics of any length; names longer than a topic's can be are encoded
    # each time, so that 1,024 of them are not kept.
    common._cached_topic_prefix.cache_clear()
    longest, too_long = "t" * 249, "t" * 250
    for _ in range(2):
        chunks = encode_fetch_response(12, 1, [FetchTopicData(longest, []), FetchTopicData(too_long, [])])
    assert join_chunks(chunks) == kio_response_frame(
        kio_fetch_response(12, [FetchTopicData(longest, []), FetchTopicData(too_long, [])]), 1)
    info = common._cached_topic_prefix.cache_info()
    assert (info.currsize, info.hits) == (1, 1)
