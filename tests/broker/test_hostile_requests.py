"""malformed requests never reach a handler, and nothing a client sends can fill
the broker's log with stack traces."""

from __future__ import annotations

import re
import struct

from logbroker.protocol.apis import ApiKey
from logbroker.records.builder import build_batch

from clients import RawClient, create_topic

UNKNOWN_SERVER_ERROR = -1


def error_lines(log_text: str) -> list[str]:
    return [line for line in log_text.splitlines() if re.search(r"\] ERROR |Traceback", line)]


def test_null_topic_data_closes_the_connection_with_one_warning(broker_process):
    with RawClient(broker_process.bootstrap) as raw:
        client_id = b"hostile"
        frame = (struct.pack(">hhih", ApiKey.PRODUCE, 9, 1, len(client_id)) + client_id + b"\x00"
                 + b"\x00" + struct.pack(">hi", -1, 30000) + b"\x00" + b"\x00")
        raw.send_frame(frame)
        assert raw.closed_by_peer()
    with RawClient(broker_process.bootstrap) as raw:  # and the broker still answers
        assert raw.request(ApiKey.API_VERSIONS, 0).error_code == 0
    log_text = broker_process.new_log_text()
    warnings = [line for line in log_text.splitlines()
                if "non-nullable field ProduceRequest.topic_data was serialized as null" in line]
    assert len(warnings) == 1 and "WARN" in warnings[0]
    assert error_lines(log_text) == []


def test_negative_partition_max_bytes_is_an_error_code_not_a_traceback(broker_process):
    create_topic(broker_process.bootstrap, "t")
    with RawClient(broker_process.bootstrap) as raw:
        assert raw.produce("t", 0, bytes(build_batch([(b"k", b"v")]))).error_code == 0
        for version in (4, 12, 16):
            for _ in range(50):
                data = raw.fetch("t", 0, 0, partition_max_bytes=-65536, version=version)
                assert data.error_code == UNKNOWN_SERVER_ERROR
        assert raw.fetch("t", 0, 0, max_bytes=-1).error_code == UNKNOWN_SERVER_ERROR
        assert raw.fetch("t", 0, 0).error_code == 0  # the partition itself is fine
    assert error_lines(broker_process.new_log_text()) == []


def test_a_flood_of_malformed_requests_is_rate_limited_in_the_log(broker_process):
    for _ in range(200):
        with RawClient(broker_process.bootstrap) as raw:
            raw.send_frame(struct.pack(">hhih", ApiKey.LIST_OFFSETS, 1, 1, -1) + struct.pack(">i", -1)
                           + b"\xff\xff\xff\xff")
            assert raw.closed_by_peer()
    lines = [line for line in broker_process.new_log_text().splitlines() if "non-nullable field" in line]
    assert 1 <= len(lines) <= 20
