"""ConsumerGroupHeartbeat and friends at the protocol level: epochs, revoke-before-assign as the
members see it, and the error codes of bad input (nothing else disturbed)."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from logbroker.protocol.apis import ApiKey
from raw import Raw

UNKNOWN_MEMBER_ID, INVALID_REQUEST, GROUP_ID_NOT_FOUND, INCONSISTENT_GROUP_PROTOCOL = 25, 42, 69, 23
FENCED_MEMBER_EPOCH, UNRELEASED_INSTANCE_ID, UNSUPPORTED_ASSIGNOR, STALE_MEMBER_EPOCH = 110, 111, 112, 113
INVALID_REGULAR_EXPRESSION, NON_EMPTY_GROUP, UNSUPPORTED_VERSION = 128, 68, 35
V = 1  # ConsumerGroupHeartbeat version


@pytest.fixture(scope="module")
def bootstrap(group_broker) -> tuple[str, uuid.UUID]:
    """The broker, and the id of topic "c" (4 partitions)."""
    admin = AdminClient({"bootstrap.servers": group_broker.bootstrap})
    admin.create_topics([NewTopic("c", 4, 1)])["c"].result()
    with Raw(group_broker.bootstrap) as raw:
        assert raw.request(ApiKey.FIND_COORDINATOR, 0, key="warmup").error_code == 0
        [topic] = raw.request(ApiKey.METADATA, 12, topics=[{"name": "c"}]).topics
    return group_broker.bootstrap, topic.topic_id


def group() -> str:
    return f"g-{uuid.uuid4().hex[:8]}"


def heartbeat(raw: Raw, group_id: str, member_id: str, epoch: int, *, topics=("c",), owned=(), **fields):
    join = epoch == 0
    return raw.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, fields.pop("version", V), group_id=group_id,
                       member_id=member_id, member_epoch=epoch,
                       rebalance_timeout=fields.pop("rebalance_timeout", 30_000 if join else -1),
                       subscribed_topic_names=list(topics) if topics is not None else None,
                       topic_partitions=None if owned is None else [
                           {"topic_id": t, "partitions": list(ps)} for t, ps in owned],
                       **fields)


def assigned(response) -> set[int]:
    return {p for tp in response.assignment.topic_partitions for p in tp.partitions}


def test_partitions_move_only_after_their_owner_revoked_them(bootstrap):
    address, topic_id = bootstrap
    g, a, b = group(), uuid.uuid4().hex, uuid.uuid4().hex
    with Raw(address) as raw:
        first = heartbeat(raw, g, a, 0)
        assert first.error_code == 0 and first.member_epoch == 1 and assigned(first) == {0, 1, 2, 3}
        second = heartbeat(raw, g, b, 0)
        assert second.error_code == 0 and second.member_epoch == 2
        assert assigned(second) == set(), "B got partitions A still owns"
        # A learns it must give two up: same epoch, a smaller assignment.
        told = heartbeat(raw, g, a, 1, topics=None, owned=[(topic_id, [0, 1, 2, 3])])
        assert told.member_epoch == 1 and len(assigned(told)) == 2
        kept = assigned(told)
        still_waiting = heartbeat(raw, g, b, 2, topics=None, owned=[])
        assert still_waiting.assignment is None
        revoked = heartbeat(raw, g, a, 1, topics=None, owned=[(topic_id, sorted(kept))])
        assert revoked.member_epoch == 2
        released = heartbeat(raw, g, b, 2, topics=None, owned=[])
        assert assigned(released) == {0, 1, 2, 3} - kept


def test_lost_epoch_bump_is_forgiven_but_other_epochs_are_fenced(bootstrap):
    address, topic_id = bootstrap
    g, m, other = group(), uuid.uuid4().hex, uuid.uuid4().hex
    with Raw(address) as raw:
        assert heartbeat(raw, g, m, 0).member_epoch == 1
        assert heartbeat(raw, g, m, 5, topics=None).error_code == FENCED_MEMBER_EPOCH
        assert heartbeat(raw, g, other, 0).member_epoch == 2
        kept = assigned(heartbeat(raw, g, m, 1, topics=None, owned=[(topic_id, [0, 1, 2, 3])]))
        assert heartbeat(raw, g, m, 1, topics=None, owned=[(topic_id, sorted(kept))]).member_epoch == 2
        # The answer with epoch 2 was lost: epoch 1 again, owning only what it kept, is accepted...
        again = heartbeat(raw, g, m, 1, topics=None, owned=[(topic_id, sorted(kept))])
        assert again.error_code == 0 and again.member_epoch == 2
        # ...but not while still owning what it had to give up.
        assert heartbeat(raw, g, m, 1, topics=None, owned=[(topic_id, [0, 1, 2, 3])]).error_code == FENCED_MEMBER_EPOCH
        assert heartbeat(raw, g, m, 0).error_code == 0  # rejoining is always allowed


def test_bad_heartbeats_get_kafkas_errors(bootstrap):
    address, _ = bootstrap
    g, m = group(), uuid.uuid4().hex
    with Raw(address) as raw:
        assert heartbeat(raw, g, m, 3, topics=None).error_code == UNKNOWN_MEMBER_ID
        assert heartbeat(raw, g, "", 0).error_code == INVALID_REQUEST  # v1: the member names itself
        assert heartbeat(raw, g, m, 0, rebalance_timeout=-1).error_code == INVALID_REQUEST
        assert heartbeat(raw, g, m, 0, topics=None).error_code == INVALID_REQUEST
        assert heartbeat(raw, g, m, -3).error_code == INVALID_REQUEST
        assert heartbeat(raw, g, m, 0, server_assignor="sticky").error_code == UNSUPPORTED_ASSIGNOR
        bad_regex = heartbeat(raw, g, m, 0, topics=None, subscribed_topic_regex="c[")
        assert bad_regex.error_code == INVALID_REGULAR_EXPRESSION and bad_regex.error_message
        # None of that left a group behind; a good join still works.
        joined = heartbeat(raw, g, m, 0)
        assert joined.error_code == 0 and joined.member_epoch == 1
        assert heartbeat(raw, g, m, -1, topics=None).member_epoch == -1
        assert heartbeat(raw, g, m, 1, topics=None).error_code == UNKNOWN_MEMBER_ID


def test_v0_members_get_their_id_from_the_coordinator(bootstrap):
    address, _ = bootstrap
    with Raw(address) as raw:
        joined = heartbeat(raw, group(), "", 0, version=0)
        assert joined.error_code == 0 and joined.member_id


def test_static_instance_id_is_held_until_its_member_leaves(bootstrap):
    address, _ = bootstrap
    g, first, second = group(), uuid.uuid4().hex, uuid.uuid4().hex
    with Raw(address) as raw:
        assert heartbeat(raw, g, first, 0, instance_id="i").error_code == 0
        assert heartbeat(raw, g, second, 0, instance_id="i").error_code == UNRELEASED_INSTANCE_ID
        assert heartbeat(raw, g, first, -2, topics=None, instance_id="i").member_epoch == -2
        taken = heartbeat(raw, g, second, 0, instance_id="i")
        assert taken.error_code == 0 and assigned(taken) == {0, 1, 2, 3}
        assert heartbeat(raw, g, first, 1, topics=None, instance_id="i").error_code == 82  # FENCED_INSTANCE_ID


def test_offset_commits_check_the_member_epoch(bootstrap):
    address, _ = bootstrap
    g, m = group(), uuid.uuid4().hex
    with Raw(address) as raw:
        epoch = heartbeat(raw, g, m, 0).member_epoch

        def commit(version: int, epoch: int, member: str = m) -> int:
            response = raw.request(ApiKey.OFFSET_COMMIT, version, group_id=g, generation_id_or_member_epoch=epoch,
                                   member_id=member, topics=[{"name": "c", "partitions": [
                                       {"partition_index": 0, "committed_offset": 7}]}])
            return response.topics[0].partitions[0].error_code

        assert commit(9, epoch) == 0
        assert commit(9, epoch + 1) == STALE_MEMBER_EPOCH
        assert commit(9, epoch, "stranger") == UNKNOWN_MEMBER_ID
        assert commit(8, epoch) == UNSUPPORTED_VERSION  # consumer-protocol members commit with v9+
        fetched = raw.request(ApiKey.OFFSET_FETCH, 9, groups=[{"group_id": g, "member_id": m, "member_epoch": epoch,
                                                                "topics": [{"name": "c", "partition_indexes": [0]}]}])
        assert fetched.groups[0].topics[0].partitions[0].committed_offset == 7
        stale = raw.request(ApiKey.OFFSET_FETCH, 9, groups=[{"group_id": g, "member_id": m, "member_epoch": epoch + 1,
                                                              "topics": None}])
        assert stale.groups[0].error_code == STALE_MEMBER_EPOCH


def test_groups_of_one_type_refuse_the_other_protocol_and_are_described_by_their_own_api(bootstrap):
    address, _ = bootstrap
    g, m = group(), uuid.uuid4().hex
    with Raw(address) as raw:
        heartbeat(raw, g, m, 0)
        join = raw.request(ApiKey.JOIN_GROUP, 5, group_id=g, session_timeout=10_000, rebalance_timeout=10_000,
                           member_id="", protocol_type="consumer", protocols=[{"name": "range", "metadata": b""}])
        assert join.error_code == INCONSISTENT_GROUP_PROTOCOL
        old = raw.request(ApiKey.DESCRIBE_GROUPS, 5, groups=[g]).groups[0]
        assert (old.error_code, old.group_state) == (0, "Dead")
        new = raw.request(ApiKey.DESCRIBE_GROUPS, 6, groups=[g]).groups[0]
        assert new.error_code == GROUP_ID_NOT_FOUND and "not a classic group" in new.error_message
        [described] = raw.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, group_ids=[g],
                                  include_authorized_operations=False).groups
        assert described.error_code == 0 and described.group_state == "Stable"
        assert described.group_epoch == described.assignment_epoch == 1 and described.assignor_name == "uniform"
        [member] = described.members
        assert member.member_epoch == 1 and member.member_type == 1
        assert sorted(member.assignment.topic_partitions[0].partitions) == [0, 1, 2, 3]
        assert member.assignment.topic_partitions[0].topic_name == "c"
        listed = raw.request(ApiKey.LIST_GROUPS, 5, states_filter=[], types_filter=["consumer"]).groups
        assert (g, "consumer", "Stable", "consumer") in {(x.group_id, x.protocol_type, x.group_state, x.group_type)
                                                         for x in listed}
        deleted = raw.request(ApiKey.DELETE_GROUPS, 2, groups_names=[g]).results[0]
        assert deleted.error_code == NON_EMPTY_GROUP
        heartbeat(raw, g, m, -1, topics=None)
        assert raw.request(ApiKey.DELETE_GROUPS, 2, groups_names=[g]).results[0].error_code == 0
        gone = raw.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, group_ids=[g], include_authorized_operations=False)
        assert gone.groups[0].error_code == GROUP_ID_NOT_FOUND


def test_consumer_group_describe_of_a_classic_group_says_so(bootstrap):
    address, _ = bootstrap
    g = group()
    with Raw(address) as raw:
        raw.request(ApiKey.OFFSET_COMMIT, 8, group_id=g, generation_id_or_member_epoch=-1, member_id="",
                    topics=[{"name": "c", "partitions": [{"partition_index": 0, "committed_offset": 1}]}])
        [described] = raw.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, group_ids=[g],
                                  include_authorized_operations=False).groups
        assert described.error_code == GROUP_ID_NOT_FOUND and "not a consumer group" in described.error_message


def test_a_pathological_regex_is_matched_in_linear_time(bootstrap):
    address, _ = bootstrap
    long_name = "a" * 200
    admin = AdminClient({"bootstrap.servers": address})
    admin.create_topics([NewTopic(long_name, 1, 1)])[long_name].result()
    with Raw(address, timeout_s=10) as raw:
        # A backtracking engine takes 2^200 steps on this; RE2 (Kafka's RE2/J) does not backtrack.
        joined = heartbeat(raw, group(), uuid.uuid4().hex, 0, topics=None, subscribed_topic_regex="(a+)+b")
        assert joined.error_code == 0 and assigned(joined) == set()
        # Lookarounds are not RE2 (nor RE2/J) syntax: refused as Kafka refuses them.
        lookahead = heartbeat(raw, group(), uuid.uuid4().hex, 0, topics=None, subscribed_topic_regex="(?=a)a+")
        assert lookahead.error_code == INVALID_REGULAR_EXPRESSION
