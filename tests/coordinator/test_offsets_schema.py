"""The __consumer_offsets record schemas and the group → partition mapping, against Kafka's."""

from __future__ import annotations

from hypothesis import given, strategies as st

from logbroker.coordinator import transaction_log
from logbroker.coordinator.offsets_schema import (
    GroupMetadataKey,
    GroupMetadataRecord,
    MemberRecord,
    OffsetAndMetadata,
    OffsetCommitKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
    java_string_hash,
    key_group,
    partition_for,
    subscribed_topics,
)


def test_java_string_hash_matches_java():
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    assert java_string_hash("polygenelubricants") == -2**31  # int32 overflow
    assert java_string_hash("\U0001F600") == 0xD83D * 31 + 0xDE00  # UTF-16 surrogate pair


# (group id, Java's String.hashCode, Kafka's Utils.abs(hashCode) % 50): printed by a Java program
# (String.hashCode, and Utils.abs as Kafka defines it: 0 for Integer.MIN_VALUE, else Math.abs).
KAFKA_PLACEMENT_50 = [
    ("polygenelubricants", -2**31, 0),
    ("GydZG_", -2**31, 0),
    ("DESIGNING WORKHOUSES", -2**31, 0),
    ("console-consumer-1", 35782224, 24),
    ("my-group", -1906497762, 12),
    ("group-1", 293427299, 49),
    ("group-7", 293427305, 5),
    ("payments", 1382682413, 13),
    ("orders-consumer", -1204742690, 40),
    ("connect-cluster", 1440343063, 13),
    ("spark-kafka-source-3f2c", -1257907297, 47),
    ("\u00e9t\u00e9", 227742, 42),
    ("\U0001F600-group", -1198440043, 43),
]


def test_groups_are_placed_as_kafka_places_them():
    for group_id, java_hash, partition in KAFKA_PLACEMENT_50:
        assert java_string_hash(group_id) == java_hash, group_id
        assert partition_for(group_id, 50) == partition, group_id
    # a negative hash: `& 0x7fffffff` (an earlier placement) would give 36, 8, 1 and 5
    assert [partition_for(g, 50) for g in ("my-group", "orders-consumer", "spark-kafka-source-3f2c",
                                            "\U0001F600-group")] == [12, 40, 47, 43]


def test_transactional_ids_use_the_same_placement():
    for key, _, partition in KAFKA_PLACEMENT_50:
        assert transaction_log.partition_for(key, 50) == partition, key


def test_key_group_reads_the_group_id_of_every_key_version():
    assert key_group(encode_offset_commit_key("my-group", "t", 3)) == "my-group"
    assert key_group(encode_group_metadata_key("\u00e9t\u00e9")) == "\u00e9t\u00e9"
    assert key_group(b"\x00\x03" b"\x00\x02cg") == "cg"  # ConsumerGroupMetadataKey


def test_offset_commit_key_bytes_are_kafkas():
    assert encode_offset_commit_key("g", "t", 3) == b"\x00\x01" b"\x00\x01g" b"\x00\x01t" b"\x00\x00\x00\x03"
    assert encode_group_metadata_key("grp") == b"\x00\x02\x00\x03grp"


def test_offset_commit_value_v3_layout():
    data = encode_offset_commit_value(OffsetAndMetadata(42, 5, "meta", 1000))
    assert data == (b"\x00\x03" + (42).to_bytes(8, "big") + (5).to_bytes(4, "big") + b"\x00\x04meta"
                    + (1000).to_bytes(8, "big"))


def test_reads_older_offset_commit_value_versions():
    v1 = b"\x00\x01" + (7).to_bytes(8, "big") + b"\x00\x00" + (10).to_bytes(8, "big") + (99).to_bytes(8, "big")
    assert decode_offset_commit_value(v1) == OffsetAndMetadata(7, -1, "", 10, 99)


texts = st.text(max_size=20)


@given(texts, texts, st.integers(0, 2**31 - 1), st.integers(-1, 2**62), st.integers(-1, 2**31 - 1), texts)
def test_offset_records_round_trip(group, topic, partition, offset, epoch, metadata):
    assert decode_key(encode_offset_commit_key(group, topic, partition)) == OffsetCommitKey(group, topic, partition)
    value = OffsetAndMetadata(offset, epoch, metadata, 123)
    assert decode_offset_commit_value(encode_offset_commit_value(value)) == value


members = st.builds(MemberRecord, texts, st.none() | texts, texts, texts, st.integers(0, 2**31 - 1),
                    st.integers(0, 2**31 - 1), st.binary(max_size=30), st.binary(max_size=30))


@given(texts, st.builds(GroupMetadataRecord, texts, st.integers(0, 2**31 - 1), st.none() | texts,
                        st.none() | texts, st.integers(-1, 2**62), st.lists(members, max_size=4).map(tuple)))
def test_group_records_round_trip(group, record):
    assert decode_key(encode_group_metadata_key(group)) == GroupMetadataKey(group)
    assert decode_group_metadata_value(encode_group_metadata_value(record)) == record


def test_subscribed_topics_reads_consumer_protocol_subscription():
    subscription = b"\x00\x01" + b"\x00\x00\x00\x02" + b"\x00\x01a" + b"\x00\x02bc" + b"\xff\xff\xff\xff"
    assert subscribed_topics(subscription) == {"a", "bc"}
    assert subscribed_topics(b"\x00") == set()
