"""Durability under crashes: RF=3, min.insync.replicas=2, acks=all, and brokers killed
with SIGKILL over and over while a producer writes sequence numbers. Nothing acknowledged may be
lost, no offset may hold two different records on two replicas, and the replicas end up
byte-identical.

Each round kills a broker, waits for the controller to move what it had, restarts it and waits
until it is back in every ISR. The measured times are printed (`pytest -rP`) and recorded as
junit properties.
"""

from __future__ import annotations

import time

import pytest
from replica_checks import SequenceProducer, assert_no_acked_record_lost

from logbroker.testing import wait_for

ROUNDS = 4
TOPIC_CONFIG = {"min.insync.replicas": "2", "segment.bytes": "65536"}
CLUSTER = {"replica.lag.time.max.ms": "3000"}


def report(record_property, name: str, seconds: list[float]) -> None:
    record_property(name, ",".join(f"{s:.2f}" for s in seconds))
    print(f"{name}: " + " ".join(f"{s:.2f}s" for s in seconds))


def kill_and_restart(cluster, producer: SequenceProducer, victim_of, *, partitions: int = 1):
    """ROUNDS times: wait for 300 more acknowledgements, SIGKILL the broker `victim_of()` names,
    wait for a live controller and for every partition of "seq" to be led by another broker,
    restart it, and wait until it is back in every ISR. Returns the seconds from each kill to the
    new leaders, and to the victim back in the ISRs."""
    failovers, heals = [], []
    for _ in range(ROUNDS):
        producer.wait_for_more_acks(300)
        victim = victim_of()
        assert victim > 0
        killed_at = time.monotonic()
        cluster.kill(victim)
        wait_for(lambda: cluster.controller() not in (-1, victim), timeout_s=60, what="a live controller")
        for partition in range(partitions):
            cluster.wait_for_leader("seq", partition, not_in={victim})
        failovers.append(time.monotonic() - killed_at)
        cluster.start_broker(victim)
        for partition in range(partitions):
            cluster.wait_for_isr("seq", partition, contains={victim})
        heals.append(time.monotonic() - killed_at)
    producer.wait_for_more_acks(300)
    return failovers, heals


@pytest.mark.logbroker_cluster(**CLUSTER)
@pytest.mark.parametrize("idempotent", [True, False], ids=["idempotent", "not-idempotent"])
def test_no_acked_record_is_lost_while_the_leader_is_killed_over_and_over(logbroker_cluster, idempotent,
                                                                         record_property):
    cluster = logbroker_cluster
    cluster.create_topic("seq", config=TOPIC_CONFIG)
    producer = SequenceProducer(cluster, "seq", idempotent=idempotent).start()
    try:
        failovers, heals = kill_and_restart(cluster, producer, lambda: cluster.leader("seq", 0))
    finally:
        producer.stop()
    report(record_property, "leader_failover_s", failovers)
    report(record_property, "killed_leader_back_in_isr_s", heals)
    assert_no_acked_record_lost(cluster, "seq", producer, idempotent=idempotent)


@pytest.mark.logbroker_cluster(**CLUSTER)
def test_no_acked_record_is_lost_while_the_controller_is_killed_over_and_over(logbroker_cluster,
                                                                             record_property):
    """Three partitions led by three brokers: the controller always leads one of them."""
    cluster = logbroker_cluster
    cluster.create_topic("seq", partitions=3, config=TOPIC_CONFIG)
    producer = SequenceProducer(cluster, "seq", idempotent=True, partitions=3).start()
    try:
        failovers, heals = kill_and_restart(cluster, producer, cluster.controller, partitions=3)
    finally:
        producer.stop()
    report(record_property, "controller_failover_s", failovers)
    report(record_property, "killed_controller_back_in_isr_s", heals)
    assert_no_acked_record_lost(cluster, "seq", producer, idempotent=True)
