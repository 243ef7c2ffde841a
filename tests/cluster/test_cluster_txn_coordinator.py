"""Transactions across a three-broker ZooKeeper cluster: RF=3, min.insync.replicas=2, acks=all.
The transaction coordinator is the leader of the id's `__transaction_state` partition; markers
reach the leaders of the transaction's partitions over the inter-broker listener."""

from __future__ import annotations

import pytest
import transactional_clients
from confluent_kafka import KafkaException, Producer

from logbroker.coordinator import transaction_log
from logbroker.testing import wait_for

TXN_CLUSTER = {"transaction.state.log.num.partitions": "3", "transaction.state.log.replication.factor": "3",
               "transaction.state.log.min.isr": "2", "offsets.topic.replication.factor": "3",
               "offsets.topic.num.partitions": "3", "replica.lag.time.max.ms": "5000",
               "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"}
TOPIC_CONFIG = {"min.insync.replicas": "2"}


def read_committed(bootstrap: str, topic: str, partitions: int, *, expect: int, timeout_s: float = 60) -> list[bytes]:
    records = transactional_clients.read_all(bootstrap, topic, isolation="read_committed", partitions=partitions,
                                             expect=expect, timeout_s=timeout_s)
    return [value for _, _, value in records]


def transactional_producer(bootstrap: str, txn_id: str, timeout_ms: int = 10_000) -> Producer:
    return transactional_clients.transactional_producer(bootstrap, txn_id, init_timeout_s=60, acks="all",
                                                        **{"transaction.timeout.ms": timeout_ms})


@pytest.mark.logbroker_cluster(**TXN_CLUSTER)
def test_commit_and_abort_across_partitions_led_by_different_brokers(logbroker_cluster):
    cluster = logbroker_cluster
    cluster.create_topic("ctx", partitions=3, replication_factor=3, config=TOPIC_CONFIG)
    assert len({cluster.leader("ctx", p) for p in range(3)}) > 1
    producer = transactional_producer(cluster.bootstrap, "ctx-id")
    producer.begin_transaction()
    for i in range(30):
        producer.produce("ctx", value=f"c{i}".encode(), partition=i % 3)
    producer.commit_transaction(60)
    producer.begin_transaction()
    for i in range(30):
        producer.produce("ctx", value=f"a{i}".encode(), partition=i % 3)
    producer.flush(60)
    producer.abort_transaction(60)
    producer.begin_transaction()
    producer.produce("ctx", value=b"last", partition=0)
    producer.commit_transaction(60)
    values = read_committed(cluster.bootstrap, "ctx", 3, expect=31)
    assert sorted(values) == sorted([f"c{i}".encode() for i in range(30)] + [b"last"])


def coordinator_of(cluster, txn_id: str) -> int:
    return cluster.leader("__transaction_state", transaction_log.partition_for(txn_id, 3))


@pytest.mark.logbroker_cluster(**TXN_CLUSTER)
def test_coordinator_killed_mid_transaction_loses_no_commit_and_exposes_no_abort(logbroker_cluster):
    cluster = logbroker_cluster
    cluster.create_topic("ctk", partitions=3, replication_factor=3, config=TOPIC_CONFIG)
    producer = transactional_producer(cluster.bootstrap, "ctk-id", timeout_ms=30_000)
    producer.begin_transaction()
    for i in range(20):
        producer.produce("ctk", value=f"committed-{i}".encode(), partition=i % 3)
    producer.commit_transaction(60)
    producer.begin_transaction()
    for i in range(20):
        producer.produce("ctk", value=f"open-{i}".encode(), partition=i % 3)
    producer.flush(60)
    victim = coordinator_of(cluster, "ctk-id")
    cluster.kill(victim)
    wait_for(lambda: coordinator_of(cluster, "ctk-id") not in (-1, victim), timeout_s=60,
             what="a new transaction coordinator")
    try:
        producer.commit_transaction(60)
        committed_open = True
    except KafkaException as exc:
        # The new coordinator may have aborted it on its timeout first (and fenced the producer):
        # all or nothing either way.
        committed_open = False
        if not exc.args[0].fatal():
            producer.abort_transaction(60)
    survivors = ",".join(b.bootstrap for b in cluster.brokers.values() if b.running)
    expected = [f"committed-{i}".encode() for i in range(20)]
    if committed_open:
        expected += [f"open-{i}".encode() for i in range(20)]
    values = read_committed(survivors, "ctk", 3, expect=len(expected))
    assert sorted(values) == sorted(expected)
    cluster.start_broker(victim)
    after = transactional_producer(cluster.bootstrap, "ctk-id")
    after.begin_transaction()
    after.produce("ctk", value=b"after", partition=1)
    after.commit_transaction(60)
    values = read_committed(cluster.bootstrap, "ctk", 3, expect=len(expected) + 1)
    assert sorted(values) == sorted(expected + [b"after"])


@pytest.mark.logbroker_cluster(**TXN_CLUSTER)
def test_partition_leader_killed_mid_transaction(logbroker_cluster):
    cluster = logbroker_cluster
    cluster.create_topic("ctl", partitions=1, replication_factor=3, config=TOPIC_CONFIG)
    leader = cluster.leader("ctl", 0)
    transactional_producer(cluster.bootstrap, "ctl-setup")  # creates __transaction_state
    for p in range(3):
        cluster.wait_for_isr("__transaction_state", p)
    txn_id = next(t for t in (f"ctl-{i}" for i in range(100)) if coordinator_of(cluster, t) != leader)
    producer = transactional_producer(cluster.bootstrap, txn_id)
    producer.begin_transaction()
    for i in range(20):
        producer.produce("ctl", value=f"v{i}".encode())
    producer.flush(60)
    cluster.kill(leader)
    cluster.wait_for_leader("ctl", 0, not_in={leader})
    producer.commit_transaction(60)
    survivors = ",".join(b.bootstrap for b in cluster.brokers.values() if b.running)
    assert sorted(read_committed(survivors, "ctl", 1, expect=20)) == sorted(f"v{i}".encode() for i in range(20))


@pytest.mark.logbroker_cluster(**TXN_CLUSTER)
def test_leader_verifies_with_a_remote_coordinator_before_the_first_transactional_batch(logbroker_cluster):
    from kio.schema.add_partitions_to_txn.v3.request import AddPartitionsToTxnRequest, AddPartitionsToTxnTopic
    from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest
    from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
    from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
    from raw_requests import send

    from logbroker.records.builder import build_batch
    import datetime

    cluster = logbroker_cluster
    cluster.create_topic("ctv", partitions=1, replication_factor=3, config=TOPIC_CONFIG)
    leader = cluster.leader("ctv", 0)
    anyone = cluster.brokers[leader]
    send(anyone, FindCoordinatorRequest(key="ctv-setup", key_type=1))  # creates __transaction_state
    for p in range(3):
        cluster.wait_for_isr("__transaction_state", p)
    txn_id = next(t for t in (f"ctv-{i}" for i in range(100)) if coordinator_of(cluster, t) != leader)
    coordinator = cluster.brokers[coordinator_of(cluster, txn_id)]
    init = send(coordinator, InitProducerIdRequest(transactional_id=txn_id,
                                                   transaction_timeout=datetime.timedelta(seconds=60),
                                                   producer_id=-1, producer_epoch=-1))
    assert init.error_code == 0
    pid, epoch = init.producer_id, init.producer_epoch

    def produce(sequence: int) -> int:
        batch = build_batch([(None, b"v")], producer_id=pid, producer_epoch=epoch, base_sequence=sequence,
                            transactional=True)
        response = send(cluster.brokers[leader], ProduceRequest(
            transactional_id=txn_id, acks=-1, timeout=datetime.timedelta(seconds=10),
            topic_data=(TopicProduceData(name="ctv", partition_data=(
                PartitionProduceData(index=0, records=batch),)),)))
        return int(response.responses[0].partition_responses[0].error_code)

    assert produce(0) == 48  # INVALID_TXN_STATE: the coordinator (another broker) says it is not added
    added = send(coordinator, AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=(AddPartitionsToTxnTopic(name="ctv", partitions=(0,)),)))
    assert int(added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code) == 0
    assert produce(0) == 0


@pytest.mark.logbroker_cluster(**TXN_CLUSTER)
def test_concurrent_transactions_commit_through_batched_markers(logbroker_cluster):
    import threading
    cluster = logbroker_cluster
    cluster.create_topic("ctc", partitions=3, replication_factor=3, config=TOPIC_CONFIG)
    producers = [transactional_producer(cluster.bootstrap, f"ctc-{i}") for i in range(4)]
    errors = []

    def run(index: int, producer: Producer) -> None:
        try:
            for round_ in range(5):
                producer.begin_transaction()
                for p in range(3):
                    producer.produce("ctc", value=f"{index}-{round_}-{p}".encode(), partition=p)
                if round_ == 2:
                    producer.abort_transaction(60)
                else:
                    producer.commit_transaction(60)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
    threads = [threading.Thread(target=run, args=(i, p)) for i, p in enumerate(producers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    expected = sorted(f"{i}-{r}-{p}".encode() for i in range(4) for r in range(5) if r != 2 for p in range(3))
    assert sorted(read_committed(cluster.bootstrap, "ctc", 3, expect=len(expected))) == expected


@pytest.mark.logbroker_cluster(**TXN_CLUSTER)
def test_commit_completes_when_the_coordinator_is_reelected_while_its_markers_wait(logbroker_cluster):
    """The controller takes a dead follower out of the ISR of the coordinator's `__transaction_state`
    partition with a new leader epoch, so the coordinator is elected again, at a higher epoch. The
    markers of a commit it was still sending (here: to a partition without a leader) must go on:
    the commit completes once that partition is back, and the id can be used again."""
    cluster = logbroker_cluster
    producer = transactional_producer(cluster.bootstrap, "reelected-id", timeout_ms=120_000)
    coordinator = coordinator_of(cluster, "reelected-id")
    data_leader, follower = sorted(set(cluster.registered()) - {coordinator})
    cluster.create_topic("reelected", replica_assignment=[[data_leader]])
    producer.begin_transaction()
    for i in range(10):
        producer.produce("reelected", value=f"r{i}".encode(), partition=0)
    producer.flush(60)
    cluster.kill(data_leader)
    wait_for(lambda: cluster.leader("reelected", 0) == -1, what="reelected-0 without a leader")
    producer.commit_transaction(60)  # PrepareCommit stored; the marker waits for a leader
    txn_partition = transaction_log.partition_for("reelected-id", 3)
    epoch = cluster.partition_state("__transaction_state", txn_partition).leader_epoch
    cluster.kill(follower)
    wait_for(lambda: cluster.partition_state("__transaction_state", txn_partition).leader_epoch > epoch,
             what="the coordinator elected again at a higher epoch")
    assert cluster.leader("__transaction_state", txn_partition) == coordinator
    cluster.start_broker(data_leader)
    cluster.start_broker(follower)
    assert read_committed(cluster.bootstrap, "reelected", 1, expect=10) == [f"r{i}".encode() for i in range(10)]
    again = transactional_producer(cluster.bootstrap, "reelected-id")
    again.begin_transaction()
    again.produce("reelected", value=b"next", partition=0)
    again.commit_transaction(60)
