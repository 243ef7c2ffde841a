"""Preferred leaders on a three-broker cluster: the controller's periodic rebalance, ElectLeaders
(PREFERRED and UNCLEAN) through confluent-kafka's AdminClient and `logbroker leader-election`."""

from __future__ import annotations

import subprocess
import sys

import pytest
from confluent_kafka import ElectionType, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.elect_leaders.v2.request import ElectLeadersRequest, TopicPartitions

from cluster_helpers import fully_led, start_cluster, topic_metadata, wait_for
from raw_requests import send

NO_REBALANCE = {"auto.leader.rebalance.enable": "false", "replica.lag.time.max.ms": "2000"}


@pytest.fixture
def cluster(tmp_path, zk_connect):
    brokers = start_cluster(tmp_path, zk_connect, **NO_REBALANCE)
    yield brokers
    for broker in brokers:
        broker.kill()


def create_topic(cluster, name: str, partitions: int, replication_factor: int):
    admin = AdminClient({"bootstrap.servers": cluster[0].bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=partitions,
                                  replication_factor=replication_factor)])[name].result(10)
    return wait_for(lambda: fully_led(cluster[0].bootstrap, name, partitions, replication_factor))


def produce(bootstrap: str, topic: str, count: int, partitions: int = 3) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(count):
        producer.produce(topic, f"record-{i}".encode(), partition=i % partitions)
    assert producer.flush(30) == 0


def partitions_of(bootstrap: str, topic: str):
    return topic_metadata(bootstrap, topic).topics[topic].partitions


def preferred_by(md, topic: str, broker_id: int) -> list[int]:
    return [p.id for p in md.topics[topic].partitions.values() if p.replicas[0] == broker_id]


def move_leadership_off_and_back(cluster, topic: str, broker_id: int) -> None:
    """Kill `broker_id`, wait until its partitions are led elsewhere, restart it and wait until
    it is back in every ISR — leadership stays away, since it comes back as a follower."""
    cluster[broker_id - 1].kill()
    other = cluster[broker_id % len(cluster)]
    wait_for(lambda: all(p.leader not in (-1, broker_id) for p in partitions_of(other.bootstrap, topic).values()),
             timeout_s=30)
    cluster[broker_id - 1].start()
    wait_for(lambda: all(broker_id in p.isrs for p in partitions_of(other.bootstrap, topic).values()),
             timeout_s=60)


def test_leadership_returns_to_the_preferred_replica_once_it_rejoins_the_isr(tmp_path, zk_connect):
    cluster = start_cluster(tmp_path, zk_connect, **{"leader.imbalance.check.interval.seconds": "1",
                                                     "replica.lag.time.max.ms": "2000"})
    try:
        md = create_topic(cluster, "balanced", 3, 3)
        assert all(p.leader == p.replicas[0] for p in md.topics["balanced"].partitions.values())
        produce(cluster[0].bootstrap, "balanced", 300)
        moved = preferred_by(md, "balanced", 1)
        assert moved

        cluster[0].kill()
        wait_for(lambda: all(partitions_of(cluster[1].bootstrap, "balanced")[p].leader not in (-1, 1)
                             for p in moved), timeout_s=30)
        cluster[0].start()

        def balanced():
            partitions = partitions_of(cluster[1].bootstrap, "balanced").values()
            return all(p.leader == p.replicas[0] and 1 in p.isrs for p in partitions)
        wait_for(balanced, timeout_s=60)
        assert "moving leadership of" in "".join(b.log_path.read_text() for b in cluster)
    finally:
        for broker in cluster:
            broker.kill()


def test_elect_leaders_preferred_moves_only_partitions_not_led_by_their_preferred_replica(cluster):
    md = create_topic(cluster, "prefer", 3, 3)
    produce(cluster[0].bootstrap, "prefer", 300)
    move_leadership_off_and_back(cluster, "prefer", 1)
    away = preferred_by(md, "prefer", 1)
    assert all(partitions_of(cluster[1].bootstrap, "prefer")[p].leader != 1 for p in away)

    admin = AdminClient({"bootstrap.servers": cluster[1].bootstrap})
    requested = [TopicPartition("prefer", p) for p in range(3)]
    results = admin.elect_leaders(ElectionType.PREFERRED, requested).result(30)

    errors = {tp.partition: (None if e is None else e.code()) for tp, e in results.items()}
    assert errors == {p: None if p in away else KafkaError.ELECTION_NOT_NEEDED for p in range(3)}
    partitions = partitions_of(cluster[2].bootstrap, "prefer")
    assert all(p.leader == p.replicas[0] for p in partitions.values())


def test_elect_leaders_sent_to_a_broker_that_is_not_the_controller_gets_not_controller(cluster):
    create_topic(cluster, "routed", 1, 3)
    controller = topic_metadata(cluster[0].bootstrap, None).controller_id
    other = next(b for i, b in enumerate(cluster, start=1) if i != controller)
    request = ElectLeadersRequest(election_type=0, topic_partitions=(
        TopicPartitions(topic="routed", partitions=(0,)),))
    response = send(other, request)

    [topic] = response.replica_election_results
    assert [(r.partition_id, r.error_code.value) for r in topic.partition_result] == [(0, 41)]


def test_unclean_election_makes_a_live_out_of_sync_replica_leader(cluster):
    md = create_topic(cluster, "unclean", 1, 2)
    replicas = md.topics["unclean"].partitions[0].replicas
    leader, follower = replicas[0], replicas[1]
    survivor = next(b for i, b in enumerate(cluster, start=1) if i not in replicas)
    produce(cluster[leader - 1].bootstrap, "unclean", 3, partitions=1)

    cluster[follower - 1].kill()
    wait_for(lambda: partitions_of(survivor.bootstrap, "unclean")[0].isrs == [leader], timeout_s=30)
    cluster[leader - 1].kill()
    wait_for(lambda: partitions_of(survivor.bootstrap, "unclean")[0].leader == -1, timeout_s=30)
    cluster[follower - 1].start()

    admin = AdminClient({"bootstrap.servers": survivor.bootstrap})
    tp = TopicPartition("unclean", 0)
    preferred = admin.elect_leaders(ElectionType.PREFERRED, [tp]).result(30)[tp]
    assert preferred.code() == KafkaError.PREFERRED_LEADER_NOT_AVAILABLE
    assert admin.elect_leaders(ElectionType.UNCLEAN, [tp]).result(30)[tp] is None

    partition = partitions_of(survivor.bootstrap, "unclean")[0]
    assert (partition.leader, partition.isrs) == (follower, [follower])
    again = admin.elect_leaders(ElectionType.UNCLEAN, [tp]).result(30)[tp]
    assert again.code() == KafkaError.ELECTION_NOT_NEEDED


def leader_election(cluster, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "logbroker.cli", "leader-election", "--bootstrap-server",
                           cluster[1].bootstrap, *args], capture_output=True, text=True, timeout=60)


def test_leader_election_tool_prints_what_kafka_leader_election_prints(cluster, tmp_path):
    md = create_topic(cluster, "tool", 3, 3)
    produce(cluster[0].bootstrap, "tool", 30)
    move_leadership_off_and_back(cluster, "tool", 1)
    [away] = preferred_by(md, "tool", 1)
    staying = next(p for p in range(3) if p != away)

    one = leader_election(cluster, "--election-type", "preferred", "--topic", "tool", "--partition", str(staying))
    assert (one.returncode, one.stdout, one.stderr) == (0, f"Valid replica already elected for partitions tool-{staying}\n", "")

    every = leader_election(cluster, "--election-type", "PREFERRED", "--all-topic-partitions")
    assert every.returncode == 0, every.stderr
    assert every.stdout == f"Successfully completed leader election (PREFERRED) for partitions tool-{away}\n"

    listed = tmp_path / "partitions.json"
    listed.write_text('{"partitions": [{"topic": "tool", "partition": 0}, {"topic": "nope", "partition": 0}]}')
    failing = leader_election(cluster, "--election-type", "PREFERRED", "--path-to-json-file", str(listed))
    assert failing.returncode == 1
    assert "Valid replica already elected for partitions tool-0" in failing.stdout
    assert "Error completing leader election (PREFERRED) for partition: nope-0:" in failing.stdout
    assert "UNKNOWN_TOPIC_OR_PARTITION" in failing.stdout
    assert failing.stderr.strip() == "Error: 1 replica(s) could not be elected"
