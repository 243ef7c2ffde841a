"""Helpers for the cluster tests: three broker processes on one ZooKeeper chroot, and polling."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient

from logbroker.testing import CLUSTER_TEST_OVERRIDES as CLUSTER_OVERRIDES
from logbroker.testing import BrokerProcess, wait_for  # noqa: F401 - the cluster tests import it from here


def start_cluster(tmp_path, zk_connect, count=3, **extra) -> list[BrokerProcess]:
    brokers = []
    for broker_id in range(1, count + 1):
        overrides = {**CLUSTER_OVERRIDES, "broker.id": str(broker_id), "zookeeper.connect": zk_connect,
                     **extra}
        brokers.append(BrokerProcess(tmp_path / f"broker-{broker_id}", overrides=overrides).start())
    return brokers


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


