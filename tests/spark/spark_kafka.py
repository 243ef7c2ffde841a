"""Kafka helpers for tests/spark: topics, producing and reading back with confluent-kafka."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def create_topic(bootstrap: str, topic: str, partitions: int = 1, config: dict | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})]).values():
        future.result(30)


def produce(bootstrap: str, topic: str, records: list[dict], **config) -> None:
    """Produce dicts with value and optional key, partition, headers, timestamp; all acked."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5, **config})
    failures = []
    for record in records:
        producer.produce(topic, **record,
                         on_delivery=lambda err, msg: err and failures.append(err))
    assert producer.flush(30) == 0
    assert not failures, failures[:3]


def consume_all(bootstrap: str, topic: str, partitions: int, *, timeout_s: float = 30.0,
                isolation_level: str = "read_committed") -> list[dict]:
    """Every record of every partition, as a consumer with assign() sees it."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "enable.partition.eof": True,
                         "isolation.level": isolation_level})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    records, at_end = [], set()
    deadline = time.monotonic() + timeout_s
    while len(at_end) < partitions and time.monotonic() < deadline:
        for msg in consumer.consume(1000, 0.2):
            if msg.error():
                at_end.add(msg.partition())
                continue
            records.append({"key": msg.key(), "value": msg.value(), "topic": msg.topic(),
                            "partition": msg.partition(), "offset": msg.offset(),
                            "timestamp_ms": msg.timestamp()[1],
                            "timestampType": msg.timestamp()[0] - 1,
                            "headers": msg.headers()})
    consumer.close()
    assert len(at_end) == partitions, "did not reach the end of every partition"
    return sorted(records, key=lambda r: (r["partition"], r["offset"]))


def new_topic_name() -> str:
    return f"spark-{uuid.uuid4().hex[:12]}"


def delete_records_before(bootstrap: str, topic: str, partition: int, offset: int) -> None:
    """DeleteRecords: move the log start offset of one partition up to `offset`."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    tp = TopicPartition(topic, partition, offset)
    admin.delete_records([tp], operation_timeout=5)[tp].result(30)
