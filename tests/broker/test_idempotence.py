"""Idempotent producers: (producer id, epoch, sequence) per partition, the last five batches
remembered; a resent batch is answered with its original offsets and not written again, a
sequence gap is OUT_OF_ORDER_SEQUENCE_NUMBER (45) and writes nothing (clients.md 9).

Real idempotent producers only resend after a lost answer, so the duplicate and the gap are
crafted at the protocol level: InitProducerId, then Produce requests with batches built by
logbroker.records.builder, sent over a plain socket.
"""

from __future__ import annotations

import pytest

from logbroker.records.builder import build_batch

from clients import (
    RawClient,
    Spec,
    consume_confluent,
    create_topic,
    produce_aiokafka,
    produce_confluent,
    records_in,
    stored_batches,
)

pytestmark = pytest.mark.timeout(60)

OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47


def idempotent_batch(pid: int, epoch: int, sequence: int, count: int, tag: bytes = b"") -> bytes:
    return build_batch([(b"k", tag + b"seq-%d" % (sequence + i)) for i in range(count)],
                       producer_id=pid, producer_epoch=epoch, base_sequence=sequence, compression="snappy")


def log_values(client: RawClient, topic: str) -> list[tuple[int, bytes]]:
    fetched = client.fetch(topic, 0, 0)
    assert int(fetched.error_code) == 0
    return [(r.offset, r.value) for r in records_in(fetched.records)]


def test_confluent_idempotent_producer_writes_each_record_once_in_order(shared_broker, topic):
    create_topic(shared_broker.bootstrap, topic)
    specs = [Spec(0, None, b"%05d" % i) for i in range(5000)]

    delivered = produce_confluent(shared_broker.bootstrap, topic, specs, **{
        "enable.idempotence": True, "linger.ms": 2, "batch.num.messages": 200,
        "max.in.flight.requests.per.connection": 5})

    assert [m.offset() for m in delivered] == list(range(5000))
    with RawClient(shared_broker.bootstrap) as client:
        assert client.list_offset(topic, 0, -1).offset == 5000  # nothing written twice
    got = consume_confluent(shared_broker.bootstrap, topic, {0: 0}, 5000)
    assert [(r.offset, r.value) for r in got] == [(i, b"%05d" % i) for i in range(5000)]
    batches = stored_batches(shared_broker.data_dir, topic, 0)
    assert len({b.producer_id for b in batches}) == 1 and batches[0].producer_id >= 0
    # Sequences run on without gaps from 0, batch after batch.
    assert batches[0].base_sequence == 0
    assert all(b.base_sequence == a.base_sequence + a.records_count for a, b in zip(batches, batches[1:]))


def test_aiokafka_idempotent_producer_writes_each_record_once_in_order(shared_broker, topic):
    create_topic(shared_broker.bootstrap, topic)
    specs = [Spec(0, None, b"%04d" % i) for i in range(1000)]

    metadata = produce_aiokafka(shared_broker.bootstrap, topic, specs, enable_idempotence=True, max_batch_size=4096)

    assert [m.offset for m in metadata] == list(range(1000))
    got = consume_confluent(shared_broker.bootstrap, topic, {0: 0}, 1000)
    assert [r.value for r in got] == [s.value for s in specs]
    assert all(b.producer_id >= 0 for b in stored_batches(shared_broker.data_dir, topic, 0))


def test_resent_batch_gets_the_same_offsets_and_is_stored_once(shared_broker, topic):
    create_topic(shared_broker.bootstrap, topic)
    with RawClient(shared_broker.bootstrap) as client:
        pid, epoch = client.init_producer_id()
        first = idempotent_batch(pid, epoch, 0, 3)

        answer = client.produce(topic, 0, first)
        again = client.produce(topic, 0, first)
        following = client.produce(topic, 0, idempotent_batch(pid, epoch, 3, 2))

        assert (int(answer.error_code), answer.base_offset) == (0, 0)
        assert (int(again.error_code), again.base_offset) == (0, 0)
        assert (int(following.error_code), following.base_offset) == (0, 3)
        assert log_values(client, topic) == [(i, b"seq-%d" % i) for i in range(5)]


def test_any_of_the_last_five_batches_is_recognised_as_a_duplicate(shared_broker, topic):
    create_topic(shared_broker.bootstrap, topic)
    with RawClient(shared_broker.bootstrap) as client:
        pid, epoch = client.init_producer_id()
        batches = [idempotent_batch(pid, epoch, 2 * k, 2) for k in range(6)]  # offsets 2k, 2k+1
        for k, batch in enumerate(batches):
            assert client.produce(topic, 0, batch).base_offset == 2 * k

        for k in range(1, 6):  # the last five
            answer = client.produce(topic, 0, batches[k])
            assert (int(answer.error_code), answer.base_offset) == (0, 2 * k), k
        # The sixth-last is no longer remembered: Kafka answers it as out of order.
        oldest = client.produce(topic, 0, batches[0])
        assert int(oldest.error_code) == OUT_OF_ORDER_SEQUENCE_NUMBER

        assert [o for o, _ in log_values(client, topic)] == list(range(12))


def test_sequence_gap_is_out_of_order_and_appends_nothing(shared_broker, topic):
    create_topic(shared_broker.bootstrap, topic)
    with RawClient(shared_broker.bootstrap) as client:
        pid, epoch = client.init_producer_id()
        assert int(client.produce(topic, 0, idempotent_batch(pid, epoch, 0, 3)).error_code) == 0

        gap = client.produce(topic, 0, idempotent_batch(pid, epoch, 5, 2))
        assert int(gap.error_code) == OUT_OF_ORDER_SEQUENCE_NUMBER
        assert client.list_offset(topic, 0, -1).offset == 3

        # The producer's state is unharmed: the next sequence in order is still accepted.
        ok = client.produce(topic, 0, idempotent_batch(pid, epoch, 3, 2))
        assert (int(ok.error_code), ok.base_offset) == (0, 3)
        assert [v for _, v in log_values(client, topic)] == [b"seq-%d" % i for i in range(5)]


def test_older_producer_epoch_is_fenced(shared_broker, topic):
    create_topic(shared_broker.bootstrap, topic)
    with RawClient(shared_broker.bootstrap) as client:
        pid, epoch = client.init_producer_id()
        assert int(client.produce(topic, 0, idempotent_batch(pid, epoch, 0, 1)).error_code) == 0
        bumped = client.produce(topic, 0, idempotent_batch(pid, epoch + 1, 0, 1, tag=b"new-"))
        assert (int(bumped.error_code), bumped.base_offset) == (0, 1)

        stale = client.produce(topic, 0, idempotent_batch(pid, epoch, 1, 1, tag=b"stale-"))

        assert int(stale.error_code) == INVALID_PRODUCER_EPOCH
        assert [v for _, v in log_values(client, topic)] == [b"seq-0", b"new-seq-0"]


def test_producers_get_distinct_ids(shared_broker):
    with RawClient(shared_broker.bootstrap) as client:
        ids = {client.init_producer_id()[0] for _ in range(5)}
    assert len(ids) == 5 and min(ids) >= 0
