"""flush.before.ack on three brokers: acks=all records are fsynced on every ISR member.

Each broker writes its recovery points (everything below is fsynced) to
recovery-point-offset-checkpoint every 100 ms here. With the setting, the leader's group commits
and the followers' fsync-before-fetch bring all three to the log end; without it (and Kafka's
infinite flush.ms) nothing is fsynced while the brokers run. That the answer itself waits for the
fsyncs is shown in tests/replication/test_fsync_ack.py; a kill -9 cannot show it, since the page
cache outlives the process. What a kill -9 of the leader can show is that failover works with the
setting on: nothing acknowledged is lost, and the new leader and its follower go on fsyncing.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as ClientTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from cluster_helpers import fully_led, start_cluster, wait_for
from test_replication import bootstrap, consume_all, produce_killing_the_leader
from logbroker.storage.checkpoints import OffsetCheckpointFile
from logbroker.types import TopicPartition

RECORDS = 500


@pytest.fixture
def cluster(tmp_path, zk_connect):
    brokers = start_cluster(tmp_path, zk_connect, **{"log.flush.offset.checkpoint.interval.ms": "100"})
    yield brokers
    for broker in brokers:
        broker.kill()


def recovery_point(broker, topic: str) -> int:
    path = broker.data_dir / "recovery-point-offset-checkpoint"
    points = OffsetCheckpointFile(path).read() if path.exists() else {}
    return points.get(TopicPartition(topic, 0), -1)


def test_acks_all_records_are_fsynced_on_every_replica(cluster):
    admin = AdminClient({"bootstrap.servers": cluster[0].bootstrap})
    # Every broker registered, or RF=3 cannot be placed yet.
    wait_for(lambda: len(admin.list_topics(timeout=10).brokers) == 3)
    topics = [NewTopic("on", 1, 3, config={"min.insync.replicas": "2", "flush.before.ack": "true"}),
              NewTopic("off", 1, 3, config={"min.insync.replicas": "2"})]
    for future in admin.create_topics(topics).values():
        future.result(10)
    for topic in ("on", "off"):
        wait_for(lambda: fully_led(cluster[0].bootstrap, topic, 1, 3))

    producer = Producer({"bootstrap.servers": ",".join(b.bootstrap for b in cluster), "acks": "all",
                         "linger.ms": 1})
    acked = {"on": [], "off": []}

    def on_delivery(err, msg):
        assert err is None, err
        acked[msg.topic()].append(msg.offset())

    for i in range(RECORDS):
        for topic in ("on", "off"):
            producer.produce(topic, b"record-%d" % i, partition=0, on_delivery=on_delivery)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert sorted(acked["on"]) == sorted(acked["off"]) == list(range(RECORDS))

    wait_for(lambda: all(recovery_point(b, "on") == RECORDS for b in cluster), timeout_s=30)
    assert [recovery_point(b, "off") for b in cluster] == [0, 0, 0]


def test_a_killed_leader_loses_no_acked_record_and_the_survivors_keep_fsyncing(cluster):
    admin = AdminClient({"bootstrap.servers": cluster[0].bootstrap})
    wait_for(lambda: len(admin.list_topics(timeout=10).brokers) == 3)
    admin.create_topics([NewTopic("durable", 1, 3, config={"min.insync.replicas": "2",
                                                           "flush.before.ack": "true"})])["durable"].result(10)
    md = wait_for(lambda: fully_led(cluster[0].bootstrap, "durable", 1, 3))
    old_leader = md.topics["durable"].partitions[0].leader
    values = [f"seq-{i:06d}".encode() for i in range(2000)]
    acked = produce_killing_the_leader(cluster, "durable", values, old_leader, kill_after=300)
    assert len(set(acked)) == len(values)
    consumed = consume_all(cluster, "durable", len(values))
    assert not set(acked) - set(consumed)

    consumer = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": "watermarks"})
    high_watermark = consumer.get_watermark_offsets(ClientTopicPartition("durable", 0), timeout=10)[1]
    consumer.close()
    survivors = [b for b in cluster if b.process.poll() is None]
    wait_for(lambda: all(recovery_point(b, "durable") == high_watermark for b in survivors), timeout_s=30)


def test_rolled_segments_are_fsynced_on_followers_too(cluster):
    """Without flush.before.ack or a flush policy, a segment is fsynced once it rolls — on the
    followers as on the leader (Kafka's followers flush their rolled segments too), so what
    recovery must scan after a crash is bounded on every replica."""
    admin = AdminClient({"bootstrap.servers": cluster[0].bootstrap})
    wait_for(lambda: len(admin.list_topics(timeout=10).brokers) == 3)
    admin.create_topics([NewTopic("rolled", 1, 3, config={"segment.bytes": "16384"})])["rolled"].result(10)
    wait_for(lambda: fully_led(cluster[0].bootstrap, "rolled", 1, 3))
    producer = Producer({"bootstrap.servers": ",".join(b.bootstrap for b in cluster), "acks": "all",
                         "linger.ms": 0, "batch.size": 4096})  # a batch must fit a segment
    errors = []
    for i in range(400):  # ~90 KB: about 70 records to a 16 KiB segment, five rolls or more
        producer.produce("rolled", b"%06d" % i + bytes(194), partition=0,
                         on_delivery=lambda err, _msg: err is not None and errors.append(err))
        producer.poll(0)
    assert producer.flush(60) == 0
    assert not errors, errors[:3]
    # Every replica's recovery point reaches its active segment: within two segments of the end.
    wait_for(lambda: all(recovery_point(b, "rolled") >= 400 - 120 for b in cluster), timeout_s=30,
             what="every replica's recovery point past its rolled segments")
