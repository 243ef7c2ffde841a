"""Tiered storage in a two-broker cluster on ZooKeeper: a follower learns what the leader copied
and deletes it locally, a follower with an erased disk rejoins without copying the tiered history
(OFFSET_MOVED_TO_TIERED_STORAGE), and a new leader serves the history from the bucket and goes on
copying."""

from __future__ import annotations

import uuid

from logbroker.testing import ClusterProcess

from clients import consume_confluent, produce_confluent
from tiered_helpers import wait_until
from test_tiered_storage import PRODUCER, TIERED, local_segments, remote_metadata, specs


def test_a_wiped_follower_rejoins_from_the_leaders_local_start_and_takes_over_the_history(
        tmp_path, bucket, logbroker_zookeeper):
    cluster = ClusterProcess(tmp_path, brokers=2,
                             zk_connect=f"{logbroker_zookeeper.connect_string}/t-{uuid.uuid4().hex[:12]}",
                             overrides={**bucket.broker_overrides(), "remote.log.manager.task.interval.ms": "100"})
    with cluster:
        topic = "tiered-cluster"
        cluster.create_topic(topic, replication_factor=2, config=TIERED)
        produce_confluent(cluster.bootstrap, topic, specs(2000), **PRODUCER, acks="all")
        leader = cluster.leader(topic, 0)
        follower = 3 - leader
        for broker in (leader, follower):
            wait_until(lambda b=broker: local_segments(cluster.brokers[b], topic)[0] > 0,
                       f"broker {broker} deleting copied segments")

        cluster.stop(follower)
        cluster.wipe(follower)
        cluster.start_broker(follower)
        rejoined = wait_until(lambda: local_segments(cluster.brokers[follower], topic), "the follower's log")
        assert rejoined[0] > 0  # started at the leader's local log start, the history left remote
        cluster.wait_for_isr(topic, 0, size=2)
        assert "in tiered storage" in cluster.brokers[follower].new_log_text()

        cluster.kill(leader)
        assert cluster.wait_for_leader(topic, 0, not_in={leader}) == follower
        records = consume_confluent(cluster.bootstrap, topic, {0: 0}, 2000)
        assert [r.offset for r in records] == list(range(2000))
        assert [r.value for r in records] == [s.value for s in specs(2000)]

        produce_confluent(cluster.bootstrap, topic, specs(1000, 2000), **PRODUCER, acks=1)
        wait_until(lambda: any(m["broker_id"] == follower for m in remote_metadata(bucket, topic)),
                   "the new leader copying")
        segments = remote_metadata(bucket, topic)
        for before, after in zip(segments, segments[1:]):
            assert after["start_offset"] > before["end_offset"]
        records = consume_confluent(cluster.bootstrap, topic, {0: 0}, 3000)
        assert [r.offset for r in records] == list(range(3000))
