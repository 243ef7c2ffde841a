"""Replication across three broker processes: acks=-1 waits for the ISR, and failover loses nothing
acknowledged."""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from cluster_helpers import fully_led, start_cluster, topic_metadata, wait_for


@pytest.fixture
def cluster(tmp_path, zk_connect):
    brokers = start_cluster(tmp_path, zk_connect, **{"replica.lag.time.max.ms": "10000"})
    yield brokers
    for broker in brokers:
        broker.kill()


def create_replicated_topic(cluster, name: str):
    admin = AdminClient({"bootstrap.servers": cluster[0].bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=3,
                                  config={"min.insync.replicas": "2"})])[name].result(10)
    return wait_for(lambda: fully_led(cluster[0].bootstrap, name, 1, 3))


def bootstrap(cluster) -> str:
    return ",".join(b.bootstrap for b in cluster if b.process.poll() is None)


def produce(cluster, topic: str, values, acked: list, *, pace_every: int = 0, **config) -> None:
    producer = Producer({"bootstrap.servers": bootstrap(cluster), "acks": "all",
                         "enable.idempotence": False, "linger.ms": 5, **config})

    def on_delivery(err, msg):
        if err is None:
            acked.append(msg.value())

    for i, value in enumerate(values):
        producer.produce(topic, value, partition=0, on_delivery=on_delivery)
        producer.poll(0)
        if pace_every and i % pace_every == 0:
            time.sleep(0.01)  # spread the writes over a few seconds, so a kill lands mid-stream
    assert producer.flush(60) == 0


def consume_all(cluster, topic: str, expected: int, timeout_s: float = 30.0) -> list[bytes]:
    """Read from offset 0 until `expected` distinct values arrived (a retried produce without
    idempotence may have written some twice) or the timeout."""
    consumer = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": f"check-{time.time()}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(set(values)) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
    finally:
        consumer.close()
    return values


def produce_killing_the_leader(cluster, topic: str, values, leader: int, *, kill_after: int) -> list[bytes]:
    """Produce `values` with acks=all, SIGKILLing broker `leader` once `kill_after` are acked;
    returns the acked values."""
    acked: list[bytes] = []

    def kill_once_records_are_acked():
        wait_for(lambda: len(acked) >= kill_after, timeout_s=30, interval_s=0.01)
        cluster[leader - 1].kill()

    killer = threading.Thread(target=kill_once_records_are_acked)
    killer.start()
    produce(cluster, topic, values, acked, pace_every=10, **{"message.timeout.ms": 60000})
    killer.join()
    return acked


def segment_bytes(broker, topic: str) -> bytes:
    return (broker.data_dir / f"{topic}-0" / "00000000000000000000.log").read_bytes()


def test_acks_all_records_are_on_every_isr_replica_byte_for_byte(cluster):
    create_replicated_topic(cluster, "acked")
    acked: list[bytes] = []
    produce(cluster, "acked", [f"record-{i}".encode() for i in range(2000)], acked)
    assert len(acked) == 2000

    leader_log = segment_bytes(cluster[0], "acked")  # any replica: all must converge
    wait_for(lambda: all(segment_bytes(b, "acked") == segment_bytes(cluster[0], "acked") for b in cluster)
             and len(segment_bytes(cluster[0], "acked")) >= len(leader_log))
    md = topic_metadata(cluster[1].bootstrap, "acked")
    assert sorted(md.topics["acked"].partitions[0].isrs) == [1, 2, 3]
    assert sorted(consume_all(cluster, "acked", 2000)) == sorted(acked)


def test_killing_the_leader_moves_leadership_to_an_isr_member_without_losing_acked_records(cluster):
    md = create_replicated_topic(cluster, "failover")
    old_leader = md.topics["failover"].partitions[0].leader
    values = [f"seq-{i:06d}".encode() for i in range(4000)]
    acked = produce_killing_the_leader(cluster, "failover", values, old_leader, kill_after=500)
    assert cluster[old_leader - 1].process.poll() is not None
    assert len(acked) > 500
    assert len(set(acked)) == len(values)  # the producer's retries got every record through

    survivor = next(b for b in cluster if b.process.poll() is None)
    md = wait_for(lambda: (lambda m: m if m.topics["failover"].partitions[0].leader not in (-1, old_leader)
                           else None)(topic_metadata(survivor.bootstrap, "failover")))
    partition = md.topics["failover"].partitions[0]
    assert partition.leader in partition.isrs

    consumed = consume_all(cluster, "failover", len(set(acked)))
    missing = set(acked) - set(consumed)
    assert not missing, f"{len(missing)} acknowledged records lost"


def test_a_restarted_old_leader_catches_up_byte_for_byte_and_rejoins_the_isr(tmp_path, zk_connect):
    cluster = start_cluster(tmp_path, zk_connect, **{"replica.lag.time.max.ms": "2000"})
    try:
        md = create_replicated_topic(cluster, "rejoin")
        old_leader = md.topics["rejoin"].partitions[0].leader
        acked: list[bytes] = []
        values = [f"seq-{i:06d}".encode() for i in range(2000)]

        def kill_once_records_are_acked():
            wait_for(lambda: len(acked) >= 300, timeout_s=30, interval_s=0.01)
            cluster[old_leader - 1].kill()

        killer = threading.Thread(target=kill_once_records_are_acked)
        killer.start()
        produce(cluster, "rejoin", values, acked, pace_every=10, **{"message.timeout.ms": 60000})
        killer.join()

        cluster[old_leader - 1].start()  # waits out its old ZooKeeper session, then follows
        survivor = next(b for i, b in enumerate(cluster) if i != old_leader - 1)
        wait_for(lambda: sorted(topic_metadata(survivor.bootstrap, "rejoin").topics["rejoin"]
                                .partitions[0].isrs) == [1, 2, 3], timeout_s=30)
        wait_for(lambda: len({segment_bytes(b, "rejoin") for b in cluster}) == 1, timeout_s=20)

        consumed = consume_all(cluster, "rejoin", len(set(acked)))
        assert not set(acked) - set(consumed)
    finally:
        for broker in cluster:
            broker.kill()
