"""The newest versions of the APIs the broker implements (docs/reference/api-versions.md), field by field:
what each new version adds is answered as Kafka 4.1 answers it. Real clients negotiate these
versions down (librdkafka 2.16 stops at Metadata 12, Fetch 16, ListOffsets 7; kafka-python 3.0
speaks DescribeCluster v2, see test_admin_apis.py), so the requests here are kio's; ListOffsets
v8-10 is in test_list_offsets.py."""

from __future__ import annotations

import time
import uuid

import pytest

from logbroker.records.builder import build_batch

from clients import RawClient, create_topic

pytestmark = pytest.mark.timeout(60)

GROUP_ID_NOT_FOUND = 69
INVALID_REPLICATION_FACTOR = 38
UNKNOWN_TOPIC_ID = 100


def test_metadata_v13_has_a_top_level_error_code(shared_broker, topic):
    create_topic(shared_broker.bootstrap, topic)
    with RawClient(shared_broker.bootstrap) as client:
        answer = client.request(3, 13, topics=[{"name": topic}], allow_auto_topic_creation=False,
                                include_topic_authorized_operations=True)
    assert int(answer.error_code) == 0
    [described] = answer.topics
    assert (described.name, int(described.error_code), len(described.partitions)) == (topic, 0, 1)
    assert described.topic_authorized_operations == 3576  # no authorizer: every topic operation


def test_fetch_v17_serves_consumers_and_ignores_the_follower_directory_id(shared_broker, topic):
    create_topic(shared_broker.bootstrap, topic)
    with RawClient(shared_broker.bootstrap) as client:
        client.produce(topic, 0, build_batch([(b"k", b"v")] * 3))
        data = client.fetch(topic, 0, 0, version=17)
    assert (int(data.error_code), data.high_watermark, data.log_start_offset) == (0, 3, 0)
    assert data.records is not None and len(data.records) > 0


def test_find_coordinator_v6_finds_group_coordinators(shared_broker):
    with RawClient(shared_broker.bootstrap) as client:
        answer = client.request(10, 6, key_type=0, coordinator_keys=["g1", "g2"])
    assert [(c.key, int(c.error_code), c.node_id) for c in answer.coordinators] == [
        ("g1", 0, 0), ("g2", 0, 0)]


def test_describe_groups_v6_says_group_id_not_found(shared_broker):
    group = f"missing-{uuid.uuid4().hex[:8]}"
    with RawClient(shared_broker.bootstrap) as client:
        v6 = client.request(15, 6, groups=[group], include_authorized_operations=False).groups[0]
        v5 = client.request(15, 5, groups=[group], include_authorized_operations=False).groups[0]
    assert (int(v6.error_code), v6.error_message, v6.group_state) == (
        GROUP_ID_NOT_FOUND, f"Group {group} not found.", "Dead")
    assert (int(v5.error_code), v5.group_state) == (0, "Dead")


def test_describe_cluster_v2_lists_no_fenced_brokers(shared_broker):
    with RawClient(shared_broker.bootstrap) as client:
        answer = client.request(60, 2, include_cluster_authorized_operations=False,
                                endpoint_type=1, include_fenced_brokers=True)
    assert int(answer.error_code) == 0
    assert [(b.broker_id, b.is_fenced) for b in answer.brokers] == [(0, False)]


def test_alter_partition_reassignments_v1_may_refuse_a_replication_factor_change(shared_broker, topic):
    create_topic(shared_broker.bootstrap, topic)
    with RawClient(shared_broker.bootstrap) as client:
        def alter(replicas, allow):
            return client.request(45, 1, timeout=5000, allow_replication_factor_change=allow, topics=[
                {"name": topic, "partitions": [{"partition_index": 0, "replicas": replicas}]}])
        refused = alter([0, 1], False)
        allowed = alter([0, 1], True)  # a single node: broker 1 does not exist
        same = alter([0], False)
    [[partition]] = [t.partitions for t in refused.responses]
    assert refused.allow_replication_factor_change is False
    assert (int(partition.error_code), partition.error_message) == (
        INVALID_REPLICATION_FACTOR,
        "The replication factor is changed from 1 to 2 but allowReplicationFactorChange is false")
    assert int(allowed.responses[0].partitions[0].error_code) != INVALID_REPLICATION_FACTOR
    assert int(same.responses[0].partitions[0].error_code) == 0


def test_offset_commit_and_fetch_v10_name_topics_by_id(shared_broker, topic):
    create_topic(shared_broker.bootstrap, topic)
    group, unknown = f"g-{uuid.uuid4().hex[:8]}", uuid.uuid4()
    with RawClient(shared_broker.bootstrap) as client:
        topic_id = client.topic_id(topic)
        committed = client.request(8, 10, group_id=group, generation_id_or_member_epoch=-1,
                                   member_id="", group_instance_id=None, topics=[
                                       {"topic_id": topic_id, "partitions": [
                                           {"partition_index": 0, "committed_offset": 7,
                                            "committed_leader_epoch": -1, "committed_metadata": "m"}]},
                                       {"topic_id": unknown, "partitions": [
                                           {"partition_index": 0, "committed_offset": 1,
                                            "committed_leader_epoch": -1, "committed_metadata": ""}]}])
        fetched = client.request(9, 10, require_stable=False, groups=[{
            "group_id": group, "member_id": None, "member_epoch": -1,
            "topics": [{"topic_id": topic_id, "partition_indexes": [0]},
                       {"topic_id": unknown, "partition_indexes": [0]}]}])
        every = client.request(9, 10, require_stable=False, groups=[{
            "group_id": group, "member_id": None, "member_epoch": -1, "topics": None}])
    assert [(t.topic_id, [int(p.error_code) for p in t.partitions]) for t in committed.topics] == [
        (topic_id, [0]), (unknown, [UNKNOWN_TOPIC_ID])]
    [answer] = fetched.groups
    assert [(t.topic_id, [(int(p.error_code), p.committed_offset, p.metadata) for p in t.partitions])
            for t in answer.topics] == [(topic_id, [(0, 7, "m")]), (unknown, [(UNKNOWN_TOPIC_ID, -1, "")])]
    assert [(t.topic_id, [p.committed_offset for p in t.partitions]) for t in every.groups[0].topics] == [
        (topic_id, [7])]


@pytest.mark.parametrize("version", [8, 10])
def test_offset_fetch_answers_a_topic_named_twice_twice(shared_broker, topic, version):
    # Kafka answers each topic of the request as asked, a repeated one included. v10 names topics
    # by id; a repeated id closed the connection (the answer for it was looked for and not there).
    create_topic(shared_broker.bootstrap, topic)
    group = f"g-{uuid.uuid4().hex[:8]}"
    with RawClient(shared_broker.bootstrap) as client:
        topic_id = client.topic_id(topic)
        while client.request(10, 0, key=group).error_code != 0:  # until __consumer_offsets is there
            time.sleep(0.1)
        committed = client.request(8, 10, group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                   group_instance_id=None, topics=[{"topic_id": topic_id, "partitions": [
                                       {"partition_index": 0, "committed_offset": 7, "committed_leader_epoch": -1,
                                        "committed_metadata": "m"}]}])
        assert [int(p.error_code) for t in committed.topics for p in t.partitions] == [0]
        named = {"topic_id": topic_id} if version >= 10 else {"name": topic}
        member = {"member_id": None, "member_epoch": -1} if version >= 9 else {}
        fetched = client.request(9, version, require_stable=False, groups=[{
            "group_id": group, **member,
            "topics": [{**named, "partition_indexes": [0]}, {**named, "partition_indexes": [1, 0]}]}])
        assert client.request(18, 0).error_code == 0  # the connection is still open
    [answer] = fetched.groups
    asked = topic_id if version >= 10 else topic
    assert [(t.topic_id if version >= 10 else t.name,
             [(p.partition_index, int(p.error_code), p.committed_offset) for p in t.partitions])
            for t in answer.topics] == [(asked, [(0, 0, 7)]), (asked, [(1, 0, -1), (0, 0, 7)])]
