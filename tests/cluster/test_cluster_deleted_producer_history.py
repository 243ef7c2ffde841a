"""KIP-360 on a ZooKeeper cluster: a transactional producer whose data batches were all removed by
DeleteRecords, its COMMIT marker left above the log start, goes on with its next sequence number
after each follower was killed and restarted (rebuilding producer state from its own log, past
the moved log start) and the leader was killed (a restarted follower leads).

As on Kafka: a follower's state comes from the batches it replicated, and recovery after kill -9
replays the whole segment holding the recovery point, data batches below the log start included
(LogLoader.recoverSegment, LogSegment.recover). flush.messages=1 keeps every replica's recovery
point at its log end, inside the active segment, and short checkpoint intervals put both the log
start and the recovery point on disk before each kill.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from logbroker.testing import ClusterProcess, wait_for
from offset_checkpoints import checkpointed
from test_restart_metadata import free_port
from transactional_clients import read_all, transactional_producer

pytestmark = pytest.mark.timeout(240)
TIMEOUT_S = 30


def test_a_producer_with_only_its_marker_above_the_log_start_goes_on_after_failovers(logbroker_zookeeper, tmp_path):
    # Fixed ports: the producer finds every broker again after its restart.
    cluster = ClusterProcess(tmp_path, zk_connect=f"{logbroker_zookeeper.connect_string}/h-{uuid.uuid4().hex[:8]}",
                             overrides={"log.flush.offset.checkpoint.interval.ms": "100",
                                        "log.flush.start.offset.checkpoint.interval.ms": "100",
                                        "transaction.state.log.num.partitions": "1",
                                        "replica.lag.time.max.ms": "3000"},
                             broker_overrides={b: {"listeners": f"PLAINTEXT://127.0.0.1:{free_port()}"} for b in (1, 2, 3)})
    with cluster:
        run_failovers(cluster)


def run_failovers(cluster: ClusterProcess) -> None:
    cluster.create_topic("history", config={"min.insync.replicas": "2", "flush.messages": "1"})
    bootstrap = cluster.bootstrap
    producer = transactional_producer(bootstrap, "txn-history")
    errors = []

    def deliver(err, _msg):
        if err:
            errors.append(err)

    producer.begin_transaction()
    for i in range(5):
        producer.produce("history", f"before-{i}".encode(), partition=0, on_delivery=deliver)
    producer.commit_transaction(TIMEOUT_S)  # data at offsets 0-4, the COMMIT marker at 5
    wait_for(lambda: len(read_all(bootstrap, "history", isolation="read_committed", expect=5, timeout_s=2)) == 5,
             what="the transaction committed")
    tp = TopicPartition("history", 0, 5)
    admin = AdminClient({"bootstrap.servers": bootstrap})  # alive while its future runs
    assert admin.delete_records([tp], operation_timeout=5)[tp].result(TIMEOUT_S).low_watermark == 5

    def on_disk(broker_id: int) -> bool:
        data_dir = cluster.brokers[broker_id].data_dir
        return (checkpointed(data_dir, "log-start-offset-checkpoint", "history") == 5
                and checkpointed(data_dir, "recovery-point-offset-checkpoint", "history") == 6)

    leader = cluster.leader("history", 0)
    for follower in sorted(set(cluster.brokers) - {leader}):
        wait_for(lambda: on_disk(follower), what=f"broker {follower}'s log start and recovery point on disk")
        cluster.kill(follower)
        cluster.start_broker(follower)
        cluster.wait_for_isr("history", 0)
    wait_for(lambda: on_disk(leader), what="the leader's log start and recovery point on disk")
    cluster.kill(leader)
    new_leader = cluster.wait_for_leader("history", 0, not_in={leader})

    for _ in range(2):  # sequence numbers 5 and 6 of the same producer epoch, to the new leader
        producer.begin_transaction()
        producer.produce("history", b"after", partition=0, on_delivery=deliver)
        producer.commit_transaction(TIMEOUT_S)
    assert errors == []
    assert cluster.leader("history", 0) == new_leader
    assert read_all(bootstrap, "history", isolation="read_committed", expect=2) == [(0, 6, b"after"), (0, 8, b"after")]
