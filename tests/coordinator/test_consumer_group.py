"""ConsumerGroup rebuilt from its records: live replay and loading from bytes agree."""

from __future__ import annotations

import uuid

from logbroker.coordinator.consumer_group import (
    ConsumerGroup,
    ConsumerGroupRecords,
    ConsumerGroupState,
    MemberAssignment,
    MemberState,
    MemberSubscription,
    TopicMetadata,
    current_assignment_record,
    group_epoch_record,
    member_record,
    member_tombstones,
    partition_metadata_record,
    target_member_record,
    target_metadata_record,
)

T = uuid.UUID(int=5)


def history(group_id: str) -> list:
    return [
        member_record(group_id, "a", MemberSubscription(client_id="ca", subscribed_topic_names=("t",),
                                                        rebalance_timeout_ms=1000)),
        partition_metadata_record(group_id, {"t": TopicMetadata(T, "t", 2)}),
        group_epoch_record(group_id, 1),
        target_member_record(group_id, "a", {T: frozenset({0, 1})}),
        target_metadata_record(group_id, 1),
        current_assignment_record(group_id, "a", MemberAssignment(1, 0, MemberState.STABLE, {T: frozenset({0, 1})})),
        member_record(group_id, "b", MemberSubscription(instance_id="i", subscribed_topic_names=("t",))),
        group_epoch_record(group_id, 2),
        target_member_record(group_id, "a", {T: frozenset({0})}),
        target_member_record(group_id, "b", {T: frozenset({1})}),
        target_metadata_record(group_id, 2),
        current_assignment_record(group_id, "a", MemberAssignment(1, 1, MemberState.UNREVOKED_PARTITIONS,
                                                                  {T: frozenset({0})}, {T: frozenset({1})})),
    ]


def live(records) -> ConsumerGroup:
    group = ConsumerGroup("g")
    for record in records:
        group.replay(record)
    return group


def loaded(records) -> list[ConsumerGroup]:
    replay = ConsumerGroupRecords()
    for record in records:
        replay.replay(*record.encode())
    return replay.groups(0)


def summary(group: ConsumerGroup):
    return (group.group_epoch, group.assignment_epoch, group.state,
            {mid: (m.subscription, m.assignment) for mid, m in group.members.items()},
            group.target_assignment, group.subscription_metadata, group.static_members, group.owners)


def test_loading_the_records_rebuilds_the_group_the_live_path_built():
    records = history("g")
    [group] = loaded(records)
    assert summary(group) == summary(live(records))
    assert group.state is ConsumerGroupState.RECONCILING
    assert group.owners == {(T, 0): "a", (T, 1): "a"}  # b gets partition 1 only once a lets go
    assert group.static_members == {"i": "b"}


def test_a_removed_member_releases_its_partitions():
    group = live(history("g") + member_tombstones("g", "a"))
    assert set(group.members) == {"b"} and group.owners == {}
    assert "a" not in group.target_assignment


def test_tombstones_delete_the_group_at_load():
    group = live(history("g"))
    assert loaded(history("g") + group.tombstone_records()) == []


def test_an_empty_consumer_group_may_be_deleted():
    group = ConsumerGroup("g")
    assert group.state is ConsumerGroupState.EMPTY and group.is_empty
    group.validate_delete_group()
