"""The group APIs at the protocol level: error codes and edge cases clients rarely provoke."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from logbroker.protocol.apis import ApiKey
from raw import Raw

MEMBER_ID_REQUIRED, INVALID_SESSION_TIMEOUT, REBALANCE_IN_PROGRESS = 79, 26, 27
UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID = 25, 22, 82
COORDINATOR_NOT_AVAILABLE, NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND, GROUP_SUBSCRIBED_TO_TOPIC = 15, 68, 69, 86
CONSUMER_METADATA = b"\x00\x01\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff"  # subscribes to topic "t"


def group() -> str:
    return f"g-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def bootstrap(group_broker) -> str:
    admin = AdminClient({"bootstrap.servers": group_broker.bootstrap})
    for future in admin.create_topics([NewTopic("t", 3, 1), NewTopic("u", 2, 1)]).values():
        future.result()
    with Raw(group_broker.bootstrap) as raw:  # creates __consumer_offsets
        assert raw.request(ApiKey.FIND_COORDINATOR, 0, key="warmup").error_code == 0
    return group_broker.bootstrap


def join(raw: Raw, group_id: str, member_id: str = "", *, version: int = 5, session_ms: int = 10_000,
         instance: str | None = None, metadata: bytes = CONSUMER_METADATA):
    return raw.request(ApiKey.JOIN_GROUP, version, group_id=group_id, session_timeout=session_ms,
                       rebalance_timeout=10_000, member_id=member_id, group_instance_id=instance,
                       protocol_type="consumer", protocols=[{"name": "range", "metadata": metadata}])


def join_stable(raw: Raw, group_id: str, *, instance: str | None = None, assignment: bytes = b"a",
                session_ms: int = 10_000):
    first = join(raw, group_id, instance=instance, session_ms=session_ms)
    if first.error_code == MEMBER_ID_REQUIRED:
        first = join(raw, group_id, first.member_id, instance=instance, session_ms=session_ms)
    assert first.error_code == 0
    sync = raw.request(ApiKey.SYNC_GROUP, 5, group_id=group_id, generation_id=first.generation_id,
                       member_id=first.member_id, group_instance_id=instance, protocol_type="consumer",
                       protocol_name="range", assignments=[{"member_id": first.member_id, "assignment": assignment}])
    assert sync.error_code == 0 and sync.assignment == assignment
    return first


def heartbeat(raw: Raw, group_id: str, member_id: str, generation: int, instance: str | None = None) -> int:
    return raw.request(ApiKey.HEARTBEAT, 4, group_id=group_id, generation_id=generation, member_id=member_id,
                       group_instance_id=instance).error_code


def test_find_coordinator_answers_this_broker_for_groups_and_transactions(bootstrap):
    host, port = bootstrap.rsplit(":", 1)
    with Raw(bootstrap) as raw:
        v3 = raw.request(ApiKey.FIND_COORDINATOR, 3, key="some-group", key_type=0)
        assert (v3.error_code, v3.host, v3.port, v3.node_id) == (0, host, int(port), 0)
        v4 = raw.request(ApiKey.FIND_COORDINATOR, 4, key_type=0, coordinator_keys=["a", "b"])
        assert [(c.key, c.error_code, c.port) for c in v4.coordinators] == [("a", 0, int(port)), ("b", 0, int(port))]
        txn = raw.request(ApiKey.FIND_COORDINATOR, 4, key_type=1, coordinator_keys=["txn"])
        assert [(c.key, c.error_code, c.port) for c in txn.coordinators] == [("txn", 0, int(port))]
        other = raw.request(ApiKey.FIND_COORDINATOR, 3, key="x", key_type=2)
        assert other.error_code == 42  # INVALID_REQUEST


def test_first_join_requires_member_id_then_leader_gets_metadata(bootstrap):
    g = group()
    with Raw(bootstrap) as raw:
        first = join(raw, g)
        assert first.error_code == MEMBER_ID_REQUIRED and first.member_id.startswith("raw-")
        second = join(raw, g, first.member_id)
        assert (second.error_code, second.generation_id, second.leader) == (0, 1, first.member_id)
        assert [(m.member_id, m.metadata) for m in second.members] == [(first.member_id, CONSUMER_METADATA)]
        # An empty assignment is a valid zero-length byte string, passed through.
        sync = raw.request(ApiKey.SYNC_GROUP, 3, group_id=g, generation_id=1, member_id=first.member_id,
                           assignments=[{"member_id": first.member_id, "assignment": b""}])
        assert (sync.error_code, sync.assignment) == (0, b"")
        assert heartbeat(raw, g, first.member_id, 1) == 0
        assert heartbeat(raw, g, first.member_id, 7) == ILLEGAL_GENERATION
        assert heartbeat(raw, g, "nobody", 1) == UNKNOWN_MEMBER_ID


def test_v3_join_gets_a_member_id_at_once(bootstrap):
    with Raw(bootstrap) as raw:
        response = join(raw, group(), version=3)
        assert response.error_code == 0 and response.member_id and response.generation_id == 1


def test_session_timeout_outside_bounds_is_refused(bootstrap):
    with Raw(bootstrap) as raw:
        assert join(raw, group(), session_ms=10).error_code == INVALID_SESSION_TIMEOUT
        assert join(raw, group(), session_ms=1_800_001).error_code == INVALID_SESSION_TIMEOUT


def test_new_member_makes_others_rejoin_through_heartbeat(bootstrap):
    g = group()
    with Raw(bootstrap) as a, Raw(bootstrap) as b:
        first = join_stable(a, g)
        b.send(ApiKey.JOIN_GROUP, 3, group_id=g, session_timeout=10_000, rebalance_timeout=10_000,
               member_id="", protocol_type="consumer", protocols=[{"name": "range", "metadata": b"b"}])
        # b's JoinGroup travels on another connection: heartbeat until the broker has seen it.
        deadline = time.monotonic() + 5
        while (code := heartbeat(a, g, first.member_id, 1)) == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert code == REBALANCE_IN_PROGRESS
        rejoined = join(a, g, first.member_id)
        b_joined = b.receive(ApiKey.JOIN_GROUP, 3)
        assert rejoined.generation_id == b_joined.generation_id == 2
        assert rejoined.leader == first.member_id and len(rejoined.members) == 2 and b_joined.members == ()


def test_static_member_rejoins_without_rebalance_and_fences_its_old_id(bootstrap):
    g = group()
    with Raw(bootstrap) as raw:
        first = join_stable(raw, g, instance="i1", assignment=b"mine")
        again = join(raw, g, instance="i1")
        assert again.error_code == 0 and again.member_id != first.member_id
        assert again.generation_id == first.generation_id  # no rebalance
        sync = raw.request(ApiKey.SYNC_GROUP, 5, group_id=g, generation_id=again.generation_id,
                           member_id=again.member_id, group_instance_id="i1", protocol_type="consumer",
                           protocol_name="range", assignments=[])
        assert (sync.error_code, sync.assignment) == (0, b"mine")
        assert heartbeat(raw, g, first.member_id, first.generation_id, "i1") == FENCED_INSTANCE_ID
        assert heartbeat(raw, g, again.member_id, again.generation_id, "i1") == 0


def test_sync_group_checks_protocol_names(bootstrap):
    g = group()
    with Raw(bootstrap) as raw:
        joined = join(raw, g, join(raw, g).member_id)
        sync = raw.request(ApiKey.SYNC_GROUP, 5, group_id=g, generation_id=1, member_id=joined.member_id,
                           protocol_type="consumer", protocol_name="roundrobin", assignments=[])
        assert sync.error_code == 23  # INCONSISTENT_GROUP_PROTOCOL


def test_leave_group_batched_reports_each_member(bootstrap):
    g = group()
    with Raw(bootstrap) as raw:
        first = join_stable(raw, g, instance="s1")
        left = raw.request(ApiKey.LEAVE_GROUP, 5, group_id=g, members=[
            {"member_id": "", "group_instance_id": "s1"}, {"member_id": "ghost", "group_instance_id": None}])
        assert left.error_code == 0
        assert [(m.member_id, m.error_code) for m in left.members] == [("", 0), ("ghost", UNKNOWN_MEMBER_ID)]
        assert heartbeat(raw, g, first.member_id, first.generation_id) == UNKNOWN_MEMBER_ID
        described = raw.request(ApiKey.DESCRIBE_GROUPS, 5, groups=[g], include_authorized_operations=False)
        assert described.groups[0].group_state == "Empty"


def test_commit_and_fetch_offsets_with_metadata(bootstrap):
    g = group()
    with Raw(bootstrap) as raw:
        committed = raw.request(ApiKey.OFFSET_COMMIT, 2, group_id=g, generation_id_or_member_epoch=-1, member_id="",
                                retention_time=-1, topics=[{"name": "t", "partitions": [
                                    {"partition_index": 0, "committed_offset": 5, "committed_metadata": "five"},
                                    {"partition_index": 9, "committed_offset": 1, "committed_metadata": None}]}])
        assert [p.error_code for p in committed.topics[0].partitions] == [0, 3]
        raw.request(ApiKey.OFFSET_COMMIT, 9, group_id=g, generation_id_or_member_epoch=-1, member_id="",
                    topics=[{"name": "u", "partitions": [{"partition_index": 1, "committed_offset": 7,
                                                          "committed_leader_epoch": 3, "committed_metadata": None}]}])
        v1 = raw.request(ApiKey.OFFSET_FETCH, 1, group_id=g, topics=[{"name": "t", "partition_indexes": [0, 1]}])
        assert [(p.committed_offset, p.metadata) for p in v1.topics[0].partitions] == [(5, "five"), (-1, "")]
        everything = raw.request(ApiKey.OFFSET_FETCH, 7, group_id=g, topics=None, require_stable=True)
        assert sorted((t.name, p.partition_index, p.committed_offset, p.committed_leader_epoch)
                      for t in everything.topics for p in t.partitions) == [("t", 0, 5, -1), ("u", 1, 7, 3)]
        batched = raw.request(ApiKey.OFFSET_FETCH, 8, require_stable=False, groups=[
            {"group_id": g, "topics": [{"name": "u", "partition_indexes": [1]}]},
            {"group_id": "never-seen", "topics": None}])
        assert batched.groups[0].topics[0].partitions[0].committed_offset == 7
        assert (batched.groups[1].error_code, batched.groups[1].topics) == (0, ())


def test_commit_from_a_stale_generation_is_refused(bootstrap):
    g = group()
    with Raw(bootstrap) as raw:
        member = join_stable(raw, g)
        commit = lambda generation, member_id: raw.request(  # noqa: E731
            ApiKey.OFFSET_COMMIT, 8, group_id=g, generation_id_or_member_epoch=generation, member_id=member_id,
            topics=[{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1}]}]
        ).topics[0].partitions[0].error_code
        assert commit(member.generation_id + 1, member.member_id) == ILLEGAL_GENERATION
        assert commit(member.generation_id, "other") == UNKNOWN_MEMBER_ID
        assert commit(member.generation_id, member.member_id) == 0


def test_offset_delete_and_delete_groups(bootstrap):
    g = group()
    with Raw(bootstrap) as raw:
        member = join_stable(raw, g)
        raw.request(ApiKey.OFFSET_COMMIT, 8, group_id=g, generation_id_or_member_epoch=member.generation_id,
                    member_id=member.member_id, topics=[
                        {"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1}]},
                        {"name": "u", "partitions": [{"partition_index": 0, "committed_offset": 2}]}])
        deleted = raw.request(ApiKey.OFFSET_DELETE, 0, group_id=g, topics=[
            {"name": "t", "partitions": [{"partition_index": 0}]}, {"name": "u", "partitions": [{"partition_index": 0}]}])
        assert [t.partitions[0].error_code for t in deleted.topics] == [GROUP_SUBSCRIBED_TO_TOPIC, 0]
        fetched = raw.request(ApiKey.OFFSET_FETCH, 7, group_id=g, topics=None, require_stable=False)
        assert [(t.name, t.partitions[0].committed_offset) for t in fetched.topics] == [("t", 1)]
        result = raw.request(ApiKey.DELETE_GROUPS, 2, groups_names=[g, "no-such-group"]).results
        assert [r.error_code for r in result] == [NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND]
        raw.request(ApiKey.LEAVE_GROUP, 3, group_id=g, members=[{"member_id": member.member_id}])
        assert raw.request(ApiKey.DELETE_GROUPS, 2, groups_names=[g]).results[0].error_code == 0
        assert raw.request(ApiKey.OFFSET_FETCH, 7, group_id=g, topics=None, require_stable=False).topics == ()
        listed = raw.request(ApiKey.LIST_GROUPS, 4, states_filter=["empty"])
        assert g not in {x.group_id for x in listed.groups}


def test_list_groups_filters_by_state(bootstrap):
    stable, empty = group(), group()
    with Raw(bootstrap) as raw:
        join_stable(raw, stable)
        raw.request(ApiKey.OFFSET_COMMIT, 8, group_id=empty, generation_id_or_member_epoch=-1, member_id="",
                    topics=[{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1}]}])
        only_stable = {g.group_id: g.group_state for g in raw.request(ApiKey.LIST_GROUPS, 4, states_filter=["Stable"]).groups}
        assert only_stable.get(stable) == "Stable" and empty not in only_stable
        every = {g.group_id: g.protocol_type for g in raw.request(ApiKey.LIST_GROUPS, 0).groups}
        assert every[stable] == "consumer" and every[empty] == ""


def test_group_and_members_come_back_after_a_restart(restartable_broker):
    broker = restartable_broker
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("t", 1, 1)])["t"].result(15)
    g = group()
    with Raw(broker.bootstrap) as raw:
        assert raw.request(ApiKey.FIND_COORDINATOR, 0, key=g).error_code == 0
        member = join_stable(raw, g, instance="keep", assignment=b"assigned-bytes")
        raw.request(ApiKey.OFFSET_COMMIT, 8, group_id=g, generation_id_or_member_epoch=member.generation_id,
                    member_id=member.member_id, topics=[{"name": "t", "partitions": [
                        {"partition_index": 0, "committed_offset": 3, "committed_metadata": "m"}]}])
    broker.stop()
    broker.start()
    with Raw(broker.bootstrap) as raw:
        described = raw.request(ApiKey.DESCRIBE_GROUPS, 5, groups=[g], include_authorized_operations=False).groups[0]
        assert (described.group_state, described.protocol_data) == ("Stable", "range")
        assert [(m.member_id, m.group_instance_id, m.member_metadata, m.member_assignment) for m in described.members] == [
            (member.member_id, "keep", CONSUMER_METADATA, b"assigned-bytes")]
        assert heartbeat(raw, g, member.member_id, member.generation_id, "keep") == 0
        fetched = raw.request(ApiKey.OFFSET_FETCH, 1, group_id=g, topics=[{"name": "t", "partition_indexes": [0]}])
        assert (fetched.topics[0].partitions[0].committed_offset, fetched.topics[0].partitions[0].metadata) == (3, "m")


@pytest.mark.parametrize("how", ["its session expires", "it leaves"])
def test_a_group_whose_last_member_goes_is_empty_and_stays_empty_after_a_restart(restartable_broker, how):
    """Kafka's onCompleteJoin with nobody left: when the last member goes — its session expires (a
    consumer killed with -9) or it sends LeaveGroup (a consumer's close) — the group becomes Empty
    in a new generation and that is stored, so a restart does not bring the member back. One INFO
    line for an expiry, nothing logged at ERROR."""
    broker = restartable_broker
    g = group()
    with Raw(broker.bootstrap) as raw:
        assert raw.request(ApiKey.FIND_COORDINATOR, 0, key=g).error_code == 0
        member = join_stable(raw, g, session_ms=1000)
        if how == "it leaves":
            left = raw.request(ApiKey.LEAVE_GROUP, 3, group_id=g, members=[{"member_id": member.member_id}])
            assert (left.error_code, [m.error_code for m in left.members]) == (0, [0])
        deadline = time.monotonic() + 15
        while True:  # without heartbeats the session (1 s) expires
            described = raw.request(ApiKey.DESCRIBE_GROUPS, 5, groups=[g], include_authorized_operations=False).groups[0]
            if described.group_state == "Empty" or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert (described.group_state, described.members) == ("Empty", ())
    time.sleep(0.5)  # the empty generation's record is written in the background
    logged = broker.new_log_text()
    assert ("has failed (no heartbeat for 1000 ms)" in logged) == (how == "its session expires")
    assert not [line for line in logged.splitlines() if " ERROR " in line or "Traceback" in line]
    broker.stop()
    broker.start()
    with Raw(broker.bootstrap) as raw:
        described = raw.request(ApiKey.DESCRIBE_GROUPS, 5, groups=[g], include_authorized_operations=False).groups[0]
        assert (described.error_code, described.group_state, described.members) == (0, "Empty", ())
        # The new generation was stored too: a fresh member joins the one after it.
        assert join_stable(raw, g).generation_id == 3


def test_metadata_naming_the_offsets_topic_creates_it_as_the_coordinator_would(restartable_broker):
    with Raw(restartable_broker.bootstrap) as raw:
        first = raw.request(ApiKey.METADATA, 9, topics=[{"name": "__consumer_offsets"}],
                            allow_auto_topic_creation=True, include_cluster_authorized_operations=False,
                            include_topic_authorized_operations=False)
        assert first.topics[0].error_code == 0
        topic = first.topics[0]
    assert topic.is_internal
    assert len(topic.partitions) == 50  # offsets.topic.num.partitions, not num.partitions
    admin = AdminClient({"bootstrap.servers": restartable_broker.bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, "__consumer_offsets")
    configs = admin.describe_configs([resource])[resource].result()
    assert configs["cleanup.policy"].value == "compact"
