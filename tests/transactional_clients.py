"""Transactional producers and isolation-level readers (confluent-kafka), for the transaction
tests against one broker (tests/broker) and against a cluster (tests/cluster).

Importable from any test directory: tests/ is on sys.path as the directory of the top conftest.
"""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

PARTITION_EOF = -191  # librdkafka's _PARTITION_EOF


def transactional_producer(bootstrap: str, txn_id: str, *, init_timeout_s: float = 30,
                           **config) -> Producer:
    """A producer with `transactional.id` = `txn_id` (and `config`), its transactions initialised."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, **config})
    producer.init_transactions(init_timeout_s)
    return producer


def read_all(bootstrap: str, topic: str, *, isolation: str, partitions: int = 1,
             expect: int | None = None, timeout_s: float = 10.0) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of every record a consumer at `isolation` (read_committed or
    read_uncommitted) reads from partitions [0, partitions) of `topic`, from offset 0: until it
    has reached the end of each partition and holds at least `expect` records, or `timeout_s`."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4()}",
                         "isolation.level": isolation, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got, eof = [], set()
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == PARTITION_EOF:
                    eof.add(msg.partition())
                    if len(eof) == partitions and (expect is None or len(got) >= expect):
                        break
                    continue
                raise KafkaException(msg.error())
            got.append((msg.partition(), msg.offset(), msg.value()))
    finally:
        consumer.close()
    return got
