"""The share coordinator moves while share consumers acknowledge: the broker leading a
`__share_group_state` partition is killed and restarted, and a preferred leader election gives the
partition back to it. The share-partition leaders reach the new process (their connection to the
old one is dead, and it listens on another port), and follow the leadership back and forth: no
commit fails while every broker is up, and no committed acknowledgement is undone."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import ElectionType, TopicPartition
from confluent_kafka.admin import AdminClient

from cluster_helpers import topic_metadata, wait_for
from share_workload import ShareWorkload, check_journal, failed_while_up
from test_cluster_share_groups import SHARE_CLUSTER, set_group_configs, topic_id

from logbroker.coordinator.share_state_log import SHARE_STATE_TOPIC, SharePartitionKey, partition_for

LIMIT = 4
FAILOVER_CLUSTER = {**SHARE_CLUSTER, "auto.leader.rebalance.enable": "false",
                    "group.share.record.lock.duration.ms": "5000", "group.share.delivery.count.limit": str(LIMIT)}


@pytest.mark.logbroker_cluster(**FAILOVER_CLUSTER)
def test_share_coordinator_restart_and_move_back_fail_no_commit(logbroker_cluster):
    cluster = logbroker_cluster
    topic, group = f"q-{uuid.uuid4().hex[:8]}", f"workers-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, partitions=3, replication_factor=3, config={"min.insync.replicas": "2"})
    set_group_configs(cluster.bootstrap, group, share_auto_offset_reset="earliest")
    workload = ShareWorkload(cluster.bootstrap, topic, group, partitions=3).start()
    up = [(time.monotonic(), 0.0)]
    try:
        wait_for(lambda: workload.progress() >= 30, timeout_s=60, what="share consumers committing")
        state_partition = partition_for(SharePartitionKey(group, topic_id(cluster, topic), 0), 3)
        coordinator = cluster.leader(SHARE_STATE_TOPIC, state_partition)
        replicas = topic_metadata(cluster.bootstrap, SHARE_STATE_TOPIC).topics[SHARE_STATE_TOPIC] \
            .partitions[state_partition].replicas
        assert replicas[0] == coordinator, "the state partition starts on its preferred replica"
        time.sleep(2)

        up[-1] = (up[-1][0], time.monotonic())
        cluster.kill(coordinator)
        cluster.wait_for_leader(SHARE_STATE_TOPIC, state_partition, not_in={coordinator})
        time.sleep(2)
        cluster.start_broker(coordinator)
        wait_for(lambda: coordinator in cluster.registered(), what=f"broker {coordinator} registered again")
        up.append((time.monotonic(), 0.0))
        cluster.wait_for_isr(SHARE_STATE_TOPIC, state_partition, contains=[coordinator])
        progress = workload.progress()
        wait_for(lambda: workload.progress() >= progress + 30, timeout_s=60, what="commits after the restart")

        # Give the state partition back to its preferred replica, the restarted broker.
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(SHARE_STATE_TOPIC, state_partition)]).result(30)
        wait_for(lambda: cluster.leader(SHARE_STATE_TOPIC, state_partition) == coordinator,
                 what=f"broker {coordinator} leading {SHARE_STATE_TOPIC}-{state_partition} again")
        progress = workload.progress()
        wait_for(lambda: workload.progress() >= progress + 30, timeout_s=60, what="commits after the move back")
        workload.stop_producing()
        workload.wait_settled(60)
        up[-1] = (up[-1][0], time.monotonic())
    finally:
        workload.stop()
    print(f"coordinator {coordinator}: {len(workload.produced)} records, {len(workload.deliveries)} deliveries, "
          f"{len(workload.commits)} commits, {sum(1 for c in workload.commits if c.error)} failed")
    failed = failed_while_up(workload, up)
    assert not failed, f"{len(failed)} commit(s) failed while every broker was up, e.g. {failed[:3]}"
    check_journal(workload, delivery_count_limit=LIMIT, lost_counts={p: 1 for p in range(3)})
