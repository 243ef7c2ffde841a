"""ACLs on a three-broker ZooKeeper cluster: an ACL created through one broker takes effect on
another, and the znodes are Kafka's (/kafka-acl, /kafka-acl-extended/prefixed, the change
notices) with Kafka's JSON, so Kafka's own tools read them."""

from __future__ import annotations

import json
import uuid

import confluent_kafka
import pytest
from acl_helpers import (
    SASL_OVERRIDES,
    admin,
    allow,
    create_acls,
    end_offset,
    forget_admins,
    produce,
)
from confluent_kafka.admin import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kazoo.client import KazooClient

from logbroker.testing import wait_for


CLUSTER_MARK = pytest.mark.logbroker_cluster(brokers=3, **SASL_OVERRIDES)


@pytest.fixture
def cluster(logbroker_cluster):
    """Brokers 1, 2, 3 with SASL PLAIN users and the AclAuthorizer (admin is the super user)."""
    yield [logbroker_cluster.brokers[i] for i in (1, 2, 3)]
    forget_admins()


@pytest.fixture
def zk_client(logbroker_cluster):
    client = KazooClient(hosts=logbroker_cluster.zk_connect)
    client.start(timeout=30)
    yield client
    client.stop()
    client.close()


def topic_on_broker_3(cluster) -> str:
    """A topic whose only replica, hence leader, is broker 3: its Produce requests go there."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    admin(cluster[0]).create_topics([NewTopic(name, num_partitions=1, replica_assignment=[[3]])])[name].result(60)

    def led_by_3():
        topic = admin(cluster[2]).list_topics(name, timeout=10).topics.get(name)
        return topic is not None and topic.error is None and topic.partitions[0].leader == 3
    wait_for(led_by_3, timeout_s=60, what=f"broker 3 leading {name}")
    return name


@CLUSTER_MARK
def test_acl_created_through_broker_1_applies_on_broker_3(cluster, zk_client):
    broker_1, broker_2, broker_3 = cluster
    topic = topic_on_broker_3(cluster)
    create_acls(broker_1, allow("User:alice", AclOperation.DESCRIBE, topic))
    wait_for(lambda: topic in admin(broker_3, "alice").list_topics(timeout=10).topics,
             what="alice seeing the topic")
    assert produce(broker_3, "alice", topic, 1) == [
        confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED]

    create_acls(broker_1, allow("User:alice", AclOperation.WRITE, topic))
    wait_for(lambda: produce(broker_3, "alice", topic, 1) == [0], what="broker 3 allowing Write")
    assert end_offset(broker_3, topic) == 1  # the refused attempts appended nothing

    znode = json.loads(zk_client.get(f"/kafka-acl/Topic/{topic}")[0])
    assert znode["version"] == 1 and sorted(znode["acls"], key=lambda a: a["operation"]) == [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Describe", "host": "*"},
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Write", "host": "*"}]
    notices = [zk_client.get(f"/kafka-acl-changes/{c}")[0]
               for c in zk_client.get_children("/kafka-acl-changes")]
    assert notices.count(f"Topic:{topic}".encode()) == 2
    assert all(c.startswith("acl_changes_") for c in zk_client.get_children("/kafka-acl-changes"))

    # Deleted through broker 2: broker 3 refuses again.
    selector = AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice",
                                None, AclOperation.WRITE, AclPermissionType.ANY)
    [deleted] = admin(broker_2).delete_acls([selector], request_timeout=30).values()
    assert len(deleted.result()) == 1
    wait_for(lambda: produce(broker_3, "alice", topic, 1) == [
        confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED], what="broker 3 refusing Write")
    # (Writes may succeed until the notice reaches broker 3; once refused, nothing is appended.)
    refused_at = end_offset(broker_3, topic)
    assert produce(broker_3, "alice", topic, 2) == [
        confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED] * 2
    assert end_offset(broker_3, topic) == refused_at


@CLUSTER_MARK
def test_prefixed_acls_are_kept_in_kafka_extended_layout(cluster, zk_client):
    broker_1, _, broker_3 = cluster
    prefix = f"pre-{uuid.uuid4().hex[:6]}-"
    create_acls(broker_1, allow("User:bob", AclOperation.READ, prefix,
                                pattern=ResourcePatternType.PREFIXED))
    assert json.loads(zk_client.get(f"/kafka-acl-extended/prefixed/Topic/{prefix}")[0]) == {
        "version": 1,
        "acls": [{"principal": "User:bob", "permissionType": "Allow", "operation": "Read", "host": "*"}]}
    notices = [json.loads(zk_client.get(f"/kafka-acl-extended-changes/{c}")[0])
               for c in zk_client.get_children("/kafka-acl-extended-changes")]
    assert {"version": 1, "resourceType": "Topic", "name": prefix, "patternType": "Prefixed"} in notices
    described = wait_for(lambda: admin(broker_3).describe_acls(AclBindingFilter(
        ResourceType.TOPIC, prefix, ResourcePatternType.PREFIXED, None, None, AclOperation.ANY,
        AclPermissionType.ANY)).result(30), what="the prefixed ACL on broker 3")
    assert [(b.principal, b.operation) for b in described] == [("User:bob", AclOperation.READ)]
