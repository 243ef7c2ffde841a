"""Transactions against a real broker: transactional producers of confluent-kafka, kafka-python,
aiokafka (and KafkaJS in test_kafkajs_transactions.py), read_committed and read_uncommitted
consumers, offsets sent to a transaction, zombie fencing, and the error codes of bad input."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition as CTP

from clients import create_topic
from transactional_clients import read_all, transactional_producer

TIMEOUT_S = 30


def _producer(bootstrap: str, txn_id: str, **config) -> Producer:
    return transactional_producer(bootstrap, txn_id, init_timeout_s=TIMEOUT_S, **config)


def test_confluent_commit_and_abort_across_two_topics(logbroker):
    create_topic(logbroker, "txn-a", 2)
    create_topic(logbroker, "txn-b", 1)
    producer = _producer(logbroker, "txn-confluent")
    producer.begin_transaction()
    for i in range(5):
        producer.produce("txn-a", value=f"committed-{i}".encode(), partition=i % 2)
        producer.produce("txn-b", value=f"committed-{i}".encode(), partition=0)
    producer.commit_transaction(TIMEOUT_S)
    producer.begin_transaction()
    for i in range(3):
        producer.produce("txn-a", value=f"aborted-{i}".encode(), partition=i % 2)
        producer.produce("txn-b", value=f"aborted-{i}".encode(), partition=0)
    producer.flush(TIMEOUT_S)
    producer.abort_transaction(TIMEOUT_S)
    producer.begin_transaction()
    producer.produce("txn-b", value=b"last", partition=0)
    producer.commit_transaction(TIMEOUT_S)

    committed_b = [v for _, _, v in read_all(logbroker, "txn-b", isolation="read_committed", expect=6)]
    assert committed_b == [f"committed-{i}".encode() for i in range(5)] + [b"last"]
    committed_a = sorted(v for _, _, v in read_all(logbroker, "txn-a", isolation="read_committed",
                                                    partitions=2, expect=5))
    assert committed_a == sorted(f"committed-{i}".encode() for i in range(5))
    everything_b = [v for _, _, v in read_all(logbroker, "txn-b", isolation="read_uncommitted", expect=9)]
    assert everything_b == ([f"committed-{i}".encode() for i in range(5)]
                            + [f"aborted-{i}".encode() for i in range(3)] + [b"last"])


def _committed(bootstrap: str, group: str, topic: str, partitions: int = 1, *,
               isolation: str = "read_committed") -> list[int]:
    """The group's committed offsets; read_committed makes librdkafka ask with require_stable,
    so it waits while a transaction holds offsets of the group."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "isolation.level": isolation})
    try:
        return [tp.offset for tp in consumer.committed([CTP(topic, p) for p in range(partitions)], TIMEOUT_S)]
    finally:
        consumer.close()


def test_confluent_offsets_sent_to_a_transaction_are_visible_only_after_commit(logbroker):
    create_topic(logbroker, "txn-offsets-in", 1)
    create_topic(logbroker, "txn-offsets-out", 1)
    group = "txn-offsets-group"
    consumer = Consumer({"bootstrap.servers": logbroker, "group.id": group, "enable.auto.commit": False})
    producer = _producer(logbroker, "txn-offsets")
    producer.begin_transaction()
    producer.produce("txn-offsets-out", value=b"processed")
    producer.send_offsets_to_transaction([CTP("txn-offsets-in", 0, 17)], consumer.consumer_group_metadata(),
                                         TIMEOUT_S)
    producer.flush(TIMEOUT_S)
    # OFFSET_INVALID: nothing committed yet (read_uncommitted: no require_stable, no waiting)
    assert _committed(logbroker, group, "txn-offsets-in", isolation="read_uncommitted") == [-1001]
    producer.commit_transaction(TIMEOUT_S)
    assert _committed(logbroker, group, "txn-offsets-in") == [17]
    producer.begin_transaction()
    producer.send_offsets_to_transaction([CTP("txn-offsets-in", 0, 99)], consumer.consumer_group_metadata(),
                                         TIMEOUT_S)
    producer.abort_transaction(TIMEOUT_S)
    assert _committed(logbroker, group, "txn-offsets-in") == [17]
    consumer.close()


def test_confluent_zombie_is_fenced_by_a_new_producer_with_the_same_id(logbroker):
    create_topic(logbroker, "txn-zombie", 1)
    zombie = _producer(logbroker, "txn-zombie-id")
    zombie.begin_transaction()
    zombie.produce("txn-zombie", value=b"from-the-zombie")
    zombie.flush(TIMEOUT_S)
    successor = _producer(logbroker, "txn-zombie-id")  # aborts the zombie's transaction, bumps the epoch
    successor.begin_transaction()
    successor.produce("txn-zombie", value=b"from-the-successor")
    successor.commit_transaction(TIMEOUT_S)
    with pytest.raises(KafkaException) as raised:
        zombie.produce("txn-zombie", value=b"zombie-again")
        zombie.commit_transaction(TIMEOUT_S)
    assert raised.value.args[0].fatal() or raised.value.args[0].name() in ("_FENCED", "PRODUCER_FENCED",
                                                                          "INVALID_PRODUCER_EPOCH")
    values = [v for _, _, v in read_all(logbroker, "txn-zombie", isolation="read_committed", expect=1)]
    assert values == [b"from-the-successor"]


def test_two_concurrent_transactional_producers(logbroker):
    create_topic(logbroker, "txn-concurrent", 2)
    first, second = _producer(logbroker, "txn-c1"), _producer(logbroker, "txn-c2")
    first.begin_transaction()
    second.begin_transaction()
    for i in range(10):
        first.produce("txn-concurrent", value=f"first-{i}".encode(), partition=i % 2)
        second.produce("txn-concurrent", value=f"second-{i}".encode(), partition=i % 2)
    first.flush(TIMEOUT_S)
    second.flush(TIMEOUT_S)
    second.abort_transaction(TIMEOUT_S)
    first.commit_transaction(TIMEOUT_S)
    values = sorted(v for _, _, v in read_all(logbroker, "txn-concurrent", isolation="read_committed",
                                               partitions=2, expect=10))
    assert values == sorted(f"first-{i}".encode() for i in range(10))


def test_kafka_python_transactional_producer(logbroker):
    from kafka import KafkaProducer
    create_topic(logbroker, "txn-kafka-python", 1)
    producer = KafkaProducer(bootstrap_servers=logbroker, transactional_id="txn-kafka-python")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("txn-kafka-python", b"aborted")
    producer.abort_transaction()
    producer.begin_transaction()
    producer.send("txn-kafka-python", b"committed")
    producer.commit_transaction()
    producer.close()
    values = [v for _, _, v in read_all(logbroker, "txn-kafka-python", isolation="read_committed", expect=1)]
    assert values == [b"committed"]


def test_aiokafka_transactional_producer_with_offsets(logbroker):
    import asyncio

    from aiokafka import AIOKafkaProducer
    from aiokafka.structs import TopicPartition as ATP
    create_topic(logbroker, "txn-aiokafka", 1)

    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=logbroker, transactional_id="txn-aiokafka")
        await producer.start()
        try:
            async with producer.transaction():
                await producer.send_and_wait("txn-aiokafka", b"committed")
                await producer.send_offsets_to_transaction({ATP("txn-aiokafka", 0): 5}, "txn-aiokafka-group")
            await producer.begin_transaction()
            await producer.send_and_wait("txn-aiokafka", b"aborted")
            await producer.abort_transaction()
        finally:
            await producer.stop()
    asyncio.run(run())
    values = [v for _, _, v in read_all(logbroker, "txn-aiokafka", isolation="read_committed", expect=1)]
    assert values == [b"committed"]
    assert _committed(logbroker, "txn-aiokafka-group", "txn-aiokafka") == [5]


def test_transaction_open_at_kill_9_is_aborted_on_timeout_after_restart(logbroker_process):
    broker = logbroker_process
    broker.overrides["transaction.abort.timed.out.transaction.cleanup.interval.ms"] = "200"
    broker.kill()
    broker.start()
    create_topic(broker.bootstrap, "txn-crash", 1)
    producer = _producer(broker.bootstrap, "txn-crash-id", **{"transaction.timeout.ms": 3000})
    producer.begin_transaction()
    producer.produce("txn-crash", value=b"committed-before")
    producer.commit_transaction(TIMEOUT_S)
    producer.begin_transaction()
    for i in range(5):
        producer.produce("txn-crash", value=f"open-{i}".encode())
    producer.flush(TIMEOUT_S)
    broker.kill()
    broker.start()
    from clients import RawClient
    with RawClient(broker.bootstrap) as raw:
        import time
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            [state] = raw.request(65, 0, transactional_ids=["txn-crash-id"]).transaction_states
            if state.error_code == 0 and state.transaction_state == "CompleteAbort":
                break
            time.sleep(0.2)
        assert (state.error_code, state.transaction_state) == (0, "CompleteAbort")
    after = _producer(broker.bootstrap, "txn-crash-id")  # the producer id moves on
    after.begin_transaction()
    after.produce("txn-crash", value=b"committed-after")
    after.commit_transaction(TIMEOUT_S)
    values = [v for _, _, v in read_all(broker.bootstrap, "txn-crash", isolation="read_committed", expect=2)]
    assert values == [b"committed-before", b"committed-after"]


def test_offsets_committed_in_a_transaction_survive_kill_9(logbroker_process):
    broker = logbroker_process
    create_topic(broker.bootstrap, "txn-offsets-crash", 1)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g-offsets-crash",
                         "enable.auto.commit": False})
    producer = _producer(broker.bootstrap, "txn-offsets-crash")
    for offset in (11, 12):
        producer.begin_transaction()
        producer.produce("txn-offsets-crash", value=b"x")
        producer.send_offsets_to_transaction([CTP("txn-offsets-crash", 0, offset)],
                                             consumer.consumer_group_metadata(), TIMEOUT_S)
        producer.commit_transaction(TIMEOUT_S)
    producer.begin_transaction()
    producer.send_offsets_to_transaction([CTP("txn-offsets-crash", 0, 99)], consumer.consumer_group_metadata(),
                                         TIMEOUT_S)
    producer.abort_transaction(TIMEOUT_S)
    consumer.close()
    broker.kill()
    broker.start()
    assert _committed(broker.bootstrap, "g-offsets-crash", "txn-offsets-crash") == [12]
