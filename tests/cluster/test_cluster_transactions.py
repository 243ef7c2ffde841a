"""Transactions on a ZooKeeper cluster (RF=3): followers replicate the markers and build the same
.txnindex as the leader, and a new leader after a SIGKILL answers the same LSO and aborted
transactions. Transactional batches and markers are sent as raw requests to the leader (the
transaction coordinator is not part of this test)."""

from __future__ import annotations

import pytest
from kio.index import load_request_schema

from logbroker.records.builder import build_batch
from logbroker.server.responses import build
from raw_requests import send
from replica_checks import partition_dir, wait_until_replicas_converge

pytestmark = pytest.mark.timeout(180)


def request(broker, api_key: int, version: int, **fields):
    return send(broker, build(load_request_schema(api_key, version), fields))


def produce(broker, topic: str, batch: bytes) -> int:
    response = request(broker, 0, 9, transactional_id=None, acks=-1, timeout=10_000, topic_data=[
        {"name": topic, "partition_data": [{"index": 0, "records": batch}]}])
    answer = response.responses[0].partition_responses[0]
    assert int(answer.error_code) == 0, answer
    return int(answer.base_offset)


def abort(broker, topic: str, pid: int, epoch: int) -> None:
    response = request(broker, 27, 1, markers=[{
        "producer_id": pid, "producer_epoch": epoch, "transaction_result": False,
        "coordinator_epoch": 0, "topics": [{"name": topic, "partition_indexes": [0]}]}])
    assert int(response.markers[0].topics[0].partitions[0].error_code) == 0


def fetch_committed(broker, topic: str):
    response = request(broker, 1, 12, replica_id=-1, max_wait=0, min_bytes=1, max_bytes=1 << 20,
                       isolation_level=1, session_id=0, session_epoch=-1,
                       topics=[{"topic": topic, "partitions": [{"partition": 0, "fetch_offset": 0,
                                                                "partition_max_bytes": 1 << 20}]}],
                       forgotten_topics_data=[], rack_id="")
    return response.responses[0].partitions[0]


@pytest.mark.logbroker_cluster(**{"replica.lag.time.max.ms": "3000"})
def test_followers_build_the_txn_index_and_a_new_leader_keeps_the_lso(logbroker_cluster):
    cluster = logbroker_cluster
    cluster.create_topic("txn", config={"min.insync.replicas": "2"})
    leader_id = cluster.leader("txn", 0)
    leader = cluster.brokers[leader_id]
    init = request(leader, 22, 4, transactional_id=None, transaction_timeout=60_000, producer_id=-1,
                   producer_epoch=-1)
    pid, epoch = int(init.producer_id), int(init.producer_epoch)
    batch = lambda seq, value: build_batch([(b"k", value)], producer_id=pid, producer_epoch=epoch,  # noqa: E731
                                           base_sequence=seq, transactional=True)
    assert produce(leader, "txn", batch(0, b"aborted")) == 0
    abort(leader, "txn", pid, epoch)                                   # marker at 1
    assert produce(leader, "txn", batch(1, b"open")) == 2              # left open

    wait_until_replicas_converge(cluster, "txn", 0)
    indexes = {b: (partition_dir(cluster, b, "txn", 0) / f"{0:020d}.txnindex").read_bytes()
               for b in cluster.brokers}
    assert len(set(indexes.values())) == 1
    assert len(indexes[leader_id]) == 34

    cluster.kill(leader_id)
    new_leader = cluster.wait_for_leader("txn", 0, not_in={leader_id})
    data = fetch_committed(cluster.brokers[new_leader], "txn")
    assert int(data.error_code) == 0
    assert int(data.last_stable_offset) == 2
    assert [(int(a.producer_id), int(a.first_offset)) for a in data.aborted_transactions] == [(pid, 0)]
