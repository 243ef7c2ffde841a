"""KIP-467 per-record produce errors, as librdkafka sees them: a batch with some records the
broker refuses (no key on a compacted topic, a timestamp out of range) fails as a whole; the
answer names those records (record_errors); when several are named librdkafka fails them with
INVALID_RECORD and the others with _INVALID_DIFFERENT_RECORD (with one named, every record gets
the partition's error); the others go through when sent again."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, Producer

from logbroker.records.builder import build_batch

from clients import TIMEOUT_S, RawClient, confluent_consumer, create_topic

pytestmark = pytest.mark.timeout(60)

BATCH = 10


def produce_one_batch(bootstrap: str, topic: str, items: list[tuple[bytes | None, bytes, int | None]]):
    """Produce `items` (key, value, timestamp) as one batch (a long linger, one flush); return the
    delivery report of each, in order, as (error, offset)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1000, "retries": 0,
                         "enable.idempotence": False, "batch.num.messages": 1000})
    producer.list_topics(topic, timeout=TIMEOUT_S)
    reports: list = [None] * len(items)
    for i, (key, value, timestamp) in enumerate(items):
        kwargs = {"timestamp": timestamp} if timestamp is not None else {}
        producer.produce(topic, key=key, value=value, partition=0,
                         on_delivery=lambda err, msg, i=i: reports.__setitem__(i, (err, msg.offset())),
                         **kwargs)
    assert producer.flush(TIMEOUT_S) == 0
    return reports


def read_values(bootstrap: str, topic: str, count: int) -> list[bytes]:
    from confluent_kafka import TopicPartition

    consumer = confluent_consumer(bootstrap, **{"auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        out: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(out) < count and time.monotonic() < deadline:
            for msg in consumer.consume(100, timeout=0.2):
                assert msg.error() is None, msg.error()
                out.append(msg.value())
        time.sleep(0.5)
        out += [m.value() for m in consumer.consume(100, timeout=0.5)]
        return out
    finally:
        consumer.close()


def check_failed_then_resend(bootstrap: str, topic: str, items, bad: set[int], error_code: int):
    reports = produce_one_batch(bootstrap, topic, items)
    bad_reports = [reports[i] for i in sorted(bad)]
    others = [i for i in range(len(items)) if i not in bad]
    if len(bad) > 1:
        # The records at fault fail with INVALID_RECORD, the others with a code that says
        # "another record of the batch was refused".
        assert all(err is not None and err.code() == error_code for err, _ in bad_reports), bad_reports
        assert all(reports[i][0] is not None
                   and reports[i][0].code() == KafkaError._INVALID_DIFFERENT_RECORD
                   for i in others), reports
    else:
        # With a single record named, librdkafka (2.16) fails every record of the batch with the
        # partition's error code.
        assert [err.code() if err else None for err, _ in reports] == [error_code] * len(items)
    # Nothing of the batch was written; the others go through when sent again.
    resent = produce_one_batch(bootstrap, topic, [items[i] for i in others])
    assert [err for err, _ in resent] == [None] * len(others)
    assert [offset for _, offset in resent] == list(range(len(others)))
    assert read_values(bootstrap, topic, len(others)) == [items[i][1] for i in others]


def test_records_without_key_on_compacted_topic_fail_alone(shared_broker, topic):
    bootstrap = shared_broker.bootstrap
    create_topic(bootstrap, topic, config={"cleanup.policy": "compact"})
    bad = {2, 5, 9}
    items = [(None if i in bad else b"k%d" % i, b"v%d" % i, None) for i in range(BATCH)]
    check_failed_then_resend(bootstrap, topic, items, bad, KafkaError.INVALID_RECORD)


def test_one_record_without_key_fails_the_batch_with_invalid_record(shared_broker, topic):
    bootstrap = shared_broker.bootstrap
    create_topic(bootstrap, topic, config={"cleanup.policy": "compact"})
    items = [(None if i == 4 else b"k%d" % i, b"v%d" % i, None) for i in range(BATCH)]
    check_failed_then_resend(bootstrap, topic, items, {4}, KafkaError.INVALID_RECORD)


def test_records_with_timestamps_out_of_range_fail_alone(shared_broker, topic):
    bootstrap = shared_broker.bootstrap
    create_topic(bootstrap, topic, config={"message.timestamp.after.max.ms": "60000"})
    now = int(time.time() * 1000)
    bad = {3, 7}
    items = [(b"k%d" % i, b"v%d" % i, now + 3_600_000 if i in bad else now) for i in range(BATCH)]
    # Several records named: librdkafka reports INVALID_RECORD for them, though the partition's
    # error is INVALID_TIMESTAMP.
    check_failed_then_resend(bootstrap, topic, items, bad, KafkaError.INVALID_RECORD)


def test_one_record_with_timestamp_out_of_range_fails_with_invalid_timestamp(shared_broker, topic):
    bootstrap = shared_broker.bootstrap
    create_topic(bootstrap, topic, config={"message.timestamp.after.max.ms": "60000"})
    now = int(time.time() * 1000)
    items = [(b"k%d" % i, b"v%d" % i, now + 3_600_000 if i == 6 else now) for i in range(BATCH)]
    check_failed_then_resend(bootstrap, topic, items, {6}, KafkaError.INVALID_TIMESTAMP)


def test_produce_answer_names_each_record_and_kafkas_message(shared_broker, topic):
    bootstrap = shared_broker.bootstrap
    create_topic(bootstrap, topic, config={"cleanup.policy": "compact"})
    records = build_batch([(None if i in (1, 4) else b"k", b"v") for i in range(6)])
    with RawClient(bootstrap) as client:
        answer = client.produce(topic, 0, records, version=8)
    assert int(answer.error_code) == KafkaError.INVALID_RECORD
    assert [(int(e.batch_index), e.batch_index_error_message) for e in answer.record_errors] == [
        (i, f"Compacted topic cannot accept message without key in topic partition {topic}-0")
        for i in (1, 4)]
    assert answer.error_message.startswith(
        "One or more records have been rejected due to 2 record errors in total")
