"""A seeded crash test of share groups: three brokers, a producer and three share consumers (real
confluent-kafka clients), and brokers killed with SIGKILL and restarted a few times within a
minute. Afterwards the journal of every delivery and commit must show nothing lost, no committed
ACCEPT or REJECT delivered again, and the delivery-count limit held (share_workload.py); and no
commit failed while every broker was up (from a restarted broker's registration to the next kill).

SHARE_CRASH_SEED picks another schedule of kills (which broker, how long apart)."""

from __future__ import annotations

import os
import random
import time
import uuid
from collections import Counter

import pytest

from cluster_helpers import wait_for
from share_workload import ShareWorkload, check_journal, failed_while_up
from test_cluster_share_groups import SHARE_CLUSTER, set_group_configs

LIMIT = 3
PARTITIONS = 3
KILLS = 3
SEED = int(os.environ.get("SHARE_CRASH_SEED", "33"))
CRASH_CLUSTER = {**SHARE_CLUSTER, "group.share.record.lock.duration.ms": "4000",
                 "group.share.delivery.count.limit": str(LIMIT)}


@pytest.mark.logbroker_cluster(**CRASH_CLUSTER)
def test_share_consumers_lose_nothing_and_redeliver_nothing_committed_across_broker_kills(logbroker_cluster):
    cluster = logbroker_cluster
    rng = random.Random(SEED)
    topic, group = f"crash-{uuid.uuid4().hex[:8]}", f"crashers-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, partitions=PARTITIONS, replication_factor=3, config={"min.insync.replicas": "2"})
    set_group_configs(cluster.bootstrap, group, share_auto_offset_reset="earliest")
    workload = ShareWorkload(cluster.bootstrap, topic, group, partitions=PARTITIONS).start()
    lost_counts: Counter[int] = Counter()  # per partition: kills of its leader
    schedule = []
    up = [time.monotonic()]  # every broker up from up[2i] to up[2i+1]
    try:
        wait_for(lambda: workload.progress() >= 20, timeout_s=60, what="share consumers committing")
        for _ in range(KILLS):
            time.sleep(rng.uniform(4, 8))
            victim = rng.choice(sorted(cluster.brokers))
            led = [p for p in range(PARTITIONS) if cluster.leader(topic, p) == victim]
            lost_counts.update(led)
            schedule.append((victim, led))
            up.append(time.monotonic())
            cluster.kill(victim)
            time.sleep(rng.uniform(1, 3))
            cluster.start_broker(victim)
            wait_for(lambda victim=victim: victim in cluster.registered(), what=f"broker {victim} registered again")
            up.append(time.monotonic())
        time.sleep(3)
        workload.stop_producing()
        workload.wait_settled(25)  # a failing run then reports within the 120 s test timeout
        up.append(time.monotonic())
    finally:
        workload.stop()
    failed = sum(1 for c in workload.commits if c.error)
    while_up = failed_while_up(workload, list(zip(up[::2], up[1::2])))
    print(f"seed {SEED}: kills (broker, partitions it led) {schedule}; {len(workload.produced)} records, "
          f"{len(workload.deliveries)} deliveries, {len(workload.commits)} commits ({failed} failed)")
    assert not while_up, f"{len(while_up)} commit(s) failed while every broker was up, e.g. {while_up[:3]}"
    check_journal(workload, delivery_count_limit=LIMIT, lost_counts=dict(lost_counts))
