"""The hand-written Metadata and ListOffsets response encoders against kio's, byte for byte."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.index import load_response_schema

from logbroker.protocol.responses.list_offsets import (
    ListOffsetsPartitionResult,
    ListOffsetsTopicResult,
    encode_list_offsets_response,
)
from logbroker.protocol.responses.metadata import (
    MetadataBroker,
    MetadataPartition,
    MetadataTopic,
    encode_metadata_response,
)
from protocol_helpers import error_codes, kio_build, kio_response_frame

settings_ = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
names = st.text(max_size=12)
broker_ids = st.lists(int32, max_size=4)

brokers = st.lists(st.builds(MetadataBroker, node_id=int32, host=names, port=int32,
                             rack=st.none() | names), max_size=3)
metadata_partitions = st.builds(MetadataPartition, error_code=error_codes, partition_index=int32,
                                leader_id=int32, leader_epoch=int32, replica_nodes=broker_ids,
                                isr_nodes=broker_ids, offline_replicas=broker_ids)


def metadata_topics(version: int):
    return st.lists(st.builds(
        MetadataTopic, error_code=error_codes, name=(st.none() | names) if version >= 12 else names,
        partitions=st.lists(metadata_partitions, max_size=3), topic_id=st.none() | st.uuids(),
        is_internal=st.booleans(), topic_authorized_operations=int32), max_size=3)


def kio_metadata_response(version, *, brokers, topics, cluster_id=None, controller_id=-1,
                          throttle_time_ms=0, cluster_authorized_operations=-(2**31)):
    values = {
        "throttle_time": throttle_time_ms,
        "brokers": [b._asdict() for b in brokers],
        "cluster_id": cluster_id, "controller_id": controller_id,
        "topics": [{**t._asdict(), "partitions": [p._asdict() for p in t.partitions]} for t in topics],
        "cluster_authorized_operations": cluster_authorized_operations,
        "error_code": 0,  # v13+
    }
    return kio_build(load_response_schema(3, version), values)


@pytest.mark.parametrize("version", range(0, 14))
@settings_
@given(data=st.data(), brokers=brokers, cluster_id=st.none() | names, controller_id=int32,
       throttle_time_ms=int32, cluster_authorized_operations=int32, correlation_id=int32)
def test_metadata_response_matches_kio(version, data, brokers, cluster_id, controller_id,
                                       throttle_time_ms, cluster_authorized_operations, correlation_id):
    topics = data.draw(metadata_topics(version))
    kwargs = dict(brokers=brokers, topics=topics, cluster_id=cluster_id, controller_id=controller_id,
                  throttle_time_ms=throttle_time_ms,
                  cluster_authorized_operations=cluster_authorized_operations)
    ours = encode_metadata_response(version, correlation_id, **kwargs)
    assert ours == kio_response_frame(kio_metadata_response(version, **kwargs), correlation_id)


def ten_topic_metadata():
    brokers = [MetadataBroker(0, "localhost", 9092)]
    topics = [MetadataTopic(0, f"topic-{i}", [MetadataPartition(0, p, 0, 0, [0], [0], [])
                                              for p in range(3)], topic_id=uuid.UUID(int=i + 1))
              for i in range(10)]
    return brokers, topics


@pytest.mark.parametrize("version", range(0, 14))
def test_typical_metadata_response_matches_kio(version):
    brokers, topics = ten_topic_metadata()
    kwargs = dict(brokers=brokers, topics=topics, cluster_id="abc", controller_id=0)
    ours = encode_metadata_response(version, 11, **kwargs)
    assert ours == kio_response_frame(kio_metadata_response(version, **kwargs), 11)


list_offsets_topics = st.lists(st.builds(
    ListOffsetsTopicResult, name=names,
    partitions=st.lists(st.builds(ListOffsetsPartitionResult, partition_index=int32,
                                  error_code=error_codes, timestamp=int64, offset=int64,
                                  leader_epoch=int32), max_size=3)), max_size=3)


def kio_list_offsets_response(version, topics, throttle_time_ms):
    values = {"throttle_time": throttle_time_ms,
              "topics": [{"name": name, "partitions": [p._asdict() for p in parts]}
                         for name, parts in topics]}
    return kio_build(load_response_schema(2, version), values)


@pytest.mark.parametrize("version", range(1, 12))
@settings_
@given(topics=list_offsets_topics, throttle_time_ms=int32, correlation_id=int32)
def test_list_offsets_response_matches_kio(version, topics, throttle_time_ms, correlation_id):
    ours = encode_list_offsets_response(version, correlation_id, topics, throttle_time_ms=throttle_time_ms)
    expected = kio_response_frame(kio_list_offsets_response(version, topics, throttle_time_ms),
                                  correlation_id)
    assert ours == expected


@pytest.mark.parametrize("encode, version", [
    (lambda v: encode_metadata_response(v, 1, brokers=[], topics=[]), 14),
    (lambda v: encode_list_offsets_response(v, 1, []), 0),
    (lambda v: encode_list_offsets_response(v, 1, []), 12),
])
def test_versions_outside_the_encoders_are_refused(encode, version):
    with pytest.raises(ValueError):
        encode(version)
