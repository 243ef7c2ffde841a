"""Errors users see: from real clients where a client can provoke them, else over a raw socket.

A bad request gets its Kafka error code and changes nothing in the log; what cannot be parsed
closes only its own connection, with one log line, while the broker keeps serving everyone
else (architecture.md §8, clients.md 2, 9).
"""

from __future__ import annotations

import struct
import time
import uuid

import pytest
from confluent_kafka import KafkaError

from logbroker.protocol.apis import SUPPORTED_APIS, ApiKey
from logbroker.records.builder import build_batch
from logbroker.testing import BrokerProcess

from clients import (
    TIMEOUT_S,
    DeliveryError,
    RawClient,
    Spec,
    admin,
    create_topic,
    drop_admins,
    produce_confluent,
    records_in,
)

pytestmark = pytest.mark.timeout(60)

CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
MESSAGE_TOO_LARGE = 10
INVALID_REQUIRED_ACKS = 21
UNSUPPORTED_VERSION = 35
INVALID_RECORD = 87


def high_watermark(bootstrap: str, topic: str) -> int:
    with RawClient(bootstrap) as client:
        answer = client.list_offset(topic, 0, -1)
    assert int(answer.error_code) == 0
    return answer.offset


def lines_about(log_text: str, address: str) -> list[str]:
    return [line for line in log_text.splitlines() if address in line]


# ---- unknown topics -------------------------------------------------------------------------

def test_unknown_topic_without_auto_create(tmp_path):
    broker = BrokerProcess(tmp_path, overrides={"auto.create.topics.enable": "false"}).start()
    try:
        topic = f"missing-{uuid.uuid4().hex[:8]}"
        # Metadata (librdkafka's admin asks with allow_auto_topic_creation=false; the raw request
        # asks with true, which must not create it either).
        metadata = admin(broker.bootstrap).list_topics(topic, timeout=TIMEOUT_S)
        assert metadata.topics[topic].error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
        with RawClient(broker.bootstrap) as client:
            answer = client.request(3, 12, topics=[{"name": topic}], allow_auto_topic_creation=True,
                                    include_topic_authorized_operations=False)
            assert [(t.name, int(t.error_code)) for t in answer.topics] == [(topic, UNKNOWN_TOPIC_OR_PARTITION)]
            # Produce never creates topics.
            produced = client.produce(topic, 0, build_batch([(b"k", b"v")]))
            assert int(produced.error_code) == UNKNOWN_TOPIC_OR_PARTITION

        # A producer's record fails instead of waiting forever.
        with pytest.raises(DeliveryError) as info:
            produce_confluent(broker.bootstrap, topic, [Spec(0, b"k", b"v")], **{
                "topic.metadata.propagation.max.ms": 200, "message.timeout.ms": 5000})
        assert info.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART

        assert not (broker.data_dir / f"{topic}-0").exists()
        assert topic not in admin(broker.bootstrap).list_topics(timeout=TIMEOUT_S).topics
    finally:
        drop_admins()
        broker.kill()


def test_produce_to_a_partition_the_topic_lacks(shared_broker, topic):
    create_topic(shared_broker.bootstrap, topic, partitions=2)
    with RawClient(shared_broker.bootstrap) as client:
        answer = client.produce(topic, 2, build_batch([(b"k", b"v")]))
    assert int(answer.error_code) == UNKNOWN_TOPIC_OR_PARTITION


# ---- record validation ----------------------------------------------------------------------

def test_record_over_topic_max_message_bytes_is_message_too_large(shared_broker, topic):
    create_topic(shared_broker.bootstrap, topic, config={"max.message.bytes": "1000"})

    with pytest.raises(DeliveryError) as info:
        produce_confluent(shared_broker.bootstrap, topic, [Spec(0, b"k", b"x" * 5000)], **{
            "message.max.bytes": 1_000_000, "compression.type": "none", "message.send.max.retries": 0})

    assert info.value.args[0].code() == KafkaError.MSG_SIZE_TOO_LARGE
    assert high_watermark(shared_broker.bootstrap, topic) == 0
    # A batch under the limit still goes in, at offset 0: nothing was appended before.
    [delivered] = produce_confluent(shared_broker.bootstrap, topic, [Spec(0, b"k", b"x" * 500)])
    assert delivered.offset() == 0


def test_record_over_the_broker_default_max_message_bytes_is_message_too_large(shared_broker, topic):
    # No topic override: message.max.bytes (1048588) applies. The request itself is well under
    # socket.request.max.bytes, so the answer is an error code, not a closed connection.
    with pytest.raises(DeliveryError) as info:
        produce_confluent(shared_broker.bootstrap, topic, [Spec(0, b"k", b"x" * 1_100_000)], **{
            "message.max.bytes": 2_000_000, "batch.size": 2_000_000, "compression.type": "none",
            "message.send.max.retries": 0})

    assert info.value.args[0].code() == KafkaError.MSG_SIZE_TOO_LARGE
    assert high_watermark(shared_broker.bootstrap, topic) == 0


def test_raw_batch_over_max_message_bytes_is_message_too_large(shared_broker, topic):
    create_topic(shared_broker.bootstrap, topic, config={"max.message.bytes": "1000"})
    with RawClient(shared_broker.bootstrap) as client:
        answer = client.produce(topic, 0, build_batch([(b"k", b"x" * 2000)]))
    assert int(answer.error_code) == MESSAGE_TOO_LARGE
    assert high_watermark(shared_broker.bootstrap, topic) == 0


@pytest.mark.parametrize("where", ["records", "crc", "attributes"])
def test_flipped_byte_is_corrupt_message_and_appends_nothing(shared_broker, topic, where):
    create_topic(shared_broker.bootstrap, topic)
    good = build_batch([(b"k%d" % i, b"value-%d" % i) for i in range(5)], compression="gzip")
    position = {"records": len(good) - 3, "crc": 18, "attributes": 22}[where]
    bad = bytearray(good)
    bad[position] ^= 0x01

    with RawClient(shared_broker.bootstrap) as client:
        answer = client.produce(topic, 0, bytes(bad))
        assert int(answer.error_code) == CORRUPT_MESSAGE
        assert client.list_offset(topic, 0, -1).offset == 0
        # The connection is still usable, and the intact batch lands at offset 0.
        retry = client.produce(topic, 0, good)
        assert (int(retry.error_code), retry.base_offset) == (0, 0)
        assert [r.value for r in records_in(client.fetch(topic, 0, 0).records)] == [
            b"value-%d" % i for i in range(5)]


# The batches embed the current time: each test's id is its name alone, so every collection (each
# pytest-xdist worker's too) names the same tests.
INVALID_BATCHES = {
    "two batches in one partition": build_batch([(b"a", b"1")]) + build_batch([(b"b", b"2")]),
    "control batch from a client": build_batch([(b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00")],
                                               control=True, producer_id=1, producer_epoch=0),
    "producer id without a sequence": build_batch([(b"k", b"v")], producer_id=5, producer_epoch=0),
}


@pytest.mark.parametrize(("name", "batch"), [pytest.param(name, batch, id=name)
                                             for name, batch in INVALID_BATCHES.items()])
def test_invalid_batches_are_invalid_record(shared_broker, topic, name, batch):
    create_topic(shared_broker.bootstrap, topic)
    with RawClient(shared_broker.bootstrap) as client:
        answer = client.produce(topic, 0, batch)
    assert int(answer.error_code) == INVALID_RECORD, name
    assert high_watermark(shared_broker.bootstrap, topic) == 0


def test_null_key_on_a_compacted_topic_is_invalid_record(shared_broker, topic):
    create_topic(shared_broker.bootstrap, topic, config={"cleanup.policy": "compact"})

    with pytest.raises(DeliveryError) as info:
        produce_confluent(shared_broker.bootstrap, topic, [Spec(0, None, b"no key")],
                          **{"message.send.max.retries": 0})

    assert info.value.args[0].code() == KafkaError.INVALID_RECORD
    assert high_watermark(shared_broker.bootstrap, topic) == 0
    [keyed] = produce_confluent(shared_broker.bootstrap, topic, [Spec(0, b"key", b"kept")])
    assert keyed.offset() == 0


# ---- acks -----------------------------------------------------------------------------------

@pytest.mark.parametrize("acks", [2, -2, 5])
def test_acks_outside_minus_one_zero_one_is_invalid_required_acks(shared_broker, topic, acks):
    create_topic(shared_broker.bootstrap, topic)
    with RawClient(shared_broker.bootstrap) as client:
        answer = client.produce(topic, 0, build_batch([(b"k", b"v")]), acks=acks)
    assert int(answer.error_code) == INVALID_REQUIRED_ACKS
    assert high_watermark(shared_broker.bootstrap, topic) == 0


def test_acks_zero_gets_no_response_and_the_connection_carries_on(shared_broker, topic):
    create_topic(shared_broker.bootstrap, topic)
    with RawClient(shared_broker.bootstrap) as client, RawClient(shared_broker.bootstrap) as observer:
        client.produce(topic, 0, build_batch([(b"k", b"fire-and-forget")]), acks=0)
        deadline = time.monotonic() + TIMEOUT_S
        while observer.list_offset(topic, 0, -1).offset == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert [r.value for r in records_in(observer.fetch(topic, 0, 0).records)] == [b"fire-and-forget"]
        # The first answer on the producing connection is the next request's: no Produce response.
        sent = client.send(18, 3, client_software_name="tool", client_software_version="1.0")
        correlation_id, answer = client.receive(18, 3)
        assert (correlation_id, int(answer.error_code)) == (sent, 0)


@pytest.mark.parametrize("acks", [0, 1, -1])
def test_requests_on_one_connection_take_effect_in_order(shared_broker, topic, acks):
    # Kafka handles a connection's requests one at a time, in order: a ListOffsets pipelined
    # behind a Produce must see that Produce's record. Both go out in one write, so the broker
    # reads them together.
    create_topic(shared_broker.bootstrap, topic)
    with RawClient(shared_broker.bootstrap) as client:
        produce = client.encode(0, 9, {"transactional_id": None, "acks": acks, "timeout": 5000, "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": build_batch([(b"k", b"v")])}]}]}, 1)
        list_offsets = client.encode(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}]}, 2)
        client.sock.sendall(b"".join(struct.pack(">i", len(f)) + f for f in (produce, list_offsets)))

        if acks != 0:
            correlation_id, produced = client.receive(0, 9)
            assert correlation_id == 1
            assert int(produced.responses[0].partition_responses[0].error_code) == 0
        correlation_id, listed = client.receive(2, 7)
        assert correlation_id == 2
        assert listed.topics[0].partitions[0].offset == 1


def test_acks_zero_with_an_error_closes_the_connection(shared_broker, topic):
    create_topic(shared_broker.bootstrap, topic)
    bad = bytearray(build_batch([(b"k", b"v")]))
    bad[-1] ^= 0xFF
    with RawClient(shared_broker.bootstrap) as client:
        client.produce(topic, 0, bytes(bad), acks=0)
        assert client.closed_by_peer()
    assert high_watermark(shared_broker.bootstrap, topic) == 0


# ---- what cannot be parsed ------------------------------------------------------------------

# UpdateFeatures: one of Kafka's APIs that this broker does not implement.
UNIMPLEMENTED_API = 57
assert UNIMPLEMENTED_API not in SUPPORTED_APIS

GARBAGE = {
    "garbage frame": struct.pack(">i", 16) + bytes(range(200, 216)),
    "huge size prefix": struct.pack(">i", 0x7FFF_FFFF) + b"\x00" * 16,
    "negative size prefix": struct.pack(">i", -5) + b"\x00" * 16,
    "unknown api key": struct.pack(">i", 12) + struct.pack(">hhih", 9999, 0, 1, 0) + b"\x00\x00",
    "api kafka has and we do not": struct.pack(">i", 12) + struct.pack(">hhih", UNIMPLEMENTED_API, 0, 1, 0) + b"\x00\x00",
    "produce below its minimum version": struct.pack(">i", 10) + struct.pack(">hhih", 0, 2, 1, 0),
    "truncated produce body": (lambda frame: struct.pack(">i", len(frame)) + frame)(
        struct.pack(">hhih", 0, 8, 1, -1) + b"\xff\xff\x00\x01\x00\x00\x13\x88\x00\x00\x00\x01\x00"),
}


@pytest.mark.parametrize("name", list(GARBAGE))
def test_bad_frame_closes_only_its_connection(shared_broker, topic, name):
    create_topic(shared_broker.bootstrap, topic)
    with RawClient(shared_broker.bootstrap) as bystander, RawClient(shared_broker.bootstrap) as culprit:
        assert bystander.list_offset(topic, 0, -1).offset == 0  # connected and answered
        address = culprit.local_address

        culprit.sock.sendall(GARBAGE[name])

        assert culprit.closed_by_peer()
        # Everyone else is still served, on old and new connections alike.
        assert int(bystander.produce(topic, 0, build_batch([(b"k", b"after")])).error_code) == 0
        with RawClient(shared_broker.bootstrap) as newcomer:
            assert newcomer.list_offset(topic, 0, -1).offset == 1
    assert len(lines_about(shared_broker.new_log_text(), address)) == 1, shared_broker.new_log_text()[-2000:]


def test_api_versions_above_our_maximum_is_unsupported_version_with_a_v0_body(shared_broker):
    # ApiVersions one above our maximum (flexible, so request header v2): client software
    # name and version, as v3/v4 send them.
    above = SUPPORTED_APIS[ApiKey.API_VERSIONS].max_version + 1
    body = b"\x05tool\x041.0\x00"
    frame = struct.pack(">hhih", 18, above, 42, 4) + b"test" + b"\x00" + body
    with RawClient(shared_broker.bootstrap) as client:
        client.send_frame(frame)
        data = client.receive_frame()
        correlation_id, error_code, count = struct.unpack_from(">ihi", data)
        entries = {key: (lo, hi) for key, lo, hi in
                   (struct.unpack_from(">hhh", data, 10 + 6 * i) for i in range(count))}
        assert (correlation_id, error_code) == (42, UNSUPPORTED_VERSION)
        assert len(data) == 10 + 6 * count  # header v0, a v0 body and nothing else
        assert entries[18][0] == 0 and entries[18][1] >= 3
        # The connection stays open: the client asks again at a version we speak.
        answer = client.request(18, 3, client_software_name="tool", client_software_version="1.0")
        assert int(answer.error_code) == 0
        assert {k.api_key for k in answer.api_keys} >= {0, 1, 2, 3, 18}


@pytest.mark.parametrize("version", range(0, SUPPORTED_APIS[ApiKey.API_VERSIONS].max_version + 1))
def test_every_api_versions_version_is_answered(shared_broker, version):
    with RawClient(shared_broker.bootstrap) as client:
        answer = client.request(18, version, client_software_name="tool", client_software_version="1.0")
    assert int(answer.error_code) == 0
    assert {(k.api_key, k.min_version) for k in answer.api_keys} >= {(0, 3), (18, 0)}


def test_broker_survives_a_client_that_disconnects_mid_request(shared_broker, topic):
    create_topic(shared_broker.bootstrap, topic)
    batch = build_batch([(b"k", b"x" * 10_000)])
    with RawClient(shared_broker.bootstrap) as client:
        frame = client.encode(0, 9, {"transactional_id": None, "acks": -1, "timeout": 5000, "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}, 1)
        client.sock.sendall(struct.pack(">i", len(frame)) + frame[:len(frame) // 2])
    # Half a request never becomes a record, and the broker keeps serving.
    with RawClient(shared_broker.bootstrap) as client:
        assert client.list_offset(topic, 0, -1).offset == 0
        assert int(client.produce(topic, 0, batch).error_code) == 0
        assert client.list_offset(topic, 0, -1).offset == 1
