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
from spark_kafka import new_topic_name, produce

from logbroker.spark.cluster import ClusterView
from logbroker.spark.fetch import OffsetRange, read_range
from logbroker.spark.options import parse_source_options
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
