"""DeleteRecords through confluent-kafka's AdminClient: the log start moves up, the earliest
offset follows it, a fetch below it is OFFSET_OUT_OF_RANGE and consumers reset as their
auto.offset.reset says; records at and above the new start are untouched."""

from __future__ import annotations

import pytest
from confluent_kafka import OFFSET_END, KafkaError, KafkaException
from confluent_kafka import TopicPartition as CkTopicPartition

from logbroker.records.builder import build_batch

from clients import (
    TIMEOUT_S,
    RawClient,
    admin,
    confluent_consumer,
    consume_confluent,
    consume_kafka_python,
    create_topic,
    records_in,
)

pytestmark = pytest.mark.timeout(60)

RECORDS = 20  # four batches of five: offsets 0-4, 5-9, 10-14, 15-19


def fill(bootstrap: str, topic: str) -> None:
    create_topic(bootstrap, topic)
    with RawClient(bootstrap) as client:
        for k in range(4):
            batch = build_batch([(b"k", b"v%d" % o) for o in range(5 * k, 5 * k + 5)], compression="gzip")
            assert int(client.produce(topic, 0, batch).error_code) == 0


def delete_before(bootstrap: str, topic: str, offset: int):
    tp = CkTopicPartition(topic, 0, offset)
    return admin(bootstrap).delete_records([tp], operation_timeout=5)[tp].result(TIMEOUT_S)


def watermarks(bootstrap: str, topic: str) -> tuple[int, int]:
    consumer = confluent_consumer(bootstrap)
    try:
        return consumer.get_watermark_offsets(CkTopicPartition(topic, 0), timeout=TIMEOUT_S)
    finally:
        consumer.close()


def test_delete_records_moves_the_log_start(shared_broker, topic):
    fill(shared_broker.bootstrap, topic)

    deleted = delete_before(shared_broker.bootstrap, topic, 7)

    assert deleted.low_watermark == 7
    assert watermarks(shared_broker.bootstrap, topic) == (7, RECORDS)
    with RawClient(shared_broker.bootstrap) as client:
        below = client.fetch(topic, 0, 6)
        at = client.fetch(topic, 0, 7)
        earliest = client.list_offset(topic, 0, -2)
        by_time = client.list_offset(topic, 0, 0)  # timestamp 0: before every record
    assert (int(below.error_code), below.log_start_offset, bool(below.records)) == (1, 7, False)
    assert (int(at.error_code), at.log_start_offset, at.high_watermark) == (0, 7, RECORDS)
    # The batch holding offset 7 starts at 5; the client skips 5 and 6.
    assert [r.offset for r in records_in(at.records)][:3] == [5, 6, 7]
    assert earliest.offset == 7
    assert by_time.offset == 7  # never an offset below the log start


def test_consumer_below_the_log_start_resets_to_earliest(shared_broker, topic):
    fill(shared_broker.bootstrap, topic)
    delete_before(shared_broker.bootstrap, topic, 12)

    for consume in (consume_confluent, consume_kafka_python):
        config = ({"auto.offset.reset": "earliest"} if consume is consume_confluent
                  else {"auto_offset_reset": "earliest"})
        got = consume(shared_broker.bootstrap, topic, {0: 3}, RECORDS - 12, **config)
        assert [(r.offset, r.value) for r in got] == [(o, b"v%d" % o) for o in range(12, RECORDS)], consume


def test_consumer_below_the_log_start_with_reset_error_gets_an_error(shared_broker, topic):
    fill(shared_broker.bootstrap, topic)
    delete_before(shared_broker.bootstrap, topic, 12)

    with pytest.raises(KafkaException) as info:
        consume_confluent(shared_broker.bootstrap, topic, {0: 3}, 1, timeout_s=5, **{"auto.offset.reset": "error"})
    assert info.value.args[0].code() == KafkaError._AUTO_OFFSET_RESET


def test_delete_all_records_with_offset_end(shared_broker, topic):
    fill(shared_broker.bootstrap, topic)

    deleted = delete_before(shared_broker.bootstrap, topic, OFFSET_END)

    assert deleted.low_watermark == RECORDS
    assert watermarks(shared_broker.bootstrap, topic) == (RECORDS, RECORDS)
    with RawClient(shared_broker.bootstrap) as client:
        assert int(client.fetch(topic, 0, RECORDS).error_code) == 0
        assert int(client.fetch(topic, 0, RECORDS - 1).error_code) == 1


def test_delete_records_beyond_the_high_watermark_is_offset_out_of_range(shared_broker, topic):
    fill(shared_broker.bootstrap, topic)

    with pytest.raises(KafkaException) as info:
        delete_before(shared_broker.bootstrap, topic, RECORDS + 1)

    assert info.value.args[0].code() == KafkaError.OFFSET_OUT_OF_RANGE
    assert watermarks(shared_broker.bootstrap, topic) == (0, RECORDS)


def test_delete_records_never_moves_the_log_start_back(shared_broker, topic):
    fill(shared_broker.bootstrap, topic)
    delete_before(shared_broker.bootstrap, topic, 10)

    assert delete_before(shared_broker.bootstrap, topic, 4).low_watermark == 10
    assert watermarks(shared_broker.bootstrap, topic) == (10, RECORDS)
