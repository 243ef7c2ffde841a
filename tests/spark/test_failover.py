"""The source through a leader failover: the driver's offset planning and a task's read of a
range go on with the new leader instead of failing the query.

After a SIGKILL the cluster answers LEADER_NOT_AVAILABLE for a partition without a live replica
in its ISR until a leader is back; Kafka's clients retry that, and so must the source. These tests make a partition leaderless for a few seconds (its
only replica killed, then restarted) and call the source's functions directly (no Spark),
against a real three-broker cluster.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

import pyarrow as pa
import pytest
from confluent_kafka import TopicPartition
from spark_kafka import consume_all, new_topic_name, produce

from logbroker.coordinator.offsets_schema import partition_for
from logbroker.spark import clients, exactly_once

from logbroker.spark.cluster import ClusterView
from logbroker.spark.fetch import OffsetRange, read_range
from logbroker.spark.options import parse_sink_options, parse_source_options
from logbroker.testing import wait_for

PER_PARTITION = 200

pytestmark = pytest.mark.logbroker_cluster(brokers=3)


def one_replica_topic(cluster) -> str:
    """Partition p lives on broker p + 1 alone, so killing that broker leaves it leaderless."""
    topic = new_topic_name()
    cluster.create_topic(topic, replica_assignment=[[1], [2], [3]])
    produce(cluster.bootstrap, topic, [{"value": f"{p}-{i:04d}".encode(), "partition": p}
                                       for i in range(PER_PARTITION) for p in range(3)])
    return topic


@contextmanager
def leaderless_for_a_while(cluster, topic: str, partition: int, seconds: float = 3.0):
    """Kill the partition's only replica, wait until the controller has recorded it leaderless
    (its clients then get LEADER_NOT_AVAILABLE), and restart it `seconds` into the block."""
    broker = cluster.leader(topic, partition)
    cluster.kill(broker)
    wait_for(lambda: cluster.leader(topic, partition) == -1, what="partition without a leader")
    restart = threading.Timer(seconds, cluster.start_broker, (broker,))
    restart.start()
    try:
        yield
    finally:
        restart.join()


def test_offsets_are_planned_once_a_leaderless_partition_is_back(logbroker_cluster):
    cluster = logbroker_cluster
    topic = one_replica_topic(cluster)
    options = parse_source_options({"kafka.bootstrap.servers": cluster.bootstrap,
                                    "subscribe": topic}, streaming=True)
    with ClusterView(options) as view:
        tps = view.topic_partitions()
        with leaderless_for_a_while(cluster, topic, 0):
            assert view.latest(tps) == {(topic, p): PER_PARTITION for p in range(3)}
        assert view.earliest(tps) == {(topic, p): 0 for p in range(3)}


def test_a_task_reads_its_whole_range_once_a_leaderless_partition_is_back(logbroker_cluster):
    cluster = logbroker_cluster
    topic = one_replica_topic(cluster)
    options = parse_source_options({"kafka.bootstrap.servers": cluster.bootstrap,
                                    "subscribe": topic}, streaming=False)
    with leaderless_for_a_while(cluster, topic, 1):
        batches = list(read_range(options, OffsetRange(topic=topic, partition=1, from_offset=50,
                                                       until_offset=PER_PARTITION)))
    table = pa.Table.from_batches(batches)
    assert table.column("offset").to_pylist() == list(range(50, PER_PARTITION))
    assert table.column("value").to_pylist() == [f"1-{i:04d}".encode()
                                                 for i in range(50, PER_PARTITION)]


@pytest.mark.logbroker_cluster(brokers=3, **{"offsets.topic.replication.factor": "3"})
def test_sink_gives_up_a_producer_waiting_for_a_group_coordinator_that_left(logbroker_cluster,
                                                                          monkeypatch):
    """librdkafka 2.16 waits forever in send_offsets_to_transaction, past its timeout, when the
    group coordinator it remembers has left the cluster's metadata (its issues #5456, #5511):
    the sink must give that producer up and commit the micro-batch with a new one."""
    cluster = logbroker_cluster
    sink = new_topic_name()
    cluster.create_topic(sink, partitions=1, replication_factor=3)
    monkeypatch.setattr(exactly_once, "OFFSETS_WATCHDOG_S", 5.0)
    options = parse_sink_options({"kafka.bootstrap.servers": cluster.bootstrap, "topic": sink})
    txn_id, marker = f"stuck-{sink}", TopicPartition(sink, 0)

    def rows(batch_id: int):
        return iter([pa.record_batch({"value": [f"{batch_id}-{i}".encode() for i in range(10)]})])

    assert exactly_once._write(options, txn_id, 0, marker, rows(0)).records == 10
    [session] = [s for idle in clients._idle.values() for s in idle
                 if isinstance(s, exactly_once.TransactionalSession)]
    coordinator = cluster.leader("__consumer_offsets", partition_for(txn_id, 50))
    cluster.kill(coordinator)
    wait_for(lambda: coordinator not in cluster.registered(), what="coordinator unregistered")
    # The cached producer learns that the broker left (librdkafka decommissions it) while it
    # still remembers it as the group's coordinator.
    wait_for(lambda: coordinator not in session.producer.list_topics(timeout=10).brokers,
             what="the producer's metadata without the coordinator")

    assert exactly_once._write(options, txn_id, 1, marker, rows(1)).records == 10
    assert exactly_once._write(options, txn_id, 1, marker, rows(1)).skipped
    values = sorted(r["value"] for r in consume_all(cluster.bootstrap, sink, 1,
                                                    isolation_level="read_committed"))
    assert values == sorted(f"{b}-{i}".encode() for b in (0, 1) for i in range(10))
