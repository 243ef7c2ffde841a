"""Fetch semantics clients depend on (clients.md 7, 8): the long poll honours max_wait_ms and
min_bytes and ends early when a producer appends; a fetch returns the whole batch that holds the
fetch offset, and at least one whole batch however small max_bytes is (KIP-74);
OFFSET_OUT_OF_RANGE only outside [log start, log end].

Durations are checked from below only (it did wait), never as speed limits, except for a
generous ceiling showing that an append ended the wait long before max_wait_ms.
"""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import TopicPartition as CkTopicPartition

from logbroker.protocol.apis import SUPPORTED_APIS, ApiKey
from logbroker.records.builder import build_batch

from clients import (
    TIMEOUT_S,
    RawClient,
    admin,
    confluent_consumer,
    confluent_rec,
    create_topic,
    records_in,
)

pytestmark = pytest.mark.timeout(60)

def versions(api_key: int) -> range:
    spec = SUPPORTED_APIS[api_key]
    return range(spec.min_version, spec.max_version + 1)


OFFSET_OUT_OF_RANGE = 1
UNKNOWN_TOPIC_OR_PARTITION = 3


def fill(bootstrap: str, topic: str, batches: int = 3, per_batch: int = 5, value_size: int = 10,
         compression: str = "lz4") -> None:
    """`batches` batches of `per_batch` records: offset o holds value b"v<o>" padded."""
    with RawClient(bootstrap) as client:
        for k in range(batches):
            offsets = range(k * per_batch, (k + 1) * per_batch)
            batch = build_batch([(b"k", (b"v%d-" % o).ljust(value_size, b"x")) for o in offsets],
                                compression=compression)
            answer = client.produce(topic, 0, batch)
            assert (int(answer.error_code), answer.base_offset) == (0, k * per_batch)


def test_fetch_with_nothing_to_return_waits_max_wait(shared_broker, topic):
    create_topic(shared_broker.bootstrap, topic)
    fill(shared_broker.bootstrap, topic, batches=1)
    with RawClient(shared_broker.bootstrap) as client:
        started = time.monotonic()
        answer = client.fetch(topic, 0, 5, max_wait_ms=1000, min_bytes=1)
        waited = time.monotonic() - started

    assert (int(answer.error_code), answer.high_watermark, bool(answer.records)) == (0, 5, False)
    assert waited >= 0.8


def test_fetch_below_min_bytes_waits_then_returns_what_there_is(shared_broker, topic):
    create_topic(shared_broker.bootstrap, topic)
    fill(shared_broker.bootstrap, topic, batches=1)
    with RawClient(shared_broker.bootstrap) as client:
        started = time.monotonic()
        answer = client.fetch(topic, 0, 0, max_wait_ms=800, min_bytes=1_000_000)
        waited = time.monotonic() - started

    assert waited >= 0.64
    assert [r.offset for r in records_in(answer.records)] == [0, 1, 2, 3, 4]


def test_zero_max_wait_answers_at_once_even_when_empty(shared_broker, topic):
    create_topic(shared_broker.bootstrap, topic)
    with RawClient(shared_broker.bootstrap) as client:
        answer = client.fetch(topic, 0, 0, max_wait_ms=0)
    assert (int(answer.error_code), answer.high_watermark, bool(answer.records)) == (0, 0, False)


def test_long_poll_returns_when_a_producer_appends(shared_broker, topic):
    create_topic(shared_broker.bootstrap, topic)
    answers = {}

    def poll() -> None:
        with RawClient(shared_broker.bootstrap) as client:
            started = time.monotonic()
            answers["fetch"] = client.fetch(topic, 0, 0, max_wait_ms=20_000, min_bytes=1)
            answers["waited"] = time.monotonic() - started

    poller = threading.Thread(target=poll)
    poller.start()
    time.sleep(0.3)  # let the fetch park in the purgatory
    with RawClient(shared_broker.bootstrap) as client:
        assert int(client.produce(topic, 0, build_batch([(b"k", b"wake up")])).error_code) == 0
    poller.join(TIMEOUT_S)

    assert not poller.is_alive()
    assert [r.value for r in records_in(answers["fetch"].records)] == [b"wake up"]
    assert answers["waited"] < 10  # half of max_wait: the append ended the wait


def test_long_poll_with_min_bytes_completes_once_enough_arrives(shared_broker, topic):
    create_topic(shared_broker.bootstrap, topic)
    answers = {}

    def poll() -> None:
        with RawClient(shared_broker.bootstrap) as client:
            started = time.monotonic()
            answers["fetch"] = client.fetch(topic, 0, 0, max_wait_ms=20_000, min_bytes=3000)
            answers["waited"] = time.monotonic() - started

    poller = threading.Thread(target=poll)
    poller.start()
    time.sleep(0.2)
    with RawClient(shared_broker.bootstrap) as client:
        for i in range(3):  # ~1100 bytes each: the third crosses min_bytes
            assert int(client.produce(topic, 0, build_batch([(b"k", b"%d" % i * 1000)])).error_code) == 0
            time.sleep(0.1)
    poller.join(TIMEOUT_S)

    assert not poller.is_alive()
    assert [r.offset for r in records_in(answers["fetch"].records)] == [0, 1, 2]
    assert answers["waited"] < 10


def test_fetch_inside_a_compressed_batch_returns_the_whole_batch(shared_broker, topic):
    create_topic(shared_broker.bootstrap, topic)
    fill(shared_broker.bootstrap, topic, batches=3, compression="zstd")
    with RawClient(shared_broker.bootstrap) as client:
        answer = client.fetch(topic, 0, 7)
    offsets = [r.offset for r in records_in(answer.records)]
    assert offsets == list(range(5, 15))  # from the start of the batch holding 7, to the end


def test_first_batch_is_returned_whole_even_over_max_bytes(shared_broker, topic):
    create_topic(shared_broker.bootstrap, topic)
    fill(shared_broker.bootstrap, topic, batches=2, per_batch=10, value_size=1000, compression="none")
    with RawClient(shared_broker.bootstrap) as client:
        small_partition_limit = client.fetch(topic, 0, 0, partition_max_bytes=100)
        small_response_limit = client.fetch(topic, 0, 0, max_bytes=100)
    for answer in (small_partition_limit, small_response_limit):
        assert [r.offset for r in records_in(answer.records)] == list(range(10))
        assert len(answer.records) < 2 * 10_000  # not the second batch too


def test_later_partition_gets_no_partial_first_batch(shared_broker, topic):
    # KIP-74: only the first non-empty partition may exceed the limits, by one whole batch. A
    # later partition whose first batch does not fit in what is left gets no records at all:
    # Kafka's ReplicaManager replaces such an incomplete set with an empty one for Fetch v3+
    # ("consumers can make progress in such cases"). A slice holding only part of a batch
    # stops kafka-python ("no complete records were found") and aiokafka (RecordTooLargeError).
    create_topic(shared_broker.bootstrap, topic, partitions=2)
    with RawClient(shared_broker.bootstrap) as client:
        for p in range(2):
            batch = build_batch([(b"k", b"%d-" % p + b"x" * 900) for _ in range(4)])
            assert int(client.produce(topic, p, batch).error_code) == 0
        size = len(batch)

        answers = client.fetch_many(topic, {0: 0, 1: 0}, max_bytes=size + size // 2)
        alone = client.fetch(topic, 1, 0, max_bytes=size + size // 2)

    assert [r.offset for r in records_in(answers[0].records)] == [0, 1, 2, 3]
    assert (int(answers[1].error_code), answers[1].high_watermark) == (0, 4)
    assert not answers[1].records, f"{len(answers[1].records)} bytes of a {size}-byte batch"
    assert [r.offset for r in records_in(alone.records)] == [0, 1, 2, 3]


def test_offset_out_of_range_only_outside_log_start_and_log_end(shared_broker, topic):
    create_topic(shared_broker.bootstrap, topic)
    fill(shared_broker.bootstrap, topic, batches=3)
    tp = CkTopicPartition(topic, 0, 5)
    assert admin(shared_broker.bootstrap).delete_records([tp])[tp].result(TIMEOUT_S).low_watermark == 5

    with RawClient(shared_broker.bootstrap) as client:
        answers = {offset: client.fetch(topic, 0, offset) for offset in (-1, 0, 4, 5, 9, 14, 15, 16, 1000)}

    errors = {offset: int(a.error_code) for offset, a in answers.items()}
    assert errors == {-1: OFFSET_OUT_OF_RANGE, 0: OFFSET_OUT_OF_RANGE, 4: OFFSET_OUT_OF_RANGE, 5: 0, 9: 0,
                      14: 0, 15: 0, 16: OFFSET_OUT_OF_RANGE, 1000: OFFSET_OUT_OF_RANGE}
    assert not answers[15].records  # at the log end: empty, no error
    for a in answers.values():
        assert (a.high_watermark, a.last_stable_offset, a.log_start_offset) == (15, 15, 5)
    assert int(answers[5].preferred_read_replica) == -1


def test_unknown_topic_fetch_is_unknown_topic_or_partition(shared_broker, topic):
    with RawClient(shared_broker.bootstrap) as client:
        answer = client.fetch(topic + "-never-created", 0, 0)
    assert int(answer.error_code) == UNKNOWN_TOPIC_OR_PARTITION


@pytest.mark.parametrize("version", versions(ApiKey.FETCH))
def test_every_fetch_version_returns_records_and_offsets(shared_broker, topic, version):
    create_topic(shared_broker.bootstrap, topic)
    fill(shared_broker.bootstrap, topic, batches=2)
    with RawClient(shared_broker.bootstrap) as client:
        answer = client.fetch(topic, 0, 3, version=version)
    assert (int(answer.error_code), answer.high_watermark) == (0, 10)
    assert [r.offset for r in records_in(answer.records)] == list(range(10))


def test_tailing_consumer_sees_new_records(shared_broker, topic):
    from confluent_kafka import Producer

    create_topic(shared_broker.bootstrap, topic)
    consumer = confluent_consumer(shared_broker.bootstrap)
    try:
        consumer.assign([CkTopicPartition(topic, 0, 0)])
        assert consumer.consume(10, timeout=0.5) == []
        producer = Producer({"bootstrap.servers": shared_broker.bootstrap, "linger.ms": 0})
        for i in range(3):
            producer.produce(topic, value=b"live-%d" % i, partition=0)
        assert producer.flush(TIMEOUT_S) == 0
        got = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < 3 and time.monotonic() < deadline:
            got += [confluent_rec(m) for m in consumer.consume(10, timeout=0.2)]
    finally:
        consumer.close()
    assert [(r.offset, r.value) for r in got] == [(i, b"live-%d" % i) for i in range(3)]


@pytest.mark.parametrize("client", ["confluent", "kafka-python", "aiokafka"])
def test_small_fetch_limits_still_deliver_every_record(shared_broker, topic, client):
    # With fetch limits far below the data, later partitions of a response come back cut off
    # inside a batch; clients drop the partial batch and fetch it again. Nothing may be lost.
    from clients import CONSUMERS, by_position

    create_topic(shared_broker.bootstrap, topic, partitions=3)
    with RawClient(shared_broker.bootstrap) as raw:
        for k in range(6):
            for p in range(3):
                batch = build_batch([(b"k", b"%d-%d-%d-" % (p, k, i) + b"x" * 900) for i in range(4)])
                assert int(raw.produce(topic, p, batch).error_code) == 0
    config = {
        "confluent": {"fetch.max.bytes": 6000, "max.partition.fetch.bytes": 5000, "message.max.bytes": 5000},
        "kafka-python": {"fetch_max_bytes": 6000, "max_partition_fetch_bytes": 5000},
        "aiokafka": {"fetch_max_bytes": 6000, "max_partition_fetch_bytes": 5000},
    }[client]

    got = CONSUMERS[client](shared_broker.bootstrap, topic, dict.fromkeys(range(3), 0), 72, **config)

    assert [(r.partition, r.offset, r.value[:8]) for r in by_position(got)] == [
        (p, 4 * k + i, (b"%d-%d-%d-" % (p, k, i) + b"xxxxxx")[:8]) for p in range(3) for k in range(6) for i in range(4)]
