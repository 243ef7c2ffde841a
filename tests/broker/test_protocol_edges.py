"""Two protocol edge cases found from outside, over raw sockets: requests read before a bad frame
are still answered, and an old-format message set in a Produce v3+ is INVALID_RECORD."""

from __future__ import annotations

import struct
import zlib

import pytest

from clients import RawClient, create_topic

pytestmark = pytest.mark.timeout(60)

INVALID_RECORD = 87


def legacy_message_set(magic: int, value: bytes) -> bytes:
    """One magic-0/1 message, as a pre-0.11 producer wrote it (null key)."""
    body = struct.pack(">bb", magic, 0) + (struct.pack(">q", 1_700_000_000_000) if magic == 1 else b"")
    body += struct.pack(">i", -1) + struct.pack(">i", len(value)) + value
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", 0, len(message)) + message


def test_request_followed_by_a_negative_size_in_one_write_is_answered_then_closed(shared_broker, topic):
    create_topic(shared_broker.bootstrap, topic)
    with RawClient(shared_broker.bootstrap) as client:
        request = client.encode(18, 2, {}, correlation_id=7)  # ApiVersions v2
        client.sock.sendall(struct.pack(">i", len(request)) + request + struct.pack(">i", -1) + b"\x00" * 8)
        frame = client.receive_frame()
        assert struct.unpack_from(">i", frame)[0] == 7
        assert struct.unpack_from(">h", frame, 4)[0] == 0  # error_code NONE
        assert client.closed_by_peer()


def test_two_requests_then_a_negative_size_get_both_answers_in_order(shared_broker, topic):
    create_topic(shared_broker.bootstrap, topic)
    with RawClient(shared_broker.bootstrap) as client:
        first = client.encode(18, 2, {}, correlation_id=1)
        second = client.encode(18, 2, {}, correlation_id=2)
        client.sock.sendall(b"".join(struct.pack(">i", len(r)) + r for r in (first, second))
                            + struct.pack(">i", -123456))
        assert [struct.unpack_from(">i", client.receive_frame())[0] for _ in range(2)] == [1, 2]
        assert client.closed_by_peer()


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("version", [3, 7, 9])
def test_small_old_magic_message_set_in_produce_v3_plus_is_invalid_record(shared_broker, topic, magic, version):
    create_topic(shared_broker.bootstrap, topic)
    records = legacy_message_set(magic, b"v")
    assert len(records) < 61  # smaller than a v2 batch header
    with RawClient(shared_broker.bootstrap) as client:
        answer = client.produce(topic, 0, records, version=version)
        assert int(answer.error_code) == INVALID_RECORD
        assert client.list_offset(topic, 0, -1).offset == 0
