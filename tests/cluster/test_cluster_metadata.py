"""Three broker processes on one ZooKeeper: registration, controller, topic creation, Metadata."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient


from cluster_helpers import fully_led, start_cluster, topic_metadata, wait_for


@pytest.fixture
def cluster(tmp_path, zk_connect):
    brokers = start_cluster(tmp_path, zk_connect)
    yield brokers
    for broker in brokers:
        broker.kill()


def test_every_broker_answers_metadata_with_all_brokers_leaders_replicas_and_isr(cluster, zk_connect):
    admin = AdminClient({"bootstrap.servers": cluster[0].bootstrap})
    admin.create_topics([NewTopic("replicated", num_partitions=3, replication_factor=3)])["replicated"].result(10)

    for broker in cluster:
        md = wait_for(lambda: fully_led(broker.bootstrap, "replicated", 3, 3))
        assert sorted(md.brokers) == [1, 2, 3]
        assert {b.port for b in md.brokers.values()} == {b.port for b in cluster}
        leaders = set()
        for p in md.topics["replicated"].partitions.values():
            assert sorted(p.replicas) == [1, 2, 3]
            assert sorted(p.isrs) == [1, 2, 3]
            assert p.leader == p.replicas[0]
            leaders.add(p.leader)
        assert leaders == {1, 2, 3}  # round robin spreads the leaders
        assert md.controller_id in (1, 2, 3)


def test_the_controller_znode_is_held_by_one_broker(cluster, zk_connect):
    client = KazooClient(hosts=zk_connect)
    client.start(timeout=10)
    try:
        data, stat = client.get("/controller")
        import json
        controller = json.loads(data)["brokerid"]
        assert controller in (1, 2, 3)
        assert sorted(client.get_children("/brokers/ids")) == ["1", "2", "3"]
        md = topic_metadata(cluster[1].bootstrap, None)
        assert md.controller_id == controller
    finally:
        client.stop()
        client.close()


def test_leadership_moves_to_an_isr_member_when_the_leader_dies(cluster):
    admin = AdminClient({"bootstrap.servers": cluster[0].bootstrap})
    admin.create_topics([NewTopic("failover", num_partitions=1, replication_factor=3)])["failover"].result(10)
    md = wait_for(lambda: fully_led(cluster[0].bootstrap, "failover", 1, 3))
    old_leader = md.topics["failover"].partitions[0].leader
    cluster[old_leader - 1].kill()
    survivor = next(b for i, b in enumerate(cluster) if i != old_leader - 1)

    def moved():
        md = topic_metadata(survivor.bootstrap, "failover")
        p = md.topics["failover"].partitions[0]
        return md if p.leader not in (-1, old_leader) and old_leader not in md.brokers else None

    md = wait_for(moved)
    p = md.topics["failover"].partitions[0]
    assert p.leader in p.isrs
    assert old_leader not in p.isrs
