"""Healing: a broker that stalls, loses its ZooKeeper session, loses its data or falls
far behind comes back into the ISR by itself, and nothing acknowledged is lost meanwhile.

RF=3, min.insync.replicas=2, acks=all throughout. Each test prints how long the cluster took to
heal (`pytest -rP`) and records it as a junit property.
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import OFFSET_END, TopicPartition
from confluent_kafka.admin import AdminClient
from replica_checks import (
    SequenceProducer,
    assert_no_acked_record_lost,
    partition_dir,
    replica_records,
    wait_until_replicas_converge,
)

from logbroker.testing import ClusterProcess, wait_for

TOPIC_CONFIG = {"min.insync.replicas": "2", "segment.bytes": "65536"}


def report(record_property, name: str, value: float, unit: str = "s") -> None:
    record_property(name, f"{value:.2f}")
    print(f"{name}: {value:.2f} {unit}")


def a_follower(cluster, topic: str, *, not_controller: bool = True) -> int:
    """A broker in the ISR that is neither the leader nor (by default) the controller."""
    state = cluster.partition_state(topic, 0)
    return next(b for b in state.isr
                if b != state.leader and not (not_controller and b == cluster.controller()))


@pytest.mark.logbroker_cluster(**{"replica.lag.time.max.ms": "3000", "zookeeper.session.timeout.ms": "10000"})
def test_a_paused_follower_drops_out_of_the_isr_and_rejoins_after_it_resumes(logbroker_cluster, record_property):
    cluster = logbroker_cluster
    cluster.create_topic("seq", config=TOPIC_CONFIG)
    producer = SequenceProducer(cluster, "seq", idempotent=True).start()
    try:
        producer.wait_for_more_acks(200)
        follower = a_follower(cluster, "seq")
        paused_at = time.monotonic()
        cluster.pause(follower)
        try:
            cluster.wait_for_isr("seq", 0, size=2, excludes={follower}, timeout_s=20)
            shrunk_after = time.monotonic() - paused_at
            producer.wait_for_more_acks(300)  # acks=all goes on: ISR 2 >= min.insync.replicas 2
            assert follower in cluster.registered(), "paused past the session timeout; the test is mistuned"
        finally:
            cluster.resume(follower)
        resumed_at = time.monotonic()
        cluster.wait_for_isr("seq", 0, contains={follower})
        rejoined_after = time.monotonic() - resumed_at
        producer.wait_for_more_acks(200)
    finally:
        producer.stop()
    report(record_property, "paused_follower_out_of_isr_after_s", shrunk_after)
    report(record_property, "resumed_follower_back_in_isr_after_s", rejoined_after)
    assert_no_acked_record_lost(cluster, "seq", producer, idempotent=True)


@pytest.mark.logbroker_cluster(**{"replica.lag.time.max.ms": "3000"})
@pytest.mark.parametrize("role", ["follower", "controller"])
def test_a_broker_whose_zookeeper_session_expired_registers_again_and_rejoins_the_isr(
        logbroker_cluster, role, record_property):
    """Paused past zookeeper.session.timeout.ms (4 s): its /brokers/ids/<id> goes, the controller
    moves what it led (and, for the controller, the controller role). Resumed, it must register in
    a new session, watch again, follow, and rejoin the ISR."""
    cluster = logbroker_cluster
    cluster.create_topic("seq", partitions=3, config=TOPIC_CONFIG)
    producer = SequenceProducer(cluster, "seq", idempotent=True, partitions=3).start()
    try:
        producer.wait_for_more_acks(200)
        victim = cluster.controller() if role == "controller" else a_follower(cluster, "seq")
        cluster.pause(victim)
        try:
            wait_for(lambda: victim not in cluster.registered(), timeout_s=30, what="the session's expiry")
            if role == "controller":
                wait_for(lambda: cluster.controller() not in (-1, victim), timeout_s=30, what="a new controller")
            producer.wait_for_more_acks(300)
        finally:
            cluster.resume(victim)
        resumed_at = time.monotonic()
        wait_for(lambda: victim in cluster.registered(), timeout_s=30, what="registration in a new session")
        registered_after = time.monotonic() - resumed_at
        for partition in range(3):
            cluster.wait_for_isr("seq", partition, contains={victim})
        healed_after = time.monotonic() - resumed_at
        producer.wait_for_more_acks(300)
    finally:
        producer.stop()
    report(record_property, f"expired_{role}_registered_again_after_s", registered_after)
    report(record_property, f"expired_{role}_back_in_every_isr_after_s", healed_after)
    assert_no_acked_record_lost(cluster, "seq", producer, idempotent=True)
    if role == "controller":
        # Its /controller watch is live again: with the new controller gone, it can be elected.
        current = cluster.controller()
        cluster.kill(current)
        wait_for(lambda: cluster.controller() not in (-1, current), timeout_s=30, what="another controller")


@pytest.mark.logbroker_cluster(**{"replica.lag.time.max.ms": "3000"})
@pytest.mark.parametrize("keep_meta_properties", [False, True], ids=["empty-dir", "meta-properties-kept"])
def test_a_leader_restarted_with_a_wiped_data_dir_fetches_everything_again(logbroker_cluster, keep_meta_properties,
                                                                          record_property):
    cluster = logbroker_cluster
    cluster.create_topic("seq", config=TOPIC_CONFIG)
    producer = SequenceProducer(cluster, "seq", idempotent=True).start()
    try:
        producer.wait_for_more_acks(2000)
        leader = cluster.leader("seq", 0)
        cluster.kill(leader)
        cluster.wait_for_leader("seq", 0, not_in={leader})
        data_dir = cluster.brokers[leader].data_dir
        meta = (data_dir / "meta.properties").read_bytes()
        cluster.wipe(leader)
        if keep_meta_properties:
            data_dir.mkdir(parents=True)
            (data_dir / "meta.properties").write_bytes(meta)
        restarted_at = time.monotonic()
        cluster.start_broker(leader)
        cluster.wait_for_isr("seq", 0, contains={leader})
        healed_after = time.monotonic() - restarted_at
        producer.wait_for_more_acks(300)
    finally:
        producer.stop()
    refetched = sum(p.stat().st_size for p in partition_dir(cluster, leader, "seq", 0).glob("*.log"))
    report(record_property, "wiped_broker_back_in_isr_after_s", healed_after)
    print(f"wiped broker re-fetched {refetched} bytes")
    assert_no_acked_record_lost(cluster, "seq", producer, idempotent=True)


@pytest.mark.logbroker_cluster(**{"replica.lag.time.max.ms": "3000"})
def test_a_wiped_follower_starts_at_the_leaders_log_start_when_the_head_was_deleted(logbroker_cluster):
    """Its fetch from offset 0 is below the leader's log start (DeleteRecords moved it):
    OFFSET_OUT_OF_RANGE, and the follower starts its log over at the leader's log start."""
    cluster = logbroker_cluster
    cluster.create_topic("seq", config=TOPIC_CONFIG)
    first = SequenceProducer(cluster, "seq", idempotent=True, pace_s=0, limit=3000).start()
    first.stop()
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    deleted = admin.delete_records([TopicPartition("seq", 0, OFFSET_END)])[TopicPartition("seq", 0, OFFSET_END)]
    low_watermark = deleted.result(30).low_watermark
    assert low_watermark >= 3000
    follower = a_follower(cluster, "seq")
    cluster.kill(follower)
    cluster.wipe(follower)
    cluster.start_broker(follower)
    cluster.wait_for_isr("seq", 0, contains={follower})
    producer = SequenceProducer(cluster, "seq", idempotent=True).start()
    try:
        producer.wait_for_more_acks(300)
    finally:
        producer.stop()
    assert_no_acked_record_lost(cluster, "seq", producer, idempotent=True, same_segments=False)
    assert min(replica_records(partition_dir(cluster, follower, "seq", 0))) == low_watermark


@pytest.mark.logbroker_cluster(**{"replica.lag.time.max.ms": "3000"})
def test_a_follower_far_behind_catches_up_across_many_segments(logbroker_cluster, record_property):
    """A follower stopped while 60 MB arrive (1 MiB segments, nothing deleted) restarts and copies
    them all from the leader."""
    cluster = logbroker_cluster
    cluster.create_topic("seq", config={"min.insync.replicas": "2", "segment.bytes": str(1024 * 1024),
                                        "retention.ms": "-1", "retention.bytes": "-1"})
    follower = a_follower(cluster, "seq")
    cluster.kill(follower)
    producer = SequenceProducer(cluster, "seq", idempotent=True, pace_s=0, value_bytes=10_000, limit=6000).start()
    producer.stop()  # waits for the 6000 records' (60 MB) delivery reports
    leader_dir = partition_dir(cluster, cluster.leader("seq", 0), "seq", 0)
    behind = sum(p.stat().st_size for p in leader_dir.glob("*.log"))
    restarted_at = time.monotonic()
    cluster.start_broker(follower)
    cluster.wait_for_isr("seq", 0, contains={follower}, timeout_s=180)
    caught_up_after = time.monotonic() - restarted_at
    report(record_property, "far_behind_follower_back_in_isr_after_s", caught_up_after)
    report(record_property, "far_behind_follower_catch_up_mb_per_s", behind / 1e6 / caught_up_after, "MB/s")
    print(f"far-behind follower copied {behind / 1e6:.1f} MB in {len(list(leader_dir.glob('*.log')))} segments")
    assert_no_acked_record_lost(cluster, "seq", producer, idempotent=True)


@pytest.mark.logbroker_cluster(**{"replica.lag.time.max.ms": "3600000"})
def test_a_crashed_follower_leaves_the_isr_when_its_session_ends_so_acks_all_goes_on(logbroker_cluster,
                                                                                     record_property):
    """Kafka's controller drops a dead broker from the ISR of every partition it follows
    (OfflineReplica), so acks=all does not wait replica.lag.time.max.ms (here an hour) for the
    leader to notice. The partition keeps its leader."""
    cluster = logbroker_cluster
    cluster.create_topic("seq", config=TOPIC_CONFIG)
    leader = cluster.leader("seq", 0)
    producer = SequenceProducer(cluster, "seq", idempotent=True).start()
    try:
        producer.wait_for_more_acks(200)
        follower = a_follower(cluster, "seq", not_controller=False)
        killed_at = time.monotonic()
        cluster.kill(follower)
        state = cluster.wait_for_isr("seq", 0, size=2, excludes={follower})
        out_of_isr_after = time.monotonic() - killed_at
        assert state.leader == leader
        producer.wait_for_more_acks(300)
        cluster.start_broker(follower)
        cluster.wait_for_isr("seq", 0, contains={follower})
        producer.wait_for_more_acks(200)
    finally:
        producer.stop()
    report(record_property, "crashed_follower_out_of_isr_after_s", out_of_isr_after)
    assert_no_acked_record_lost(cluster, "seq", producer, idempotent=True)


def test_a_leader_back_with_an_empty_log_before_the_controller_saw_it_die_does_not_lead(
        logbroker_zookeeper, tmp_path, record_property):
    """A bounce the controller misses: the leader crashes and comes back with a wiped data dir
    while the controller is stalled (SIGSTOP, within its longer session timeout), so the
    controller's broker watch finds it registered again. Its registration is newer than the state
    naming it leader, so it must not lead on that state (its log is empty); the controller sees a
    new broker epoch (Kafka's bounced broker), elects another ISR member, and it follows."""
    cluster = ClusterProcess(tmp_path, zk_connect=f"{logbroker_zookeeper.connect_string}/b-{uuid.uuid4().hex[:8]}",
                             overrides={"replica.lag.time.max.ms": "3000"},
                             broker_overrides={1: {"zookeeper.session.timeout.ms": "10000"}})
    with cluster:
        assert cluster.controller() == 1  # the first broker started wins the election
        cluster.create_topic("seq", replica_assignment=[[2, 3, 1]], config=TOPIC_CONFIG)
        producer = SequenceProducer(cluster, "seq", idempotent=True).start()
        try:
            producer.wait_for_more_acks(2000)
            cluster.pause(1)
            try:
                cluster.kill(2)
                cluster.wipe(2)
                cluster.start_broker(2)  # waits out its old session (4 s), then registers anew
            finally:
                cluster.resume(1)
            resumed_at = time.monotonic()
            wait_until_replicas_converge(cluster, "seq", 0)
            report(record_property, "bounced_wiped_leader_caught_up_after_s", time.monotonic() - resumed_at)
            producer.wait_for_more_acks(300)
        finally:
            producer.stop()
        assert_no_acked_record_lost(cluster, "seq", producer, idempotent=True)
