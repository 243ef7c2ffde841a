"""`logbroker share-groups --describe --offsets` on a three-broker cluster: the lag of partitions
that the group's coordinator does not lead (it asks their leaders for the end offset), and a
partition whose share state cannot be read shown with its error instead of being left out."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest

from cluster_helpers import wait_for
from test_cluster_share_groups import topic_id

from logbroker.coordinator.share_state_log import SHARE_STATE_TOPIC, SharePartitionKey, partition_for

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
from test_share_groups_cli import cli, drain, produce, set_group_configs, share_consumer  # noqa: E402

PARTITIONS = 3
# The state topic without replicas: the share state of a partition whose state broker is down
# cannot be read at all, until it is back.
OFFSETS_CLUSTER = {"share.coordinator.state.topic.replication.factor": "1",
                   "share.coordinator.state.topic.num.partitions": "3", "offsets.topic.num.partitions": "1"}


def rows(described) -> dict[int, list[str]]:
    """Partition -> its row of the offsets table."""
    return {int(line.split()[2]): line.split() for line in described.stdout.splitlines()
            if line.split() and line.split()[0].startswith("sg-")}


@pytest.mark.logbroker_cluster(**OFFSETS_CLUSTER)
def test_describe_offsets_shows_the_lag_of_every_partition_and_a_partition_in_error(logbroker_cluster):
    cluster = logbroker_cluster
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"sg-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, partitions=PARTITIONS, replication_factor=3)
    set_group_configs(cluster.bootstrap, group, share_auto_offset_reset="earliest")
    for p in range(PARTITIONS):
        produce(cluster.bootstrap, topic, 6, partition=p)
    consumer = share_consumer(cluster.bootstrap, group, topic)
    try:
        assert len(drain([consumer], 6 * PARTITIONS, timeout_s=60)[0]) == 6 * PARTITIONS
        consumer.commit_sync()
    finally:
        consumer.close()
    for p in range(PARTITIONS):
        produce(cluster.bootstrap, topic, p + 1, partition=p, prefix="later")

    coordinator = cluster.leader("__consumer_offsets", 0)
    leaders = {p: cluster.leader(topic, p) for p in range(PARTITIONS)}
    assert set(leaders.values()) - {coordinator}, f"some partition led elsewhere than broker {coordinator}"
    described = cli(cluster.bootstrap, "--describe", "--group", group, "--offsets")
    assert described.returncode == 0, described.stderr
    assert {p: row[1:] for p, row in rows(described).items()} == {
        p: [topic, str(p), "0", "6", str(p + 1)] for p in range(PARTITIONS)}, (leaders, coordinator, described.stdout)

    # The broker keeping the state of one partition (not the group coordinator) goes down.
    tid = topic_id(cluster, topic)
    state_broker = {p: cluster.leader(SHARE_STATE_TOPIC, partition_for(SharePartitionKey(group, tid, p), 3))
                    for p in range(PARTITIONS)}
    down = next((p for p in range(PARTITIONS) if state_broker[p] != coordinator), None)
    if down is None:
        pytest.skip(f"every partition's share state is on the group coordinator {coordinator}")
    victim = state_broker[down]
    cluster.kill(victim)
    for p in range(PARTITIONS):
        cluster.wait_for_leader(topic, p, not_in={victim})
    wait_for(lambda: victim not in cluster.registered(), what=f"broker {victim} unregistered")

    described = cli(cluster.bootstrap, "--describe", "--group", group, "--offsets")
    table = rows(described)
    assert described.returncode == 1 and sorted(table) == list(range(PARTITIONS)), (described.stdout, described.stderr)
    assert table[down][1:] == [topic, str(down), "-", "-", "-"]
    assert f"partition {topic}-{down} of share group '{group}'" in described.stderr
    assert "COORDINATOR_NOT_AVAILABLE" in described.stderr or "NOT_COORDINATOR" in described.stderr, described.stderr
    for p in set(range(PARTITIONS)) - {p for p in range(PARTITIONS) if state_broker[p] == victim}:
        assert table[p][1:] == [topic, str(p), "0", "6", str(p + 1)], described.stdout
