"""KIP-360 (Kafka 2.5+): a producer whose records were all removed goes on writing.

DeleteRecords up to the log end removes every batch an idempotent or transactional producer wrote
to a partition. Kafka keeps the producer's state (its epoch and last sequence) until
producer.id.expiration.ms, so the producer's next batch, with its next sequence number, is in
sequence and accepted; librdkafka counts on it (OUT_OF_ORDER_SEQUENCE_NUMBER is fatal to it).
"""

from __future__ import annotations

import socket

import pytest
from confluent_kafka import Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import OffsetSpec

from clients import TIMEOUT_S, admin, create_topic
from transactional_clients import read_all, transactional_producer

from logbroker.testing import TEST_OVERRIDES, BrokerProcess, wait_for

pytestmark = pytest.mark.timeout(120)


def delete_to_the_end(bootstrap: str, topic: str, end: int) -> int:
    """DeleteRecords up to the high watermark (offset -1) once it has reached `end` (the
    transaction coordinator writes its markers after EndTxn has been answered); returns the new
    log start."""
    def high_watermark() -> int:
        tp = CkTopicPartition(topic, 0)
        return admin(bootstrap).list_offsets({tp: OffsetSpec.latest()})[tp].result(TIMEOUT_S).offset
    wait_for(lambda: high_watermark() >= end, what=f"high watermark {end}")
    tp = CkTopicPartition(topic, 0, -1)
    return admin(bootstrap).delete_records([tp], operation_timeout=5)[tp].result(TIMEOUT_S).low_watermark


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_transactional_producer_goes_on_after_its_records_were_deleted(shared_broker, topic):
    bootstrap = shared_broker.bootstrap
    create_topic(bootstrap, topic)
    producer = transactional_producer(bootstrap, f"txn-{topic}")
    errors = []
    for round_ in range(3):
        for _ in range(2):
            producer.begin_transaction()
            for i in range(5):
                producer.produce(topic, f"{round_}-{i}".encode(), partition=0,
                                 on_delivery=lambda err, _msg: err and errors.append(err))
            producer.commit_transaction(TIMEOUT_S)
        # two transactions of five records and a marker each: 12 offsets per round
        assert delete_to_the_end(bootstrap, topic, 12 * (round_ + 1)) == 12 * (round_ + 1)
    producer.begin_transaction()
    producer.produce(topic, b"last", partition=0, on_delivery=lambda err, _msg: err and errors.append(err))
    producer.commit_transaction(TIMEOUT_S)
    assert errors == []
    records = read_all(bootstrap, topic, isolation="read_committed", expect=1)
    assert records == [(0, 36, b"last")]


def test_an_idempotent_producer_goes_on_after_its_records_were_deleted(shared_broker, topic):
    bootstrap = shared_broker.bootstrap
    create_topic(bootstrap, topic)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 0})
    reports = []
    for round_ in range(3):
        for i in range(10):
            producer.produce(topic, f"{round_}-{i}".encode(), partition=0,
                             on_delivery=lambda err, msg: reports.append((err, msg.offset())))
            producer.flush(TIMEOUT_S)  # one batch each: sequence numbers 10*round_ + i
        assert delete_to_the_end(bootstrap, topic, 10 * (round_ + 1)) == 10 * (round_ + 1)
    producer.produce(topic, b"last", partition=0, on_delivery=lambda err, msg: reports.append((err, msg.offset())))
    assert producer.flush(TIMEOUT_S) == 0
    assert reports == [(None, offset) for offset in range(31)]
    assert read_all(bootstrap, topic, isolation="read_uncommitted", expect=1) == [(0, 30, b"last")]


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_a_transactional_producer_goes_on_after_its_records_were_deleted_and_the_broker_restarted(tmp_path, how):
    """The producer state outlives the deleted batches across a restart too (clean, or kill -9
    and recovery), here with a segment rolled every few batches so that whole segments go."""
    broker = BrokerProcess(tmp_path, overrides={**TEST_OVERRIDES, "listeners": f"PLAINTEXT://127.0.0.1:{free_port()}",
                                                "transaction.state.log.num.partitions": "1"})
    with broker:
        bootstrap = broker.bootstrap
        create_topic(bootstrap, "history", config={"segment.bytes": "2048"})
        producer = transactional_producer(bootstrap, "txn-history")
        errors = []
        for round_ in range(3):
            producer.begin_transaction()
            for i in range(5):
                producer.produce("history", f"{round_}-{i}".encode() * 100, partition=0,
                                 on_delivery=lambda err, _msg: err and errors.append(err))
            producer.commit_transaction(TIMEOUT_S)
        assert delete_to_the_end(bootstrap, "history", 18) == 18
        broker.stop() if how == "stop" else broker.kill()
        broker.start()
        for _ in range(2):
            producer.begin_transaction()
            producer.produce("history", b"after", partition=0, on_delivery=lambda err, _msg: err and errors.append(err))
            producer.commit_transaction(TIMEOUT_S)
        assert errors == []
        # After kill -9 the log start may be back at the first kept segment's base, as on Kafka
        # (log-start-offset-checkpoint is written every log.flush.start.offset.checkpoint.interval.ms).
        records = read_all(bootstrap, "history", isolation="read_committed", expect=2)
        assert [r for r in records if r[2] == b"after"] == [(0, 18, b"after"), (0, 20, b"after")]
