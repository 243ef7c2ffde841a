"""ACLs on the log-dir APIs and DescribeTopicPartitions, with kafka-python over SASL_PLAINTEXT:
DescribeLogDirs needs DESCRIBE on the cluster, AlterReplicaLogDirs ALTER on the cluster, and
DescribeTopicPartitions answers only the topics the principal may DESCRIBE."""

from __future__ import annotations

import kafka
import pytest
from acl_helpers import SASL_OVERRIDES, allow, create_acls, forget_admins, kafka_python_sasl, new_topic
from confluent_kafka.admin import AclOperation, ResourceType

from logbroker.testing import BrokerProcess

CLUSTER_AUTHORIZATION_FAILED = 31
TOPIC_AUTHORIZATION_FAILED = 29


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("acl-log-dirs"), overrides=SASL_OVERRIDES) as broker:
        yield broker
        forget_admins()


def kafka_python_admin(broker, user: str) -> kafka.KafkaAdminClient:
    return kafka.KafkaAdminClient(client_id=f"acl-{user}", **kafka_python_sasl(broker, user))


def test_describe_log_dirs_needs_describe_on_the_cluster(acl_broker):
    topic = new_topic(acl_broker)
    admin = kafka_python_admin(acl_broker, "alice")
    try:
        # kafka-python does not raise the top-level CLUSTER_AUTHORIZATION_FAILED: no dirs at all
        assert admin.describe_log_dirs() == [{"broker": 0, "log_dirs": []}]
    finally:
        admin.close()
    assert ("Principal = User:alice is Denied Operation = Describe from host = 127.0.0.1 on resource = "
            "Cluster:LITERAL:kafka-cluster for request = DescribeLogDirs") in acl_broker.log_path.read_text()
    create_acls(acl_broker, allow("User:alice", AclOperation.DESCRIBE, "kafka-cluster", resource=ResourceType.BROKER))
    admin = kafka_python_admin(acl_broker, "alice")
    try:
        [answer] = admin.describe_log_dirs({topic: [0]})
    finally:
        admin.close()
    [log_dir] = answer["log_dirs"]
    assert log_dir["error_code"] == 0
    assert [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in log_dir["topics"]] == [(topic, [0])]


def test_alter_replica_log_dirs_needs_alter_on_the_cluster(acl_broker):
    topic = new_topic(acl_broker)
    admin = kafka_python_admin(acl_broker, "bob")
    try:
        result = admin.alter_replica_log_dirs({kafka.TopicPartitionReplica(topic, 0, 0): "/anywhere"})
    finally:
        admin.close()
    assert [e.errno for e in result.values()] == [CLUSTER_AUTHORIZATION_FAILED]


def test_describe_topic_partitions_answers_only_described_topics(acl_broker):
    mine, theirs = new_topic(acl_broker, "mine"), new_topic(acl_broker, "theirs")
    create_acls(acl_broker, allow("User:bob", AclOperation.DESCRIBE, mine))
    admin = kafka_python_admin(acl_broker, "bob")
    try:
        named = admin.describe_topic_partitions([mine, theirs, "no-such-topic"])
        everything = admin.describe_topic_partitions([])
    finally:
        admin.close()
    codes = {t["name"]: (t["error_code"], t["topic_id"].int if t["topic_id"] else 0) for t in named["topics"]}
    assert codes[theirs] == (TOPIC_AUTHORIZATION_FAILED, 0)
    assert codes["no-such-topic"] == (TOPIC_AUTHORIZATION_FAILED, 0)  # existence is not disclosed
    assert codes[mine][0] == 0 and codes[mine][1] != 0
    assert [t["name"] for t in everything["topics"]] == [mine]
