"""The hand-written Produce response encoder against kio's, byte for byte, at every version."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.index import load_response_schema

from logbroker.protocol.apis import SUPPORTED_APIS, ApiKey
from logbroker.protocol.responses.common import NodeEndpoint
from logbroker.protocol.responses.produce import (
    ProducePartitionResult,
    ProduceTopicResult,
    encode_produce_response,
)
from protocol_helpers import error_codes, kio_build, kio_response_frame

SPEC = SUPPORTED_APIS[ApiKey.PRODUCE]
VERSIONS = range(SPEC.min_version, 13)  # up to 12, which the encoder also handles
settings_ = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])

int16 = st.integers(-(2**15), 2**15 - 1)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
names = st.text(max_size=12)
timestamps = st.just(-1) | st.integers(0, 2**42)

partitions = st.builds(
    ProducePartitionResult,
    index=int32, error_code=error_codes, base_offset=int64, log_append_time_ms=timestamps,
    log_start_offset=int64,
    record_errors=st.lists(st.tuples(int32, st.none() | names), max_size=2),
    error_message=st.none() | names,
    current_leader=st.none() | st.just((-1, -1)) | st.tuples(int32, int32),
)
topics = st.lists(st.builds(ProduceTopicResult, name=names, partitions=st.lists(partitions, max_size=3)),
                  max_size=3)
endpoints = st.lists(st.builds(NodeEndpoint, node_id=int32, host=names, port=int32,
                               rack=st.none() | names), max_size=2)


def kio_produce_response(version, topics, throttle_time_ms, node_endpoints):
    values = {
        "responses": [{
            "name": name,
            "partition_responses": [{
                "index": p.index, "error_code": p.error_code, "base_offset": p.base_offset,
                "log_append_time": p.log_append_time_ms, "log_start_offset": p.log_start_offset,
                "record_errors": [{"batch_index": i, "batch_index_error_message": m}
                                  for i, m in p.record_errors],
                "error_message": p.error_message,
                **({"current_leader": {"leader_id": p.current_leader[0],
                                       "leader_epoch": p.current_leader[1]}}
                   if p.current_leader else {}),
            } for p in parts],
        } for name, parts in topics],
        "throttle_time": throttle_time_ms,
        "node_endpoints": [e._asdict() for e in node_endpoints],
    }
    return kio_build(load_response_schema(ApiKey.PRODUCE, version), values)


@pytest.mark.parametrize("version", VERSIONS)
@settings_
@given(topics=topics, throttle_time_ms=int32, node_endpoints=endpoints, correlation_id=int32)
def test_produce_response_matches_kio(version, topics, throttle_time_ms, node_endpoints, correlation_id):
    ours = encode_produce_response(version, correlation_id, topics, throttle_time_ms=throttle_time_ms,
                                   node_endpoints=node_endpoints)
    expected = kio_response_frame(
        kio_produce_response(version, topics, throttle_time_ms, node_endpoints), correlation_id)
    assert ours == expected


@pytest.mark.parametrize("version", VERSIONS)
def test_typical_produce_response_matches_kio(version):
    topics = [ProduceTopicResult("events", [ProducePartitionResult(0, 0, 1234, -1, 0),
                                            ProducePartitionResult(1, 6, -1, -1, -1,
                                                                   current_leader=(2, 7))])]
    endpoints = [NodeEndpoint(2, "broker-2", 9092)]
    ours = encode_produce_response(version, 99, topics, node_endpoints=endpoints)
    assert ours == kio_response_frame(kio_produce_response(version, topics, 0, endpoints), 99)


@pytest.mark.parametrize("version", [2, 13])
def test_versions_outside_the_encoder_are_refused(version):
    with pytest.raises(ValueError):
        encode_produce_response(version, 1, [])
