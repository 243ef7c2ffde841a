"""Share groups (KIP-932) on a three-broker ZooKeeper cluster: share-partition state lives with
the share coordinator (the leader of the key's `__share_group_state` partition), reached by the
partition leader through the share-group state APIs; killing that coordinator moves the state
with the partition's leadership, and nothing acknowledged is delivered again."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest

from logbroker.coordinator.share_state_log import SHARE_STATE_TOPIC, SharePartitionKey, partition_for

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "broker"))
from share_helpers import drain, set_group_configs, share_consumer  # noqa: E402

SHARE_CLUSTER = {"offsets.topic.replication.factor": "3", "offsets.topic.num.partitions": "3",
                 "share.coordinator.state.topic.replication.factor": "3",
                 "share.coordinator.state.topic.num.partitions": "3", "replica.lag.time.max.ms": "5000"}


def topic_id(cluster, topic: str):
    from confluent_kafka.admin import AdminClient
    from confluent_kafka import TopicCollection
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    described = admin.describe_topics(TopicCollection([topic]))[topic].result(20)
    return uuid.UUID(bytes=bytes(described.topic_id.get_most_significant_bits().to_bytes(8, "big", signed=True)
                                 + described.topic_id.get_least_significant_bits().to_bytes(8, "big", signed=True)))


@pytest.mark.logbroker_cluster(**SHARE_CLUSTER)
def test_killing_the_share_coordinator_keeps_acknowledged_records_acknowledged(logbroker_cluster):
    cluster = logbroker_cluster
    topic, group = f"q-{uuid.uuid4().hex[:8]}", f"workers-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, partitions=1, replication_factor=3, config={"min.insync.replicas": "2"})
    set_group_configs(cluster.bootstrap, group, share_auto_offset_reset="earliest")
    import confluent_kafka as ck
    producer = ck.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(20):
        producer.produce(topic, value=f"v{i}".encode(), partition=0)
    assert producer.flush(30) == 0

    acked = set()

    def accept_first_ten(_i, consumer, message):
        if message.offset() < 10:
            consumer.acknowledge(message, ck.AcknowledgeType.ACCEPT)
            acked.add(message.offset())
        else:
            consumer.acknowledge(message, ck.AcknowledgeType.RELEASE)

    first = share_consumer(cluster.bootstrap, group, topic, explicit=True)
    try:
        drain([first], 20, timeout_s=60, on_message=accept_first_ten)
        first.commit_sync()
    finally:
        first.close()
    assert acked == set(range(10))

    key = SharePartitionKey(group, topic_id(cluster, topic), 0)
    state_partition = partition_for(key, 3)
    coordinator = cluster.leader(SHARE_STATE_TOPIC, state_partition)
    assert coordinator > 0
    print(f"share coordinator {coordinator}, partition leader {cluster.leader(topic, 0)}")
    cluster.kill(coordinator)
    cluster.wait_for_leader(SHARE_STATE_TOPIC, state_partition, not_in={coordinator})
    cluster.wait_for_leader(topic, 0, not_in={coordinator})

    again = share_consumer(cluster.bootstrap, group, topic)
    try:
        got = drain([again], 10, timeout_s=90)[0]
        got += drain([again], 1, timeout_s=3)[0]
    finally:
        again.close()
    assert sorted(m.offset() for m in got) == list(range(10, 20))


@pytest.mark.logbroker_cluster(**SHARE_CLUSTER, **{"group.share.heartbeat.interval.ms": "1000"})
def test_subscriptions_follow_topics_created_and_created_again(logbroker_cluster):
    """A share consumer subscribed before its topic exists gets the records of all its
    partitions (led by different brokers) once it is created; deleted and created again, the
    topic delivers its new records from its first offset."""
    from confluent_kafka.admin import AdminClient
    cluster = logbroker_cluster
    topic, group = f"q-{uuid.uuid4().hex[:8]}", f"workers-{uuid.uuid4().hex[:8]}"
    set_group_configs(cluster.bootstrap, group, share_auto_offset_reset="earliest")
    consumer = share_consumer(cluster.bootstrap, group, topic)
    try:
        assert drain([consumer], 1, timeout_s=2)[0] == []
        cluster.create_topic(topic, partitions=3, replication_factor=2)
        produce_to_each(cluster.bootstrap, topic, 3, prefix="old")
        first = drain([consumer], 9, timeout_s=40)[0]
        consumer.commit_sync()
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})  # alive until the result is in
        admin.delete_topics([topic])[topic].result(30)
        cluster.create_topic(topic, partitions=3, replication_factor=2)
        produce_to_each(cluster.bootstrap, topic, 1, prefix="new")
        then = drain([consumer], 3, timeout_s=40)[0]
    finally:
        consumer.close()
    assert sorted((m.partition(), m.offset(), m.value()) for m in first) == [
        (p, i, f"old{p}-{i}".encode()) for p in range(3) for i in range(3)]
    assert sorted((m.partition(), m.offset(), m.value()) for m in then) == [
        (p, 0, f"new{p}-0".encode()) for p in range(3)]


def produce_to_each(bootstrap: str, topic: str, count: int, *, prefix: str) -> None:
    import confluent_kafka as ck
    producer = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for p in range(3):
        for i in range(count):
            producer.produce(topic, value=f"{prefix}{p}-{i}".encode(), partition=p)
    assert producer.flush(30) == 0
