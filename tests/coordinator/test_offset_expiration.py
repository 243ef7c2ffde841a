"""Which committed offsets expire (KIP-211), checked on the coordinator's rule directly."""

from __future__ import annotations

from types import SimpleNamespace

from logbroker.coordinator.group_coordinator import GroupCoordinator
from logbroker.coordinator.classic_group import ClassicGroup, ClassicGroupMember, ClassicGroupState
from logbroker.coordinator.offsets_schema import OffsetAndMetadata
from logbroker.types import TopicPartition

MINUTE_MS = 60_000
SUBSCRIBES_TO_A = b"\x00\x01\x00\x00\x00\x01\x00\x01a\xff\xff\xff\xff"


def coordinator() -> GroupCoordinator:
    config = SimpleNamespace(offsets_retention_minutes=10)
    return GroupCoordinator(broker_id=0, config=config, replica_manager=None, store=None,
                            create_topic=None, clock=None)


def test_offsets_of_an_empty_group_expire_after_retention_since_it_became_empty():
    group = ClassicGroup("g", protocol_type="consumer", current_state_timestamp_ms=100 * MINUTE_MS)
    group.offsets = {TopicPartition("a", 0): OffsetAndMetadata(1, commit_timestamp_ms=0)}
    assert coordinator().offsets.expired(group, 109 * MINUTE_MS) == []
    assert coordinator().offsets.expired(group, 110 * MINUTE_MS) == [TopicPartition("a", 0)]


def test_explicit_expire_timestamp_wins():
    group = ClassicGroup("g")
    group.offsets = {TopicPartition("a", 0): OffsetAndMetadata(1, commit_timestamp_ms=0, expire_timestamp_ms=5)}
    assert coordinator().offsets.expired(group, 5) == [TopicPartition("a", 0)]


def test_stable_consumer_group_keeps_offsets_of_subscribed_topics():
    group = ClassicGroup("g", protocol_type="consumer", protocol_name="range")
    group.add(ClassicGroupMember("m", None, "c", "/h", 1000, 1000, "consumer", [("range", SUBSCRIBES_TO_A)]))
    group.state = ClassicGroupState.STABLE
    group.offsets = {TopicPartition("a", 0): OffsetAndMetadata(1, commit_timestamp_ms=0),
                     TopicPartition("b", 0): OffsetAndMetadata(1, commit_timestamp_ms=0)}
    assert coordinator().offsets.expired(group, 11 * MINUTE_MS) == [TopicPartition("b", 0)]
