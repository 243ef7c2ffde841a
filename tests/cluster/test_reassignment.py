"""Partition reassignment on a three-broker cluster: `logbroker reassign-partitions` (--generate,
--execute, --verify, --list, --cancel) and the AlterPartitionReassignments /
ListPartitionReassignments APIs through kafka-python's admin client."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kafka import TopicPartition as KafkaTopicPartition
from kafka.admin import KafkaAdminClient
from kafka.errors import (
    InvalidReplicationAssignmentError,
    NoReassignmentInProgressError,
    UnknownTopicOrPartitionError,
)

from cluster_helpers import start_cluster, topic_metadata, wait_for

RECORDS = 3000


@pytest.fixture
def cluster(tmp_path, zk_connect):
    brokers = start_cluster(tmp_path, zk_connect, **{"replica.lag.time.max.ms": "5000"})
    yield brokers
    for broker in brokers:
        broker.kill()


def create_topic_on(cluster, name: str, assignment: dict[int, list[int]]):
    admin = AdminClient({"bootstrap.servers": cluster[0].bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=len(assignment), replica_assignment=[assignment[p] for p in sorted(assignment)])])[name].result(10)
    wait_for(lambda: (lambda t: t is not None and len(t.partitions) == len(assignment)
                      and all(p.leader >= 0 for p in t.partitions.values()))(
        topic_metadata(cluster[0].bootstrap, name).topics.get(name)))


def produce(cluster, topic: str, count: int) -> list[bytes]:
    producer = Producer({"bootstrap.servers": cluster[0].bootstrap, "acks": "all", "linger.ms": 5})
    values = [f"value-{i:05d}".encode() * 4 for i in range(count)]
    for value in values:
        producer.produce(topic, value, partition=0)
    assert producer.flush(30) == 0
    return values


def consume(cluster, topic: str, expected: int, timeout_s: float = 30.0) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": ",".join(b.bootstrap for b in cluster),
                         "group.id": "reassignment-check", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(values) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
    finally:
        consumer.close()
    return values


def tool(cluster, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "logbroker.cli", "reassign-partitions",
                           "--bootstrap-server", ",".join(b.bootstrap for b in cluster
                                                          if b.process.poll() is None), *args],
                          capture_output=True, text=True, timeout=90)


def segment(broker, topic: str) -> bytes | None:
    path = broker.data_dir / f"{topic}-0" / "00000000000000000000.log"
    return path.read_bytes() if path.exists() else None


def test_reassigning_a_partition_to_new_brokers_copies_it_byte_for_byte_and_deletes_the_old_replica(
        cluster, tmp_path):
    create_topic_on(cluster, "moving", {0: [1]})
    values = produce(cluster, "moving", RECORDS)
    original = segment(cluster[0], "moving")
    assert original

    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "moving", "partition": 0, "replicas": [2, 3], "log_dirs": ["any", "any"]}]}))
    execute = tool(cluster, "--reassignment-json-file", str(plan), "--execute")
    assert execute.returncode == 0, execute.stdout + execute.stderr
    assert execute.stdout == (
        "Current partition replica assignment\n\n"
        '{"version":1,"partitions":[{"topic":"moving","partition":0,"replicas":[1],"log_dirs":["any"]}]}\n\n'
        "Save this to use as the --reassignment-json-file option during rollback\n"
        "Successfully started partition reassignment for moving-0\n")

    def verified():
        result = tool(cluster, "--reassignment-json-file", str(plan), "--verify")
        return result if "is completed." in result.stdout else None
    verify = wait_for(verified, timeout_s=60, interval_s=0.5)
    assert verify.stdout == ("Status of partition reassignment:\n"
                             "Reassignment of partition moving-0 is completed.\n\n"
                             "Clearing broker-level throttles on brokers 1,2,3\n"
                             "Clearing topic-level throttles on topic moving\n")

    partition = topic_metadata(cluster[2].bootstrap, "moving").topics["moving"].partitions[0]
    assert (partition.replicas, sorted(partition.isrs)) == ([2, 3], [2, 3])
    assert partition.leader == 2
    wait_for(lambda: segment(cluster[1], "moving") == original and segment(cluster[2], "moving") == original)
    wait_for(lambda: not (cluster[0].data_dir / "moving-0").exists())
    assert tool(cluster, "--list").stdout == "No partition reassignments found.\n"
    assert consume(cluster, "moving", RECORDS) == values


def test_generate_proposes_an_assignment_over_the_given_brokers(cluster, tmp_path):
    create_topic_on(cluster, "planned", {0: [1, 2], 1: [2, 3], 2: [3, 1]})
    topics = tmp_path / "topics.json"
    topics.write_text('{"version":1,"topics":[{"topic":"planned"}]}')

    result = tool(cluster, "--topics-to-move-json-file", str(topics), "--broker-list", "2,3", "--generate")

    assert result.returncode == 0, result.stderr
    current_header, current, blank, proposed_header, proposed = result.stdout.splitlines()
    assert (current_header, blank, proposed_header) == (
        "Current partition replica assignment", "", "Proposed partition reassignment configuration")
    assert json.loads(current)["partitions"] == [
        {"topic": "planned", "partition": p, "replicas": r, "log_dirs": ["any", "any"]}
        for p, r in ((0, [1, 2]), (1, [2, 3]), (2, [3, 1]))]
    proposal = json.loads(proposed)
    assert proposal["version"] == 1
    assert [p["partition"] for p in proposal["partitions"]] == [0, 1, 2]
    assert all(sorted(p["replicas"]) == [2, 3] for p in proposal["partitions"])


def test_a_reassignment_waiting_for_a_dead_broker_is_listed_and_can_be_cancelled(tmp_path, zk_connect,
                                                                                 zk_client):
    # A long ZooKeeper session keeps a killed broker registered (so a target can name it) while it
    # cannot follow: the reassignment stays in progress until it is cancelled.
    cluster = start_cluster(tmp_path, zk_connect, **{"zookeeper.session.timeout.ms": "60000"})
    try:
        create_topic_on(cluster, "stuck", {0: [1]})
        produce(cluster, "stuck", 10)
        controller = topic_metadata(cluster[0].bootstrap, None).controller_id
        dead = next(b for b in (3, 2) if b != controller)
        cluster[dead - 1].kill()
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": "stuck", "partition": 0, "replicas": [1, dead]}]}))
        assert tool(cluster, "--reassignment-json-file", str(plan), "--execute").returncode == 0

        topic_znode = json.loads(zk_client.get("/brokers/topics/stuck")[0])
        assert (topic_znode["partitions"], topic_znode["adding_replicas"], topic_znode["removing_replicas"]) \
            == ({"0": [1, dead]}, {"0": [dead]}, {})
        assert tool(cluster, "--list").stdout == (
            f"Current partition reassignments:\nstuck-0: replicas: 1,{dead}. adding: {dead}.\n")
        verify = tool(cluster, "--reassignment-json-file", str(plan), "--verify")
        assert verify.stdout == ("Status of partition reassignment:\n"
                                 "Reassignment of partition stuck-0 is still in progress.\n\n")
        admin = AdminClient({"bootstrap.servers": cluster[0].bootstrap})
        with pytest.raises(KafkaException) as refused:
            admin.create_partitions([NewPartitions("stuck", 2)])["stuck"].result(10)
        assert refused.value.args[0].name() == "REASSIGNMENT_IN_PROGRESS"

        cancel = tool(cluster, "--reassignment-json-file", str(plan), "--cancel")
        assert cancel.stdout == ("Successfully cancelled partition reassignment for: stuck-0\n"
                                 "None of the specified partition moves are active."
                                 "Clearing broker-level throttles on brokers 1,2,3\n"
                                 "Clearing topic-level throttles on topic stuck\n")
        partition = topic_metadata(cluster[0].bootstrap, "stuck").topics["stuck"].partitions[0]
        assert (partition.replicas, partition.leader, partition.isrs) == ([1], 1, [1])
        topic_znode = json.loads(zk_client.get("/brokers/topics/stuck")[0])
        assert (topic_znode["partitions"], topic_znode["adding_replicas"], topic_znode["removing_replicas"]) \
            == ({"0": [1]}, {}, {})
        assert tool(cluster, "--list").stdout == "No partition reassignments found.\n"
        verify = tool(cluster, "--reassignment-json-file", str(plan), "--verify")
        assert f"There is no active reassignment of partition stuck-0, but replica set is 1 rather " \
               f"than 1,{dead}." in verify.stdout
    finally:
        for broker in cluster:
            broker.kill()


def test_the_reassignment_apis_refuse_bad_targets_and_cancelling_nothing(cluster):
    create_topic_on(cluster, "still", {0: [1]})
    admin = KafkaAdminClient(bootstrap_servers=cluster[0].bootstrap)
    try:
        tp = KafkaTopicPartition("still", 0)
        assert admin.alter_partition_reassignments({tp: [1, 7]}) == {tp: InvalidReplicationAssignmentError}
        assert admin.alter_partition_reassignments({tp: [2, 2]}) == {tp: InvalidReplicationAssignmentError}
        assert admin.alter_partition_reassignments({tp: None}) == {tp: NoReassignmentInProgressError}
        missing = KafkaTopicPartition("still", 5)
        assert admin.alter_partition_reassignments({missing: [1]}) == {missing: UnknownTopicOrPartitionError}
        assert admin.list_partition_reassignments() == {}
    finally:
        admin.close()


def test_a_new_controller_finishes_a_reassignment_the_old_one_started(tmp_path, zk_connect):
    cluster = start_cluster(tmp_path, zk_connect, **{"zookeeper.session.timeout.ms": "60000"})
    try:
        controller = topic_metadata(cluster[0].bootstrap, None).controller_id
        leader, target = [b for b in (1, 2, 3) if b != controller]
        create_topic_on(cluster, "handover", {0: [leader]})
        values = produce(cluster, "handover", 100)
        cluster[target - 1].process.send_signal(signal.SIGSTOP)  # registered, but cannot follow yet
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": "handover", "partition": 0, "replicas": [leader, target]}]}))
        assert tool(cluster, "--reassignment-json-file", str(plan), "--execute").returncode == 0

        cluster[controller - 1].stop()
        live = [b for i, b in enumerate(cluster, start=1) if i != controller]
        wait_for(lambda: topic_metadata(live[0].bootstrap, None).controller_id == leader, timeout_s=30)
        cluster[target - 1].process.send_signal(signal.SIGCONT)

        bootstrap = cluster[leader - 1].bootstrap
        wait_for(lambda: sorted(topic_metadata(bootstrap, "handover").topics["handover"]
                                .partitions[0].isrs) == sorted([leader, target]), timeout_s=60)
        wait_for(lambda: "is completed." in tool(cluster, "--reassignment-json-file", str(plan),
                                                 "--verify").stdout, timeout_s=60, interval_s=0.5)
        assert consume(live, "handover", len(values)) == values
    finally:
        for broker in cluster:
            if broker.process is not None and broker.process.poll() is None:
                broker.process.send_signal(signal.SIGCONT)
            broker.kill()
