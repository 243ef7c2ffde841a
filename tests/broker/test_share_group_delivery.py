"""What a share group delivers (KIP-932), with confluent-kafka's ShareConsumer against a real
broker: under share.isolation.level=read_committed only committed records below the last stable
offset, and whole record batches even when a batch holds more than max.poll.records."""

from __future__ import annotations

import uuid

import confluent_kafka as ck

from share_helpers import TIMEOUT_S, create_topic, drain, set_group_configs, share_consumer
from transactional_clients import transactional_producer


def names() -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:8]
    return f"queue-{suffix}", f"workers-{suffix}"


def test_read_committed_delivers_committed_records_below_the_last_stable_offset(logbroker):
    topic, group = names()
    create_topic(logbroker, topic)
    set_group_configs(logbroker, group, share_auto_offset_reset="earliest",
                      share_isolation_level="read_committed")
    producer = transactional_producer(logbroker, f"txn-{topic}")
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, value=f"aborted{i}".encode(), partition=0)
    producer.flush(TIMEOUT_S)  # written before the abort (else the client drops them unsent)
    producer.abort_transaction()  # offsets 0-2, its marker 3
    producer.begin_transaction()
    for i in range(2):
        producer.produce(topic, value=f"committed{i}".encode(), partition=0)
    producer.commit_transaction()  # offsets 4-5, its marker 6
    producer.begin_transaction()
    producer.produce(topic, value=b"open0", partition=0)
    producer.flush(TIMEOUT_S)  # offset 7, its transaction still open: the last stable offset is 7
    consumer = share_consumer(logbroker, group, topic)
    try:
        got = drain([consumer], 3, timeout_s=5)[0]
        assert [(m.offset(), m.value()) for m in got] == [(4, b"committed0"), (5, b"committed1")]
        producer.commit_transaction()
        got = drain([consumer], 1)[0]
    finally:
        consumer.close()
    assert [(m.offset(), m.value()) for m in got] == [(7, b"open0")]


def test_read_uncommitted_is_the_default_and_delivers_aborted_records_too(logbroker):
    topic, group = names()
    create_topic(logbroker, topic)
    set_group_configs(logbroker, group, share_auto_offset_reset="earliest")
    producer = transactional_producer(logbroker, f"txn-{topic}")
    producer.begin_transaction()
    producer.produce(topic, value=b"aborted0", partition=0)
    producer.flush(TIMEOUT_S)
    producer.abort_transaction()
    producer.begin_transaction()
    producer.produce(topic, value=b"committed0", partition=0)
    producer.commit_transaction()
    consumer = share_consumer(logbroker, group, topic)
    try:
        got = drain([consumer], 2)[0]
    finally:
        consumer.close()
    assert [(m.offset(), m.value()) for m in got] == [(0, b"aborted0"), (2, b"committed0")]


def test_a_batch_larger_than_max_poll_records_is_delivered_whole(logbroker):
    topic, group = names()
    create_topic(logbroker, topic)
    set_group_configs(logbroker, group, share_auto_offset_reset="earliest")
    producer = ck.Producer({"bootstrap.servers": logbroker, "linger.ms": 1000, "batch.num.messages": 10})
    for i in range(10):  # one batch: offsets 0-9
        producer.produce(topic, value=f"a{i}".encode(), partition=0)
    assert producer.flush(TIMEOUT_S) == 0
    for i in range(10):  # another: offsets 10-19
        producer.produce(topic, value=f"b{i}".encode(), partition=0)
    assert producer.flush(TIMEOUT_S) == 0
    consumer = share_consumer(logbroker, group, topic, explicit=True, **{"max.poll.records": 3})
    polls: list[list[int]] = []
    try:
        while sum(map(len, polls)) < 20 and len(polls) < 20:
            batch = consumer.poll(TIMEOUT_S / 4)
            messages = [m for m in (batch or []) if m.error() is None]
            if messages:
                polls.append([m.offset() for m in messages])
                for message in messages:
                    consumer.acknowledge(message, ck.AcknowledgeType.ACCEPT)
                consumer.commit_sync()
    finally:
        consumer.close()
    assert polls == [list(range(10)), list(range(10, 20))], "each poll is one whole batch"
