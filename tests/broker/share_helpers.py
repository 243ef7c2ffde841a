"""Helpers for the share-group tests: configure a group, produce, drain a ShareConsumer."""

from __future__ import annotations

import time

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType

TIMEOUT_S = 20


def create_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # alive until the result is in
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result()


def set_group_configs(bootstrap: str, group_id: str, **configs: str) -> None:
    """IncrementalAlterConfigs on the GROUP resource, as kafka-configs.sh --entity-type groups."""
    resource = ConfigResource(ResourceType.GROUP, group_id, incremental_configs=[
        ConfigEntry(key.replace("_", "."), value, incremental_operation=AlterConfigOpType.SET)
        for key, value in configs.items()])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.incremental_alter_configs([resource]).values():
        future.result()


def produce(bootstrap: str, topic: str, count: int, *, partition: int = 0, prefix: str = "v",
            batch: int | None = None) -> list[bytes]:
    """Produce `count` records; with `batch`, flushed every `batch` records, so that no record
    batch holds more (a share group hands out whole batches)."""
    producer = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    values = [f"{prefix}{i}".encode() for i in range(count)]
    for i, value in enumerate(values, 1):
        producer.produce(topic, value=value, partition=partition)
        if batch is not None and i % batch == 0:
            assert producer.flush(TIMEOUT_S) == 0
    assert producer.flush(TIMEOUT_S) == 0
    return values


def share_consumer(bootstrap: str, group_id: str, topic: str, *, explicit: bool = False, **extra) -> ck.ShareConsumer:
    config = {"bootstrap.servers": bootstrap, "group.id": group_id, **extra}
    if explicit:
        config["share.acknowledgement.mode"] = "explicit"
    consumer = ck.ShareConsumer(config)
    consumer.subscribe([topic])
    return consumer


def poll_messages(consumer, *, timeout_s: float = 1.0) -> list:
    batch = consumer.poll(timeout_s)
    if batch is None:
        return []
    messages = list(batch) if not hasattr(batch, "offset") else [batch]
    return [m for m in messages if m.error() is None]


def drain(consumers, want: int, *, timeout_s: float = TIMEOUT_S, on_message=None) -> dict[int, list]:
    """Poll every consumer in turn until `want` records arrived in all or the time is up;
    returns each consumer's messages (by index). `on_message(i, consumer, message)` may
    acknowledge them (explicit mode)."""
    got: dict[int, list] = {i: [] for i in range(len(consumers))}
    deadline = time.monotonic() + timeout_s
    while sum(len(v) for v in got.values()) < want and time.monotonic() < deadline:
        for i, consumer in enumerate(consumers):
            for message in poll_messages(consumer, timeout_s=0.3):
                got[i].append(message)
                if on_message is not None:
                    on_message(i, consumer, message)
    return got
