"""Helpers for the cluster tests: three broker processes on one ZooKeeper chroot, and polling."""

from __future__ import annotations

import time

from confluent_kafka.admin import AdminClient

from logbroker.testing import BrokerProcess

CLUSTER_OVERRIDES = {"group.initial.rebalance.delay.ms": "0", "zookeeper.session.timeout.ms": "4000",
                     "offsets.topic.replication.factor": "1"}


def start_cluster(tmp_path, zk_connect, count=3, **extra) -> list[BrokerProcess]:
    brokers = []
    for broker_id in range(1, count + 1):
        overrides = {**CLUSTER_OVERRIDES, "broker.id": str(broker_id), "zookeeper.connect": zk_connect,
                     **extra}
        brokers.append(BrokerProcess(tmp_path / f"broker-{broker_id}", overrides=overrides).start())
    return brokers


def wait_for(condition, timeout_s=20.0, interval_s=0.1):
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout_s} s")
        time.sleep(interval_s)


def topic_metadata(bootstrap: str, topic: str):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.list_topics(topic, timeout=10)


def fully_led(bootstrap: str, topic: str, partitions: int, replicas: int):
    md = topic_metadata(bootstrap, topic)
    t = md.topics.get(topic)
    if t is None or t.error is not None or len(t.partitions) != partitions:
        return None
    if any(p.leader < 0 or len(p.isrs) != replicas for p in t.partitions.values()):
        return None
    return md


