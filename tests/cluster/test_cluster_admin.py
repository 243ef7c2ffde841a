"""Topic admin on a three-broker ZooKeeper cluster: partitions added, configs changed and topics
created or deleted through one broker reach every broker, in Kafka's znode layout, and the admin
answer comes once the change is visible."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kazoo.client import KazooClient
from kio.schema.describe_configs.v4.request import DescribeConfigsRequest, DescribeConfigsResource
from kio.schema.incremental_alter_configs.v1.request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from kio.static.primitive import i8

from cluster_helpers import fully_led, start_cluster, topic_metadata, wait_for
from raw_requests import send
from logbroker.clock import ManualClock
from logbroker.metadata.zk_config_changes import ConfigChangeListener
from logbroker.zookeeper_process import ZooKeeperProcess

TOPIC = i8(2)
SET = i8(0)
DYNAMIC_TOPIC_CONFIG = 1


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory):
    """Three brokers shared by this module's tests (each test uses its own topics), and a kazoo
    session in their chroot to read the znodes they write."""
    connect = f"{zookeeper.connect_string}/admin-{uuid.uuid4().hex[:12]}"
    brokers = start_cluster(tmp_path_factory.mktemp("cluster"), connect)
    zk = KazooClient(hosts=connect)
    try:
        wait_for(lambda: len(topic_metadata(brokers[0].bootstrap, None).brokers) == 3)
        zk.start(timeout=10)
        yield brokers, zk
    finally:
        zk.stop()
        zk.close()
        for broker in brokers:
            broker.kill()


def topic_configs(broker, topic: str) -> dict[str, tuple[str, int]]:
    """DescribeConfigs asked of this one broker: {name: (value, source)}."""
    response = send(broker, DescribeConfigsRequest(
        resources=(DescribeConfigsResource(resource_type=TOPIC, resource_name=topic, configuration_keys=None),)))
    result = response.results[0]
    assert result.error_code == 0, result.error_message
    return {c.name: (c.value, c.config_source) for c in result.configs}


def set_configs(broker, topic: str, configs: dict[str, str]) -> None:
    response = send(broker, IncrementalAlterConfigsRequest(validate_only=False, resources=(
        AlterConfigsResource(resource_type=TOPIC, resource_name=topic, configs=tuple(
            AlterableConfig(name=k, config_operation=SET, value=v) for k, v in configs.items())),)))
    assert response.responses[0].error_code == 0, response.responses[0].error_message


def controller_of(brokers):
    controller_id = topic_metadata(brokers[0].bootstrap, None).controller_id
    return brokers[controller_id - 1]


def led_partitions(bootstrap: str, topic: str) -> dict[int, int]:
    t = topic_metadata(bootstrap, topic).topics[topic]
    return {p.id: p.leader for p in t.partitions.values() if p.leader >= 0}


def test_added_partitions_get_leaders_on_every_broker_and_take_writes(cluster):
    brokers, _ = cluster
    admin = AdminClient({"bootstrap.servers": brokers[0].bootstrap})
    admin.create_topics([NewTopic("grow", num_partitions=2, replication_factor=2)],
                        operation_timeout=30)["grow"].result(30)
    # librdkafka sends CreateTopics and CreatePartitions to the controller; given an operation
    # timeout, the answer waits until the controller's own metadata has every partition led.
    controller = controller_of(brokers)
    assert sorted(led_partitions(controller.bootstrap, "grow")) == [0, 1]

    admin.create_partitions([NewPartitions("grow", 5)], operation_timeout=30)["grow"].result(30)
    assert sorted(led_partitions(controller.bootstrap, "grow")) == [0, 1, 2, 3, 4]
    for broker in brokers:
        wait_for(lambda: fully_led(broker.bootstrap, "grow", 5, 2))

    producer = Producer({"bootstrap.servers": brokers[2].bootstrap, "acks": "all"})
    delivered = []
    for partition in range(5):
        for i in range(10):
            producer.produce("grow", f"{partition}-{i}".encode(), partition=partition,
                             on_delivery=lambda err, msg: delivered.append((err, msg.partition())))
    assert producer.flush(30) == 0
    assert [err for err, _ in delivered if err is not None] == []
    assert sorted(p for _, p in delivered) == sorted(list(range(5)) * 10)

    consumer = Consumer({"bootstrap.servers": brokers[1].bootstrap, "group.id": "grow-check",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition("grow", p, 0) for p in (2, 3, 4)])
    values = []
    deadline_polls = 200
    while len(values) < 30 and deadline_polls:
        deadline_polls -= 1
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            values.append(msg.value().decode())
    consumer.close()
    assert sorted(values) == sorted(f"{p}-{i}" for p in (2, 3, 4) for i in range(10))


def test_adding_partitions_refuses_a_decrease_with_the_current_count(cluster):
    brokers, _ = cluster
    admin = AdminClient({"bootstrap.servers": brokers[0].bootstrap})
    admin.create_topics([NewTopic("shrink", num_partitions=3, replication_factor=1)])["shrink"].result(30)
    with pytest.raises(Exception, match="currently has 3 partitions"):
        admin.create_partitions([NewPartitions("shrink", 2)])["shrink"].result(30)


def test_topic_config_change_through_one_broker_reaches_another(cluster):
    brokers, zk = cluster
    admin = AdminClient({"bootstrap.servers": brokers[0].bootstrap})
    admin.create_topics([NewTopic("cfg", num_partitions=1, replication_factor=3)])["cfg"].result(30)
    for broker in brokers:
        wait_for(lambda: fully_led(broker.bootstrap, "cfg", 1, 3))
    # Another engineer's entity type in the same notification queue must be skipped, not stall it.
    zk.create("/config/changes/config_change_", b'{"version":2,"entity_path":"users/alice"}', sequence=True)

    set_configs(brokers[0], "cfg", {"retention.ms": "3600000", "segment.bytes": "1024",
                                    "cleanup.policy": "compact,delete"})

    assert json.loads(zk.get("/config/topics/cfg")[0]) == {"version": 1, "config": {
        "retention.ms": "3600000", "segment.bytes": "1024", "cleanup.policy": "compact,delete"}}
    changes = [json.loads(zk.get(f"/config/changes/{c}")[0]) for c in sorted(zk.get_children("/config/changes"))]
    assert changes[-1] == {"version": 2, "entity_path": "topics/cfg"}
    expected = {"retention.ms": ("3600000", DYNAMIC_TOPIC_CONFIG), "segment.bytes": ("1024", DYNAMIC_TOPIC_CONFIG),
                "cleanup.policy": ("compact,delete", DYNAMIC_TOPIC_CONFIG)}
    wait_for(lambda: {k: v for k, v in topic_configs(brokers[2], "cfg").items() if k in expected} == expected)

    # The follower on broker 3 now rolls its replica's segments at 1 KiB too.
    producer = Producer({"bootstrap.servers": brokers[1].bootstrap, "acks": "all", "linger.ms": 0})
    for i in range(40):
        producer.produce("cfg", key=f"k{i}".encode(), value=b"x" * 100, partition=0)
        producer.flush(10)
    segments = lambda: sorted((brokers[2].data_dir / "cfg-0").glob("*.log"))  # noqa: E731
    wait_for(lambda: len(segments()) >= 3)


def test_deleted_topic_is_gone_when_the_answer_comes_and_can_be_recreated(cluster):
    brokers, _ = cluster
    admin = AdminClient({"bootstrap.servers": brokers[0].bootstrap})
    admin.create_topics([NewTopic("gone", num_partitions=2, replication_factor=3)])["gone"].result(30)
    admin.delete_topics(["gone"], operation_timeout=30)["gone"].result(30)
    controller = controller_of(brokers)
    assert "gone" not in topic_metadata(controller.bootstrap, None).topics
    admin.create_topics([NewTopic("gone", num_partitions=1, replication_factor=3)],
                        operation_timeout=30)["gone"].result(30)
    assert sorted(led_partitions(controller.bootstrap, "gone")) == [0]


def test_topics_describe_shows_leader_replicas_and_isr_of_a_cluster(cluster):
    brokers, _ = cluster
    admin = AdminClient({"bootstrap.servers": brokers[0].bootstrap})
    admin.create_topics([NewTopic("described", num_partitions=3, replication_factor=3)])["described"].result(30)
    wait_for(lambda: fully_led(brokers[0].bootstrap, "described", 3, 3))
    described = subprocess.run([sys.executable, "-m", "logbroker.cli", "topics", "--describe", "--topic",
                                "described", "--bootstrap-server", brokers[0].bootstrap],
                               capture_output=True, text=True, timeout=90)
    assert described.returncode == 0, described.stderr
    lines = described.stdout.splitlines()
    assert re.match(r"Topic: described\tTopicId: \S+\tPartitionCount: 3\tReplicationFactor: 3\t", lines[0])
    metadata = topic_metadata(brokers[0].bootstrap, "described").topics["described"].partitions
    assert lines[1:] == [f"\tTopic: described\tPartition: {p}\tLeader: {metadata[p].leader}"
                         f"\tReplicas: {','.join(map(str, metadata[p].replicas))}"
                         f"\tIsr: {','.join(map(str, metadata[p].isrs))}" for p in range(3)]
    assert all(sorted(metadata[p].replicas) == [1, 2, 3] for p in range(3))
    assert {metadata[p].leader for p in range(3)} == {1, 2, 3}  # round-robin leaders


def test_admin_request_waiting_on_a_frozen_zookeeper_does_not_stall_produce(tmp_path):
    """CreateTopics writes ZooKeeper off the event loop: while ZooKeeper is frozen (SIGSTOP) and
    the CreateTopics answer cannot come, the same broker still answers produce requests."""
    with ZooKeeperProcess(tmp_path / "zookeeper") as zookeeper:
        # A long session, so that the frozen ZooKeeper fails no request while the test looks.
        broker = start_cluster(tmp_path, f"{zookeeper.connect_string}/frozen", count=1,
                               **{"zookeeper.session.timeout.ms": "30000"})[0]
        try:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            admin.create_topics([NewTopic("live", 1, 1)], operation_timeout=30)["live"].result(30)
            producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": 1, "linger.ms": 0})
            errors = []

            def produce_one() -> int:
                producer.produce("live", b"v", on_delivery=lambda err, msg: errors.append(err))
                return producer.flush(30)

            assert produce_one() == 0
            os.kill(zookeeper.process.pid, signal.SIGSTOP)
            try:
                pending = admin.create_topics([NewTopic("stalled", 1, 1)], operation_timeout=30,
                                              request_timeout=60)["stalled"]
                assert [produce_one() for _ in range(5)] == [0] * 5
                assert not pending.done()
            finally:
                os.kill(zookeeper.process.pid, signal.SIGCONT)
            assert errors == [None] * 6
            pending.result(60)
        finally:
            broker.kill()


# -- the config-change queue (metadata/zk_config_changes.py), over an in-memory /config/changes --
class ChangeQueue:
    """The three store calls the listener makes, over {name: (data, ctime_ms)}."""

    def __init__(self, changes: dict[str, tuple[bytes, int]]) -> None:
        self.changes = changes

    def config_change(self, name: str):
        return self.changes.get(name)

    def delete_config_change(self, name: str) -> None:
        self.changes.pop(name, None)


def test_notifications_run_once_in_sequence_order_and_expired_ones_are_purged():
    topic = lambda name: json.dumps({"version": 2, "entity_path": f"topics/{name}"}).encode()  # noqa: E731
    queue = ChangeQueue({
        "config_change_0000000002": (topic("b"), 1_000),
        "config_change_0000000001": (topic("a"), 0),
        "config_change_0000000003": (b'{"version":2,"entity_path":"users/alice"}', 1_000),
        "config_change_0000000004": (b"not json", 1_000),
        "config_change_0000000005": (b'{"version":1,"entity_type":"topics","entity_name":"c"}', 1_000),
    })
    applied = []
    listener = ConfigChangeListener(queue, {"topics": applied.append}, clock=ManualClock(1_500),
                                    expiration_ms=1_000)
    listener.process(sorted(queue.changes))
    assert applied == ["a", "b", "c"]
    assert sorted(queue.changes) == [f"config_change_000000000{i}" for i in (2, 3, 4, 5)]  # 1 expired

    queue.changes["config_change_0000000006"] = (topic("d"), 1_400)
    listener.process(sorted(queue.changes))
    assert applied == ["a", "b", "c", "d"]
