"""The hand-written DescribeLogDirs response: byte for byte kio's without remote logs, its own
decoder reads back the remote log tagged field, and kafka-python (a real client) reads the
same answer with the tagged field skipped."""

from __future__ import annotations

import io

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.index import load_response_schema

from logbroker.protocol.apis import ApiKey
from logbroker.protocol.responses.describe_log_dirs import (
    LogDirPartition,
    LogDirResult,
    LogDirTopic,
    RemoteLogInfo,
    decode_describe_log_dirs_response,
    encode_describe_log_dirs_response,
)
from protocol_helpers import error_codes, kio_build, kio_response_frame

VERSIONS = range(1, 5)
settings_ = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
names = st.text(max_size=12)
remote_logs = st.builds(RemoteLogInfo, size_bytes=int64, segment_count=int32, start_offset=int64,
                        end_offset=int64)


def results(remote) -> st.SearchStrategy:
    partitions = st.builds(LogDirPartition, partition_index=int32, partition_size=int64,
                           offset_lag=int64, is_future_key=st.booleans(), remote=remote)
    topics = st.builds(LogDirTopic, name=names, partitions=st.lists(partitions, max_size=3))
    return st.lists(st.builds(LogDirResult, error_code=error_codes, log_dir=names,
                              topics=st.lists(topics, max_size=2), total_bytes=int64,
                              usable_bytes=int64), max_size=2)


def kio_response(version, throttle_time_ms, error_code, dirs):
    return kio_build(load_response_schema(ApiKey.DESCRIBE_LOG_DIRS, version), {
        "throttle_time": throttle_time_ms, "error_code": error_code,
        "results": [{"error_code": d.error_code, "log_dir": d.log_dir, "total_bytes": d.total_bytes,
                     "usable_bytes": d.usable_bytes,
                     "topics": [{"name": t.name, "partitions": [p._asdict() for p in t.partitions]}
                                for t in d.topics]} for d in dirs]})


@pytest.mark.parametrize("version", VERSIONS)
@settings_
@given(dirs=results(st.none()), throttle_time_ms=st.integers(0, 2**31 - 1), error_code=error_codes,
       correlation_id=int32)
def test_without_remote_logs_it_is_kios_answer_byte_for_byte(version, dirs, throttle_time_ms, error_code,
                                                             correlation_id):
    [ours] = encode_describe_log_dirs_response(version, correlation_id, throttle_time_ms=throttle_time_ms,
                                               error_code=error_code, results=dirs)
    expected = kio_response_frame(kio_response(version, throttle_time_ms, error_code, dirs), correlation_id)
    assert ours == expected


@pytest.mark.parametrize("version", VERSIONS)
@settings_
@given(dirs=results(st.none() | remote_logs), error_code=error_codes)
def test_the_decoder_reads_back_every_field_and_the_remote_log_from_v2(version, dirs, error_code):
    [frame] = encode_describe_log_dirs_response(version, 7, throttle_time_ms=0, error_code=error_code,
                                                results=dirs)
    code, decoded = decode_describe_log_dirs_response(version, frame[4:])
    assert code == (error_code if version >= 3 else 0)
    for ours, back in zip(dirs, decoded, strict=True):
        assert (back.error_code, back.log_dir) == (ours.error_code, ours.log_dir)
        assert (back.total_bytes, back.usable_bytes) == ((ours.total_bytes, ours.usable_bytes)
                                                         if version >= 4 else (-1, -1))
        assert [t.name for t in back.topics] == [t.name for t in ours.topics]
        for t_ours, t_back in zip(ours.topics, back.topics, strict=True):
            expected = [p if version >= 2 else p._replace(remote=None) for p in t_ours.partitions]
            assert list(t_back.partitions) == expected


@pytest.mark.parametrize("version", VERSIONS)
def test_kafka_python_reads_an_answer_with_remote_logs_and_skips_the_tag(version):
    from kafka.protocol.admin.cluster import DescribeLogDirsResponse
    tiered = LogDirPartition(0, 8192, 0, False, RemoteLogInfo(81920, 10, 0, 1599))
    plain = LogDirPartition(1, 512, 3, False)
    dirs = [LogDirResult(0, "/data", [LogDirTopic("events", [tiered, plain])], 10**9, 10**8)]
    [frame] = encode_describe_log_dirs_response(version, 9, throttle_time_ms=0, error_code=0, results=dirs)
    [untagged] = encode_describe_log_dirs_response(
        version, 9, throttle_time_ms=0, error_code=0,
        results=[dirs[0]._replace(topics=[LogDirTopic("events", [tiered._replace(remote=None), plain])])])
    assert (frame != untagged) == (version >= 2)  # v1 is not flexible: no room for the tag
    body = frame[4 + 4 + (1 if version >= 2 else 0):]  # size, correlation id, header tagged fields
    answer = DescribeLogDirsResponse.decode(io.BytesIO(body), version=version)
    [result] = answer.results
    assert result.log_dir == "/data"
    [(name, partitions)] = [(t.name, t.partitions) for t in result.topics]
    assert name == "events"
    assert [(p.partition_index, p.partition_size, p.offset_lag, p.is_future_key) for p in partitions] == \
        [(0, 8192, 0, False), (1, 512, 3, False)]


def test_a_frame_cut_short_is_a_value_error():
    dirs = [LogDirResult(0, "/data", [LogDirTopic("t", [LogDirPartition(0, 1, 0, False, RemoteLogInfo(5, 1, 0, 0))])])]
    [frame] = encode_describe_log_dirs_response(4, 1, throttle_time_ms=0, error_code=0, results=dirs)
    with pytest.raises(ValueError, match="ends early"):
        decode_describe_log_dirs_response(4, frame[4:-30])
