"""A log dir that fails with I/O errors on a three-broker cluster: the broker takes it offline,
the controller moves the leadership of its partitions to other brokers, and the broker keeps
serving the partitions of its other dir — nothing acknowledged lost, order kept. The dir is made
to fail as Kafka's own LogDirFailureTest does: it is replaced by a plain file, so the broker's
next write in it (a checkpoint) fails with an I/O error that is not a full disk."""

from __future__ import annotations

import os
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaAdminClient, TopicPartitionReplica

from logbroker.testing import ClusterProcess, wait_for

KAFKA_STORAGE_ERROR = 56


@pytest.fixture
def cluster(logbroker_zookeeper, tmp_path):
    dirs = [tmp_path / "b1-a", tmp_path / "b1-b"]
    cluster = ClusterProcess(tmp_path, zk_connect=f"{logbroker_zookeeper.connect_string}/c-{uuid.uuid4().hex[:12]}",
                             overrides={"replica.high.watermark.checkpoint.interval.ms": "200",
                                        "auto.leader.rebalance.enable": "false"},
                             broker_overrides={1: {"log.dirs": ",".join(map(str, dirs))}})
    yield cluster.start(), dirs
    cluster.close()


def broker_1_log_dirs(cluster: ClusterProcess) -> dict[str, dict]:
    admin = KafkaAdminClient(bootstrap_servers=cluster.brokers[1].bootstrap, client_id="tests-dir-failure")
    try:
        [answer] = admin.describe_log_dirs(brokers=[1])
    finally:
        admin.close()
    return {d["log_dir"]: d for d in answer["log_dirs"]}


def produce(bootstrap: str, topic: str, partition: int, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for value in values:
        producer.produce(topic, value, partition=partition)
    assert producer.flush(60) == 0


def consume(bootstrap: str, topic: str, partition: int, count: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, partition, 0)])
    values = []
    try:
        while len(values) < count:
            msg = consumer.poll(10)
            assert msg is not None, f"{len(values)} of {count} records of {topic}-{partition}"
            assert msg.error() is None, msg.error()
            values.append(msg.value())
    finally:
        consumer.close()
    return values


def test_a_failed_log_dir_moves_its_leaderships_and_the_broker_serves_on(cluster):
    cluster, dirs = cluster
    topic = "dir-failure"
    cluster.create_topic(topic, replica_assignment=[[1, 2, 3], [1, 2, 3]])
    layout = broker_1_log_dirs(cluster)
    held = {path: [p["partition_index"] for t in d["topics"] if t["name"] == topic for p in t["partitions"]]
            for path, d in layout.items()}
    assert sorted(held.values()) == [[0], [1]]  # one partition in each dir
    [failing] = [path for path, partitions in held.items() if partitions == [0]]
    first = [b"before-%d" % i for i in range(200)]
    for partition in (0, 1):
        produce(cluster.bootstrap, topic, partition, first)
    epoch_of_1 = cluster.partition_state(topic, 1).leader_epoch

    gone = f"{failing}.gone"
    os.rename(failing, gone)
    open(failing, "w").close()  # the dir is now a file: every write in it fails (ENOTDIR)

    wait_for(lambda: cluster.leader(topic, 0) in (2, 3) and 1 not in cluster.partition_state(topic, 0).isr,
             timeout_s=60, what="partition 0 led elsewhere, without broker 1 in its ISR")
    state_1 = cluster.partition_state(topic, 1)
    assert (state_1.leader, sorted(state_1.isr), state_1.leader_epoch) == (1, [1, 2, 3], epoch_of_1)

    after = [b"after-%d" % i for i in range(200)]
    for partition in (0, 1):
        produce(cluster.bootstrap, topic, partition, after)
        assert consume(cluster.bootstrap, topic, partition, 400) == first + after

    layout = broker_1_log_dirs(cluster)
    assert layout[failing]["error_code"] == KAFKA_STORAGE_ERROR and layout[failing]["topics"] == []
    [healthy] = [d for path, d in layout.items() if path != failing]
    assert healthy["error_code"] == 0
    assert [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in healthy["topics"]
            if t["name"] == topic] == [(topic, [1])]
    text = cluster.brokers[1].new_log_text()
    assert f"Stopped serving the 1 replica(s) in log dir {failing}" in text


def log_dirs_of(bootstrap: str, broker_id: int, topic: str) -> dict[str, list[dict]]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="tests-dir-move")
    try:
        [answer] = admin.describe_log_dirs({topic: [0]}, brokers=[broker_id])
    finally:
        admin.close()
    return {d["log_dir"]: [p for t in d["topics"] for p in t["partitions"]] for d in answer["log_dirs"]}


def test_a_followers_replica_moves_to_its_other_dir_and_stays_in_sync(cluster):
    """Broker 1 follows the partition; its replica moves between its two dirs while producers
    write with acks=all. Afterwards it is in the ISR, holds as many bytes as the leader, and
    once the leader is gone serves every record in order."""
    cluster, dirs = cluster
    topic = "follower-move"
    cluster.create_topic(topic, replica_assignment=[[2, 1, 3]])
    produce(cluster.bootstrap, topic, 0, [b"first-%d" % i for i in range(3000)])
    [source] = [path for path, replicas in log_dirs_of(cluster.bootstrap, 1, topic).items() if replicas]
    target = next(str(d) for d in dirs if str(d) != source)
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, client_id="tests-dir-move")
    try:
        result = admin.alter_replica_log_dirs({TopicPartitionReplica(topic, 0, 1): target})
    finally:
        admin.close()
    assert [e.errno for e in result.values()] == [0]
    produce(cluster.bootstrap, topic, 0, [b"second-%d" % i for i in range(3000)])
    wait_for(lambda: [p["is_future_key"] for p in log_dirs_of(cluster.bootstrap, 1, topic)[target]] == [False],
             timeout_s=60, what="broker 1's replica in its other dir")
    wait_for(lambda: sorted(cluster.partition_state(topic, 0).isr) == [1, 2, 3], what="a full ISR")

    def sizes() -> tuple[int, int]:
        [on_leader] = [p["partition_size"] for ps in log_dirs_of(cluster.bootstrap, 2, topic).values() for p in ps]
        [on_1] = [p["partition_size"] for ps in log_dirs_of(cluster.bootstrap, 1, topic).values() for p in ps]
        return on_leader, on_1
    wait_for(lambda: sizes()[0] == sizes()[1], what="broker 1 holding what the leader holds")
    assert log_dirs_of(cluster.bootstrap, 1, topic)[source] == []
    cluster.kill(2)  # broker 1, next in the assignment, leads from its moved replica
    assert cluster.wait_for_leader(topic, 0, not_in={2}) == 1
    assert consume(cluster.bootstrap, topic, 0, 6000) == ([b"first-%d" % i for i in range(3000)]
                                                          + [b"second-%d" % i for i in range(3000)])
