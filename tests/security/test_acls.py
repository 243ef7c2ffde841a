"""ACL authorization on a single node, with real clients over SASL_PLAINTEXT (PLAIN users admin,
alice, bob; admin is the super user): what each principal may produce, consume and see, the ACL
APIs and their filters, and the rules Kafka's AclAuthorizer applies (prefixes, deny over allow,
wildcards, allow.everyone.if.no.acl.found), persisted across a restart."""

from __future__ import annotations

import subprocess
import sys
import uuid

import confluent_kafka
import kafka
import kafka.admin
import kafka.errors
import pytest
from acl_helpers import (
    ANY_ACL,
    PASSWORDS,
    SASL_OVERRIDES,
    admin,
    allow,
    create_acls,
    end_offset,
    failure_code,
    forget_admins,
    kafka_python_sasl,
    new_topic,
    produce,
    sasl,
)
from confluent_kafka.admin import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from logbroker.testing import BrokerProcess

@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("acl-broker"), overrides=SASL_OVERRIDES) as broker:
        yield broker
        forget_admins()


# -- produce ----------------------------------------------------------------------------------

def test_write_allowed_only_to_the_principal_with_an_acl(acl_broker):
    topic = new_topic(acl_broker)
    # bob may see the topic (Read implies Describe) but not write to it: his Produce requests
    # reach the broker and are refused there.
    create_acls(acl_broker, allow("User:alice", AclOperation.WRITE, topic),
                allow("User:bob", AclOperation.READ, topic))
    assert produce(acl_broker, "alice", topic) == [0, 0, 0]
    assert produce(acl_broker, "bob", topic) == [confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED] * 3
    assert end_offset(acl_broker, topic) == 3


def test_kafka_python_producer_without_write_gets_topic_authorization_failed(acl_broker):
    topic = new_topic(acl_broker)
    create_acls(acl_broker, allow("User:bob", AclOperation.DESCRIBE, topic))
    producer = kafka.KafkaProducer(**kafka_python_sasl(acl_broker, "bob"), retries=0)
    try:
        with pytest.raises(kafka.errors.TopicAuthorizationFailedError):
            producer.send(topic, b"x").get(timeout=30)
    finally:
        producer.close()
    assert end_offset(acl_broker, topic) == 0


def test_idempotent_producer_needs_write_on_some_topic(acl_broker):
    topic = new_topic(acl_broker, "idem-")
    create_acls(acl_broker, allow("User:alice", AclOperation.WRITE, topic))
    producer = confluent_kafka.Producer({**sasl(acl_broker, "alice"), "enable.idempotence": True})
    delivered = []
    producer.produce(topic, b"once", on_delivery=lambda e, m: delivered.append(e is None))
    producer.flush(30)
    assert delivered == [True] and end_offset(acl_broker, topic) == 1


# -- consume and groups -----------------------------------------------------------------------

def test_consumer_needs_read_on_topic_and_group(acl_broker):
    topic = new_topic(acl_broker)
    group = f"g-{uuid.uuid4().hex[:8]}"
    assert produce(acl_broker, "admin", topic, 5) == [0] * 5
    create_acls(acl_broker, allow("User:alice", AclOperation.READ, topic),
                allow("User:alice", AclOperation.READ, group, resource=ResourceType.GROUP),
                allow("User:bob", AclOperation.READ, topic))
    consumer = confluent_kafka.Consumer({**sasl(acl_broker, "alice"), "group.id": group,
                                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values = []
    try:
        while len(values) < 5:
            message = consumer.poll(30)
            assert message is not None and message.error() is None, message and message.error()
            values.append(message.value())
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    assert values == [f"admin-{i}".encode() for i in range(5)]

    # bob may read the topic but not use the group.
    consumer = confluent_kafka.Consumer({**sasl(acl_broker, "bob"), "group.id": group,
                                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    try:
        message = consumer.poll(30)
        assert message is not None and message.error() is not None
        assert message.error().code() == confluent_kafka.KafkaError.GROUP_AUTHORIZATION_FAILED
    finally:
        consumer.close()


def test_kafka_python_consumer_without_topic_read_is_refused(acl_broker):
    topic = new_topic(acl_broker)
    assert produce(acl_broker, "admin", topic, 2) == [0] * 2
    create_acls(acl_broker, allow("User:bob", AclOperation.DESCRIBE, topic))
    consumer = kafka.KafkaConsumer(**kafka_python_sasl(acl_broker, "bob"),
                                   auto_offset_reset="earliest", consumer_timeout_ms=20_000)
    consumer.assign([kafka.TopicPartition(topic, 0)])
    try:
        with pytest.raises(kafka.errors.TopicAuthorizationFailedError):
            for _ in range(20):
                consumer.poll(timeout_ms=1000)
    finally:
        consumer.close()


def test_offset_commit_without_group_read_is_group_authorization_failed(acl_broker):
    topic = new_topic(acl_broker)
    group = f"g-{uuid.uuid4().hex[:8]}"
    create_acls(acl_broker, allow("User:bob", AclOperation.READ, topic))
    consumer = kafka.KafkaConsumer(**kafka_python_sasl(acl_broker, "bob"), group_id=group,
                                   enable_auto_commit=False)
    try:
        with pytest.raises(kafka.errors.GroupAuthorizationFailedError):
            consumer.commit({kafka.TopicPartition(topic, 0): kafka.OffsetAndMetadata(0, "", -1)})
    finally:
        consumer.close()


def commit_as_admin(broker, group: str, topic: str) -> None:
    consumer = kafka.KafkaConsumer(**kafka_python_sasl(broker, "admin"), group_id=group,
                                   enable_auto_commit=False)
    try:
        consumer.commit({kafka.TopicPartition(topic, 0): kafka.OffsetAndMetadata(1, "", -1)})
    finally:
        consumer.close()


def test_group_admin_apis_check_group_acls(acl_broker):
    topic = new_topic(acl_broker)
    mine, theirs = f"mine-{uuid.uuid4().hex[:8]}", f"theirs-{uuid.uuid4().hex[:8]}"
    for group in (mine, theirs):
        commit_as_admin(acl_broker, group, topic)
    create_acls(acl_broker, allow("User:bob", AclOperation.DESCRIBE, mine, resource=ResourceType.GROUP))
    listed = admin(acl_broker, "bob").list_consumer_groups(request_timeout=30).result()
    assert {g.group_id for g in listed.valid} & {mine, theirs} == {mine}
    assert {g.group_id for g in admin(acl_broker).list_consumer_groups(request_timeout=30).result().valid
            } >= {mine, theirs}
    [described] = admin(acl_broker, "bob").describe_consumer_groups([theirs], request_timeout=30).values()
    assert failure_code(described) == confluent_kafka.KafkaError.GROUP_AUTHORIZATION_FAILED
    [deleted] = admin(acl_broker, "bob").delete_consumer_groups([mine], request_timeout=30).values()
    assert failure_code(deleted) == confluent_kafka.KafkaError.GROUP_AUTHORIZATION_FAILED


def test_describe_groups_reports_the_group_operations_the_caller_may_perform(acl_broker):
    topic = new_topic(acl_broker)
    group = f"ops-{uuid.uuid4().hex[:8]}"
    commit_as_admin(acl_broker, group, topic)
    create_acls(acl_broker, allow("User:alice", AclOperation.READ, group, resource=ResourceType.GROUP),
                allow("User:bob", AclOperation.DESCRIBE, group, resource=ResourceType.GROUP))

    def operations(user: str) -> set:
        [future] = admin(acl_broker, user).describe_consumer_groups(
            [group], include_authorized_operations=True, request_timeout=30).values()
        return set(future.result().authorized_operations)

    assert operations("admin") == {AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE}
    assert operations("alice") == {AclOperation.READ, AclOperation.DESCRIBE}  # Read implies Describe
    assert operations("bob") == {AclOperation.DESCRIBE}
    [plain] = admin(acl_broker, "bob").describe_consumer_groups([group], request_timeout=30).values()
    assert plain.result().authorized_operations is None


def test_topic_admin_needs_create_delete_and_config_acls(acl_broker):
    name = f"made-by-bob-{uuid.uuid4().hex[:8]}"
    [created] = admin(acl_broker, "bob").create_topics([NewTopic(name, 1, 1)], request_timeout=30).values()
    assert failure_code(created) == confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED
    create_acls(acl_broker, allow("User:bob", AclOperation.CREATE, "made-by-bob-",
                                  pattern=ResourcePatternType.PREFIXED))
    admin(acl_broker, "bob").create_topics([NewTopic(name, 1, 1)])[name].result(30)
    resource = ConfigResource(ConfigResource.Type.TOPIC, name)
    [configs] = admin(acl_broker, "bob").describe_configs([resource], request_timeout=30).values()
    assert failure_code(configs) == confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED
    [deleted] = admin(acl_broker, "bob").delete_topics([name], request_timeout=30).values()
    assert failure_code(deleted) == confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert name in admin(acl_broker).list_topics(timeout=30).topics


# -- metadata ---------------------------------------------------------------------------------

def test_metadata_hides_topics_the_principal_may_not_describe(acl_broker):
    visible, hidden = new_topic(acl_broker, "vis-"), new_topic(acl_broker, "hid-")
    create_acls(acl_broker, allow("User:bob", AclOperation.WRITE, visible))  # Write implies Describe
    topics = admin(acl_broker, "bob").list_topics(timeout=30).topics
    assert visible in topics and hidden not in topics
    assert {visible, hidden} <= set(admin(acl_broker).list_topics(timeout=30).topics)
    named = admin(acl_broker, "bob").list_topics(hidden, timeout=30).topics[hidden]
    assert named.error.code() == confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_auto_create_needs_create(acl_broker):
    name = f"auto-{uuid.uuid4().hex[:8]}"
    create_acls(acl_broker, allow("User:bob", AclOperation.DESCRIBE, name))
    consumer = kafka.KafkaConsumer(**kafka_python_sasl(acl_broker, "bob"))
    try:
        assert not consumer.partitions_for_topic(name)
    finally:
        consumer.close()
    assert name not in admin(acl_broker).list_topics(timeout=30).topics


# -- the authorizer's rules -------------------------------------------------------------------

def test_prefixed_acl_covers_every_topic_with_the_prefix(acl_broker):
    prefix = f"pay-{uuid.uuid4().hex[:6]}-"
    inside, outside = new_topic(acl_broker, prefix), new_topic(acl_broker, "other-")
    create_acls(acl_broker, allow("User:alice", AclOperation.WRITE, prefix,
                                  pattern=ResourcePatternType.PREFIXED),
                allow("User:alice", AclOperation.DESCRIBE, outside))
    assert produce(acl_broker, "alice", inside, 2) == [0, 0]
    assert produce(acl_broker, "alice", outside, 1) == [
        confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED]
    assert (end_offset(acl_broker, inside), end_offset(acl_broker, outside)) == (2, 0)


def test_deny_wins_over_allow_and_wildcard_principal(acl_broker):
    topic = new_topic(acl_broker)
    create_acls(acl_broker, allow("User:*", AclOperation.ALL, topic),
                allow("User:bob", AclOperation.WRITE, topic, permission=AclPermissionType.DENY))
    assert produce(acl_broker, "alice", topic, 1) == [0]
    assert produce(acl_broker, "bob", topic, 1) == [
        confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED]
    assert end_offset(acl_broker, topic) == 1


def test_denial_is_logged_in_kafkas_format(acl_broker):
    topic = new_topic(acl_broker)
    create_acls(acl_broker, allow("User:bob", AclOperation.READ, topic))
    produce(acl_broker, "bob", topic, 1)
    assert (f"Principal = User:bob is Denied Operation = Write from host = 127.0.0.1 on resource = "
            f"Topic:LITERAL:{topic} for request = Produce with resourceRefCount = 1"
            ) in acl_broker.log_path.read_text()


# -- the ACL APIs -----------------------------------------------------------------------------

def test_describe_and_delete_acls_with_filters(acl_broker):
    topic = new_topic(acl_broker)
    create_acls(acl_broker, allow("User:alice", AclOperation.READ, topic),
                allow("User:bob", AclOperation.READ, topic),
                allow("User:bob", AclOperation.WRITE, topic))
    by_topic = AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.ANY, None, None,
                                AclOperation.ANY, AclPermissionType.ANY)
    assert len(admin(acl_broker).describe_acls(by_topic).result(30)) == 3
    bobs = AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.MATCH, "User:bob", None,
                            AclOperation.ANY, AclPermissionType.ANY)
    described = admin(acl_broker).describe_acls(bobs).result(30)
    assert sorted(b.operation for b in described) == [AclOperation.READ, AclOperation.WRITE]
    [deleted] = admin(acl_broker).delete_acls([bobs], request_timeout=30).values()
    assert sorted(b.operation for b in deleted.result()) == [AclOperation.READ, AclOperation.WRITE]
    remaining = admin(acl_broker).describe_acls(by_topic).result(30)
    assert [(b.principal, b.operation) for b in remaining] == [("User:alice", AclOperation.READ)]


def kafka_python_describe_all(**config):
    """DescribeAcls of every ACL through kafka-python's admin client (confluent-kafka's
    describe_acls drops the response's top-level error, so errors are checked with this one)."""
    client = kafka.admin.KafkaAdminClient(**config)
    try:
        return client.describe_acls(kafka.admin.ACLFilter(
            principal=None, host=None, operation=kafka.admin.ACLOperation.ANY,
            permission_type=kafka.admin.ACLPermissionType.ANY,
            resource_pattern=kafka.admin.ResourcePatternFilter(
                kafka.admin.ResourceType.ANY, None, kafka.admin.ACLResourcePatternType.ANY)))
    finally:
        client.close()


def test_acl_apis_need_cluster_permissions_and_valid_bindings(acl_broker):
    with pytest.raises(kafka.errors.ClusterAuthorizationFailedError):
        kafka_python_describe_all(**kafka_python_sasl(acl_broker, "bob"))
    acls, error = kafka_python_describe_all(**kafka_python_sasl(acl_broker, "admin"))
    assert error is kafka.errors.NoError and acls
    [future] = admin(acl_broker, "bob").create_acls(
        [allow("User:bob", AclOperation.ALL, "x")], request_timeout=30).values()
    assert failure_code(future) == confluent_kafka.KafkaError.CLUSTER_AUTHORIZATION_FAILED
    [future] = admin(acl_broker).create_acls(
        [allow("User:bob", AclOperation.ALL, "not-the-cluster", resource=ResourceType.BROKER)],
        request_timeout=30).values()
    assert failure_code(future) == confluent_kafka.KafkaError.INVALID_REQUEST


def test_acl_apis_without_an_authorizer_are_security_disabled(logbroker):
    with pytest.raises(kafka.errors.SecurityDisabledError):
        kafka_python_describe_all(bootstrap_servers=logbroker)
    client = AdminClient({"bootstrap.servers": logbroker})
    [future] = client.create_acls([allow("User:bob", AclOperation.ALL, "x")],
                                  request_timeout=30).values()
    assert failure_code(future) == confluent_kafka.KafkaError.SECURITY_DISABLED


# -- configuration and persistence ------------------------------------------------------------

def test_acls_survive_a_restart_and_allow_everyone_if_no_acl_found(tmp_path):
    overrides = {**SASL_OVERRIDES, "allow.everyone.if.no.acl.found": "true"}
    with BrokerProcess(tmp_path, overrides=overrides) as broker:
        guarded, open_topic = new_topic(broker), new_topic(broker)
        create_acls(broker, allow("User:alice", AclOperation.WRITE, guarded))
        broker.restart()
        described = admin(broker).describe_acls(ANY_ACL).result(30)
        assert [(b.name, b.principal, b.operation) for b in described] == [
            (guarded, "User:alice", AclOperation.WRITE)]
        assert produce(broker, "alice", guarded, 1) == [0]
        assert produce(broker, "bob", guarded, 1) == [
            confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED]
        assert produce(broker, "bob", open_topic, 1) == [0]  # no ACL on it: everyone


def test_kraft_standard_authorizer_is_the_same_acl_authorizer(tmp_path):
    overrides = {**SASL_OVERRIDES,
                 "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}
    with BrokerProcess(tmp_path, overrides=overrides) as broker:
        topic = new_topic(broker)  # admin is a super user
        create_acls(broker, allow("User:alice", AclOperation.WRITE, topic))
        assert produce(broker, "alice", topic, 1) == [0]
        assert produce(broker, "bob", topic, 1) == [confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED]
        forget_admins()


def test_unknown_authorizer_class_refuses_startup(tmp_path):
    broker = BrokerProcess(tmp_path, overrides={"authorizer.class.name": "com.example.MyAuthorizer"})
    with pytest.raises(RuntimeError, match="authorizer.class.name"):
        broker.start()


# -- logbroker acls ---------------------------------------------------------------------------

def run_acls(broker: BrokerProcess, tmp_path, *args: str, user: str = "admin"):
    config = tmp_path / f"{user}.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                      f"sasl.username={user}\nsasl.password={PASSWORDS[user]}\n")
    return subprocess.run([sys.executable, "-m", "logbroker.cli", "acls", "--bootstrap-server",
                           broker.bootstrap, "--command-config", str(config), *args],
                          capture_output=True, text=True, timeout=120)


def test_acls_cli_adds_lists_and_removes(acl_broker, tmp_path):
    topic = new_topic(acl_broker)
    group = f"g-{uuid.uuid4().hex[:8]}"
    added = run_acls(acl_broker, tmp_path, "--add", "--allow-principal", "User:alice", "--consumer",
                     "--topic", topic, "--group", group)
    assert added.returncode == 0, added.stderr
    pattern = f"ResourcePattern(resourceType=TOPIC, name={topic}, patternType=LITERAL)"
    assert f"Adding ACLs for resource `{pattern}`: \n" in added.stdout
    assert "\t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)" in added.stdout
    listed = run_acls(acl_broker, tmp_path, "--list", "--topic", topic)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout == (
        f"Current ACLs for resource `{pattern}`: \n"
        " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n"
        "\t(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW) \n\n")
    removed = run_acls(acl_broker, tmp_path, "--remove", "--allow-principal", "User:alice",
                       "--operation", "Describe", "--topic", topic, "--force")
    assert removed.returncode == 0, removed.stderr
    remaining = admin(acl_broker).describe_acls(AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, "User:alice", None, AclOperation.ANY,
        AclPermissionType.ANY)).result(30)
    assert sorted((b.name, b.operation) for b in remaining if b.name in (topic, group)) == [
        (group, AclOperation.READ), (topic, AclOperation.READ)]


def test_acls_cli_reports_missing_permission_in_one_line(acl_broker, tmp_path):
    result = run_acls(acl_broker, tmp_path, "--add", "--allow-principal", "User:bob", "--topic",
                      "anything", user="bob")
    assert result.returncode == 1
    assert result.stderr.startswith("Error: Cannot add ACLs: ")
    assert result.stderr.strip().endswith("(CLUSTER_AUTHORIZATION_FAILED).")
