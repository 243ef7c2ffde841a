"""What goes in comes out: every codec, headers, null keys and values, explicit timestamps,
multi-partition topics, records near max.message.bytes and many small ones — produced by one
client, read back by each of confluent-kafka, kafka-python and aiokafka, field for field.

The broker writes producer batches as they came (architecture.md §1), so the stored batch must carry
the producer's codec, and a fetch from an offset inside a compressed batch must return the
whole batch for the client to skip the records before the offset (clients.md 7).
"""

from __future__ import annotations

import dataclasses
import random

import pytest

from logbroker.records.builder import build_batch

from clients import (
    CODECS,
    CONSUMERS,
    CREATE_TIME,
    LOG_APPEND_TIME,
    RawClient,
    Rec,
    Spec,
    by_position,
    consume_confluent,
    create_topic,
    expected_records,
    kafka_python_lacks,
    now_ms,
    produce_aiokafka,
    produce_confluent,
    produce_kafka_python,
    records_in,
    sample_specs,
    stored_batches,
)

pytestmark = pytest.mark.timeout(60)

PARTITIONS = 3
RECORDS_PER_CODEC = 150


def both_key_and_value_null_dropped(specs: list[Spec]) -> list[Spec]:
    """aiokafka and kafka-python refuse a record whose key and value are both null."""
    return [s for s in specs if s.key is not None or s.value is not None]


def skip_unreadable(client: str, codec: str) -> None:
    if client == "kafka-python" and (reason := kafka_python_lacks(codec)):
        pytest.skip(reason)


@pytest.fixture(scope="module")
def codec_topics(shared_broker) -> dict[str, tuple[str, list[Rec]]]:
    """One 3-partition topic per codec, filled once by confluent-kafka: codec -> (topic, records)."""
    out = {}
    for i, codec in enumerate(CODECS):
        topic = f"pc-{codec}-{random.randrange(1 << 32):08x}"
        create_topic(shared_broker.bootstrap, topic, partitions=PARTITIONS)
        specs = sample_specs(RECORDS_PER_CODEC, partitions=PARTITIONS, seed=i)
        delivered = produce_confluent(shared_broker.bootstrap, topic, specs, **{
            "compression.type": codec, "linger.ms": 100})
        out[codec] = (topic, expected_records(specs, [m.offset() for m in delivered]))
    return out


@pytest.mark.parametrize("codec", CODECS)
def test_batches_are_stored_as_the_producer_compressed_them(shared_broker, codec_topics, codec):
    # librdkafka compresses lz4 only if the broker advertises FindCoordinator (its
    # RD_KAFKA_FEATURE_LZ4 is keyed on that API): without consumer groups, lz4 goes out plain.
    topic, _ = codec_topics[codec]

    for partition in range(PARTITIONS):
        batches = stored_batches(shared_broker.data_dir, topic, partition)
        assert {b.compression_name for b in batches} == {codec}
        assert sum(b.records_count for b in batches) == RECORDS_PER_CODEC // PARTITIONS
        # linger.ms batched the records: the codec really covers several records per batch.
        assert max(b.records_count for b in batches) > 1


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("client", list(CONSUMERS))
def test_every_client_reads_back_every_field(shared_broker, codec_topics, client, codec):
    skip_unreadable(client, codec)
    topic, expected = codec_topics[codec]

    got = CONSUMERS[client](shared_broker.bootstrap, topic, dict.fromkeys(range(PARTITIONS), 0), len(expected))

    assert by_position(got) == expected
    # Offsets are dense from 0 in each partition, in the order produced.
    for partition in range(PARTITIONS):
        offsets = [r.offset for r in got if r.partition == partition]
        assert offsets == list(range(RECORDS_PER_CODEC // PARTITIONS))


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("client", list(CONSUMERS))
def test_fetch_from_inside_a_batch_starts_at_that_offset(shared_broker, codec_topics, client, codec):
    skip_unreadable(client, codec)
    topic, expected = codec_topics[codec]
    batch = next(b for b in stored_batches(shared_broker.data_dir, topic, 0) if b.records_count >= 3)
    start = batch.base_offset + batch.records_count // 2
    want = [r for r in expected if r.partition == 0 and r.offset >= start]

    got = CONSUMERS[client](shared_broker.bootstrap, topic, {0: start}, len(want))

    assert got[0].offset == start
    assert got == want


@pytest.mark.parametrize("codec", CODECS)
def test_aiokafka_produces_every_codec(shared_broker, topic, codec):
    create_topic(shared_broker.bootstrap, topic, partitions=2)
    specs = both_key_and_value_null_dropped(sample_specs(60, partitions=2, seed=10))
    metadata = produce_aiokafka(shared_broker.bootstrap, topic, specs,
                                compression_type=None if codec == "none" else codec)
    expected = expected_records(specs, [m.offset for m in metadata])

    for partition in range(2):
        assert {b.compression_name for b in stored_batches(shared_broker.data_dir, topic, partition)} == {codec}
    assert by_position(consume_confluent(shared_broker.bootstrap, topic, {0: 0, 1: 0}, len(specs))) == expected


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_kafka_python_produces_its_codecs(shared_broker, topic, codec):
    if reason := kafka_python_lacks(codec):
        pytest.skip(reason)
    # kafka-python's producer refuses null header values ("must be (str, bytes) tuples").
    specs = [dataclasses.replace(s, headers=tuple(h for h in s.headers if h[1] is not None))
             for s in both_key_and_value_null_dropped(sample_specs(40, seed=11))]
    metadata = produce_kafka_python(shared_broker.bootstrap, topic, specs,
                                    compression_type=None if codec == "none" else codec)
    expected = expected_records(specs, [m.offset for m in metadata])

    assert {b.compression_name for b in stored_batches(shared_broker.data_dir, topic, 0)} == {codec}
    assert consume_confluent(shared_broker.bootstrap, topic, {0: 0}, len(specs)) == expected


@pytest.fixture(scope="module")
def large_records(shared_broker) -> tuple[str, list[Rec]]:
    """Three records of ~1 MB each: each batch just under the broker's max.message.bytes (1048588)."""
    topic = f"pc-large-{random.randrange(1 << 32):08x}"
    rng = random.Random(3)
    base = now_ms()
    specs = [Spec(0, b"big-%d" % i, rng.randbytes(1_040_000), (("n", b"%d" % i),), base + i) for i in range(3)]
    delivered = produce_confluent(shared_broker.bootstrap, topic, specs, **{
        "message.max.bytes": 2_000_000, "batch.size": 1_045_000, "compression.type": "none",
        "message.timeout.ms": 8000})
    return topic, expected_records(specs, [m.offset() for m in delivered])


def test_produce_request_spanning_several_socket_reads_is_accepted(shared_broker, topic):
    # asyncio reads at most 256 KiB at a time: a 600 KB request always arrives in pieces.
    create_topic(shared_broker.bootstrap, topic)
    batch = build_batch([(b"k", random.Random(5).randbytes(600_000), (("h", None),), 1_700_000_000_000)])
    with RawClient(shared_broker.bootstrap) as client:
        answer = client.produce(topic, 0, batch, acks=1)
        assert (int(answer.error_code), answer.base_offset) == (0, 0)
        fetched = client.fetch(topic, 0, 0)
    [record] = records_in(fetched.records)
    assert (record.offset, record.key, record.value, record.headers) == (
        0, b"k", random.Random(5).randbytes(600_000), (("h", None),))


@pytest.mark.parametrize("client", list(CONSUMERS))
def test_records_near_max_message_bytes_round_trip(shared_broker, large_records, client):
    topic, expected = large_records
    batches = stored_batches(shared_broker.data_dir, topic, 0)
    assert [b.records_count for b in batches] == [1, 1, 1]
    assert all(1_040_000 < b.size_in_bytes <= 1_048_588 for b in batches)

    assert CONSUMERS[client](shared_broker.bootstrap, topic, {0: 0}, 3) == expected


@pytest.fixture(scope="module")
def many_small(shared_broker) -> tuple[str, list[Rec]]:
    topic = f"pc-small-{random.randrange(1 << 32):08x}"
    base = now_ms() - 60_000
    specs = [Spec(0, None, b"%06d" % i, (), base + i) for i in range(10_000)]
    delivered = produce_confluent(shared_broker.bootstrap, topic, specs, **{"linger.ms": 5})
    return topic, expected_records(specs, [m.offset() for m in delivered])


@pytest.mark.parametrize("client", list(CONSUMERS))
def test_many_small_records_keep_order_and_offsets(shared_broker, many_small, client):
    topic, expected = many_small
    assert [r.offset for r in expected] == list(range(10_000))

    got = CONSUMERS[client](shared_broker.bootstrap, topic, {0: 0}, 10_000)

    assert got == expected


def test_log_append_time_topic_stamps_records_with_the_broker_clock(shared_broker, topic):
    create_topic(shared_broker.bootstrap, topic, config={"message.timestamp.type": "LogAppendTime"})
    specs = sample_specs(30, seed=4, base_timestamp=1_000_000_000_000)
    before = now_ms()
    delivered = produce_confluent(shared_broker.bootstrap, topic, specs, **{"compression.type": "gzip"})
    after = now_ms()

    # The producer learns the append time from the Produce response.
    stamped = [m.timestamp() for m in delivered]
    assert all(kind == 2 and before <= ts <= after for kind, ts in stamped), stamped
    expected = expected_records(specs, [m.offset() for m in delivered], timestamps=[ts for _, ts in stamped],
                                timestamp_type=LOG_APPEND_TIME)
    for client, consume in CONSUMERS.items():
        assert consume(shared_broker.bootstrap, topic, {0: 0}, 30) == expected, client


def test_records_without_timestamp_get_the_producer_send_time(shared_broker, topic):
    specs = [Spec(0, b"k", b"v%d" % i) for i in range(5)]
    before = now_ms()
    produce_confluent(shared_broker.bootstrap, topic, specs)
    after = now_ms()

    got = consume_confluent(shared_broker.bootstrap, topic, {0: 0}, 5)

    assert [r.value for r in got] == [b"v%d" % i for i in range(5)]
    assert all(r.timestamp_type == CREATE_TIME and before <= r.timestamp <= after for r in got)
