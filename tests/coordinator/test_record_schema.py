"""Kafka 4's coordinator records, encoded from Kafka's own JSON schemas (coordinator/record_schema.py)."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from logbroker.coordinator.record_schema import UnknownRecordVersionError, key_version, record_type

METADATA = record_type("ConsumerGroupMetadata")
MEMBER = record_type("ConsumerGroupMemberMetadata")
CURRENT = record_type("ConsumerGroupCurrentMemberAssignment")
PARTITIONS = record_type("ConsumerGroupPartitionMetadata")

names = st.text(max_size=12)
int32s = st.integers(-(2**31), 2**31 - 1)
topic_partitions = st.builds(CURRENT.Value.TopicPartitions, topic_id=st.uuids(),
                             partitions=st.lists(int32s, max_size=5).map(tuple))
classic = st.none() | st.builds(
    MEMBER.Value.ClassicMemberMetadata, session_timeout_ms=int32s,
    supported_protocols=st.lists(st.builds(MEMBER.Value.ClassicMemberMetadata.ClassicProtocol, name=names,
                                           metadata=st.binary(max_size=8)), max_size=2).map(tuple))


def test_record_types_carry_kafkas_key_versions():
    assert [record_type(n).key_version for n in (
        "ConsumerGroupMetadata", "ConsumerGroupPartitionMetadata", "ConsumerGroupMemberMetadata",
        "ConsumerGroupTargetAssignmentMetadata", "ConsumerGroupTargetAssignmentMember",
        "ConsumerGroupCurrentMemberAssignment")] == [3, 4, 5, 6, 7, 8]


def test_key_is_its_version_then_non_flexible_fields():
    key = CURRENT.encode_key(CURRENT.Key(group_id="g", member_id="m"))
    assert key == b"\x00\x08" + b"\x00\x01g" + b"\x00\x01m"
    assert key_version(key) == 8
    assert CURRENT.decode_key(key) == CURRENT.Key(group_id="g", member_id="m")


def test_flexible_value_bytes_as_kafka_writes_them():
    # version 0, epoch int32, then an empty tagged-field section
    assert METADATA.encode_value(METADATA.Value(epoch=7)) == b"\x00\x00" + b"\x00\x00\x00\x07" + b"\x00"
    topic_id = uuid.UUID(int=1)
    value = CURRENT.Value(member_epoch=3, previous_member_epoch=2, state=0,
                          assigned_partitions=(CURRENT.Value.TopicPartitions(topic_id=topic_id, partitions=(0, 1)),))
    assert CURRENT.encode_value(value) == (
        b"\x00\x00" + b"\x00\x00\x00\x03" + b"\x00\x00\x00\x02" + b"\x00"
        + b"\x02" + topic_id.bytes + b"\x03" + b"\x00\x00\x00\x00\x00\x00\x00\x01" + b"\x00"  # one topic
        + b"\x01"  # no partitions pending revocation
        + b"\x00")


def test_nullable_strings_are_null_and_tagged_defaults_are_left_out():
    value = MEMBER.Value(instance_id=None, rack_id=None, client_id="c", client_host="/h",
                         subscribed_topic_names=("a",), subscribed_topic_regex=None, server_assignor=None)
    data = MEMBER.encode_value(value)
    assert data.endswith(b"\xff\xff\xff\xff" + b"\x00" + b"\x00")  # rebalance timeout -1, null assignor, no tags
    assert MEMBER.decode_value(data) == value


@given(member_epoch=int32s, previous=int32s, state=st.integers(-128, 127),
       assigned=st.lists(topic_partitions, max_size=3), pending=st.lists(topic_partitions, max_size=3))
def test_current_assignment_round_trips(member_epoch, previous, state, assigned, pending):
    value = CURRENT.Value(member_epoch=member_epoch, previous_member_epoch=previous, state=state,
                          assigned_partitions=tuple(assigned), partitions_pending_revocation=tuple(pending))
    assert CURRENT.decode_value(CURRENT.encode_value(value)) == value


@given(instance_id=st.none() | names, client_id=names, topics=st.lists(names, max_size=4),
       regex=st.none() | names, assignor=st.none() | names, classic_metadata=classic)
def test_member_metadata_round_trips_with_its_tagged_classic_metadata(instance_id, client_id, topics, regex,
                                                                      assignor, classic_metadata):
    value = MEMBER.Value(instance_id=instance_id, rack_id=None, client_id=client_id, client_host="/10.0.0.1",
                         subscribed_topic_names=tuple(topics), subscribed_topic_regex=regex,
                         rebalance_timeout_ms=30_000, server_assignor=assignor,
                         classic_member_metadata=classic_metadata)
    assert MEMBER.decode_value(MEMBER.encode_value(value)) == value


def test_unknown_tagged_fields_of_a_newer_kafka_are_skipped():
    newer = METADATA.encode_value(METADATA.Value(epoch=5))[:-1] + b"\x01" + b"\x00" + b"\x08" + b"\x00" * 8
    assert METADATA.decode_value(newer) == METADATA.Value(epoch=5)


def test_nested_structs_decode_through_their_own_classes():
    value = PARTITIONS.Value(topics=(PARTITIONS.Value.TopicMetadata(
        topic_id=uuid.UUID(int=9), topic_name="t", num_partitions=3,
        partition_metadata=(PARTITIONS.Value.TopicMetadata.PartitionMetadata(partition=0, racks=("r1",)),)),))
    assert PARTITIONS.decode_value(PARTITIONS.encode_value(value)) == value


def test_a_value_version_this_broker_does_not_know_is_refused():
    with pytest.raises(UnknownRecordVersionError):
        METADATA.decode_value(b"\x00\x07\x00\x00\x00\x01\x00")
