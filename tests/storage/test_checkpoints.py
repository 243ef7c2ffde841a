"""checkpoints: Kafka's text formats byte for byte, atomic writes, clear errors."""

from __future__ import annotations

import re
import uuid

import pytest

from logbroker.errors import KafkaStorageError
from logbroker.storage.checkpoints import (
    CLEAN_SHUTDOWN_FILE,
    BrokerMetadata,
    OffsetCheckpointFile,
    PartitionMetadataFile,
    delete_clean_shutdown_file,
    has_clean_shutdown_file,
    kafka_str_to_uuid,
    parse_java_properties,
    random_kafka_uuid,
    uuid_to_kafka_str,
    write_clean_shutdown_file,
)
from logbroker.types import TopicPartition


def test_offset_checkpoint_is_kafka_format_byte_exact(tmp_path):
    path = tmp_path / "recovery-point-offset-checkpoint"
    OffsetCheckpointFile(path).write({TopicPartition("orders", 1): 987, TopicPartition("orders", 0): 1234,
                                      TopicPartition("a-b.c", 12): 0})
    assert path.read_bytes() == b"0\n3\na-b.c 12 0\norders 0 1234\norders 1 987\n"


def test_offset_checkpoint_round_trips(tmp_path):
    offsets = {TopicPartition(f"t{i}", i % 3): i * 1000 for i in range(50)}
    cp = OffsetCheckpointFile(tmp_path / "replication-offset-checkpoint")
    cp.write(offsets)
    assert cp.read() == offsets


def test_empty_offset_checkpoint(tmp_path):
    cp = OffsetCheckpointFile(tmp_path / "x")
    cp.write({})
    assert (tmp_path / "x").read_bytes() == b"0\n0\n"
    assert cp.read() == {}


def test_missing_offset_checkpoint_reads_empty(tmp_path):
    assert OffsetCheckpointFile(tmp_path / "nope").read() == {}


def test_reads_a_checkpoint_written_by_kafka(tmp_path):
    (tmp_path / "cp").write_text("0\n2\n__consumer_offsets 13 0\nmy-topic 0 42\n")
    assert OffsetCheckpointFile(tmp_path / "cp").read() == {
        TopicPartition("__consumer_offsets", 13): 0, TopicPartition("my-topic", 0): 42}


@pytest.mark.parametrize("content, problem", [
    ("1\n0\n", "version"),
    ("0\nx\n", "Malformed"),
    ("0\n2\nt 0 1\n", "Expected 2 entries"),
    ("0\n1\nt zero 1\n", "Malformed"),
    ("0\n1\nt 0\n", "Malformed"),
    ("0\n", "count"),
])
def test_malformed_offset_checkpoint_is_a_storage_error_naming_the_file(tmp_path, content, problem):
    path = tmp_path / "log-start-offset-checkpoint"
    path.write_text(content)
    with pytest.raises(KafkaStorageError, match=problem) as info:
        OffsetCheckpointFile(path).read()
    assert str(path) in str(info.value)


def test_checkpoint_write_leaves_no_tmp_file_and_replaces_atomically(tmp_path):
    cp = OffsetCheckpointFile(tmp_path / "cp")
    cp.write({TopicPartition("t", 0): 1})
    cp.write({TopicPartition("t", 0): 2})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cp"]
    assert cp.read() == {TopicPartition("t", 0): 2}


def test_stale_tmp_file_does_not_disturb_reading(tmp_path):
    cp = OffsetCheckpointFile(tmp_path / "cp")
    cp.write({TopicPartition("t", 0): 5})
    (tmp_path / "cp.tmp").write_text("0\n1\nt 0 9")  # a crash mid-write
    assert cp.read() == {TopicPartition("t", 0): 5}


def test_uuid_string_is_kafka_base64url_without_padding():
    value = uuid.UUID("00000000-0000-0001-0000-000000000001")
    assert uuid_to_kafka_str(value) == "AAAAAAAAAAEAAAAAAAAAAQ"
    assert kafka_str_to_uuid("AAAAAAAAAAEAAAAAAAAAAQ") == value
    raw = uuid.UUID(bytes=bytes([0xFB, 0xFF] * 8))
    assert "-" in uuid_to_kafka_str(raw) or "_" in uuid_to_kafka_str(raw)  # URL-safe alphabet
    assert kafka_str_to_uuid(uuid_to_kafka_str(raw)) == raw


def test_random_kafka_uuid_never_starts_with_dash():
    for _ in range(200):
        assert not uuid_to_kafka_str(random_kafka_uuid()).startswith("-")


@pytest.mark.parametrize("bad", ["", "short", "AAAAAAAAAAEAAAAAAAAAAQx", "!!!!!!!!!!!!!!!!!!!!!!"])
def test_bad_uuid_strings_are_refused(bad):
    with pytest.raises(ValueError):
        kafka_str_to_uuid(bad)


def test_partition_metadata_is_kafka_format(tmp_path):
    topic_id = uuid.UUID("00000000-0000-0001-0000-000000000001")
    path = tmp_path / "partition.metadata"
    PartitionMetadataFile(path).write(topic_id)
    assert path.read_bytes() == b"version: 0\ntopic_id: AAAAAAAAAAEAAAAAAAAAAQ"
    assert PartitionMetadataFile(path).read() == topic_id


def test_partition_metadata_with_other_version_is_refused(tmp_path):
    path = tmp_path / "partition.metadata"
    path.write_text("version: 1\ntopic_id: AAAAAAAAAAEAAAAAAAAAAQ")
    with pytest.raises(KafkaStorageError, match="version"):
        PartitionMetadataFile(path).read()


def test_partition_metadata_with_bad_topic_id_is_refused(tmp_path):
    path = tmp_path / "partition.metadata"
    path.write_text("version: 0\ntopic_id: nope\n")
    with pytest.raises(KafkaStorageError, match="partition.metadata"):
        PartitionMetadataFile(path).read()


def test_meta_properties_is_java_properties_in_kafka_order(tmp_path):
    path = tmp_path / "meta.properties"
    BrokerMetadata(broker_id=3, cluster_id="MkU3OEVBNTcwNTJENDM2Qg").write(path)
    lines = path.read_text().splitlines()
    assert lines[0] == "#"
    assert re.fullmatch(r"#\w{3} \w{3} \d\d \d\d:\d\d:\d\d UTC \d{4}", lines[1])
    assert lines[2:] == ["cluster.id=MkU3OEVBNTcwNTJENDM2Qg", "version=0", "broker.id=3"]
    assert BrokerMetadata.read(path) == BrokerMetadata(3, "MkU3OEVBNTcwNTJENDM2Qg")


def test_meta_properties_written_by_kafka_is_read(tmp_path):
    path = tmp_path / "meta.properties"
    path.write_text("#\n#Tue Jun 13 10:55:38 UTC 2023\nbroker.id=1\nversion=0\ncluster.id=abc\\=d\n")
    assert BrokerMetadata.read(path) == BrokerMetadata(1, "abc=d")


def test_meta_properties_of_kraft_broker_is_refused(tmp_path):
    path = tmp_path / "meta.properties"
    path.write_text("version=1\nnode.id=1\ncluster.id=x\n")
    with pytest.raises(KafkaStorageError, match="version 1"):
        BrokerMetadata.read(path)


def test_missing_meta_properties_reads_none(tmp_path):
    assert BrokerMetadata.read(tmp_path / "meta.properties") is None


def test_java_properties_separators_comments_and_continuations():
    text = "! comment\n# another\na=1\nb : 2\nc 3\nlong = x\\\n   y\nempty=\n"
    assert parse_java_properties(text) == {"a": "1", "b": "2", "c": "3", "long": "xy", "empty": ""}


def test_clean_shutdown_marker(tmp_path):
    assert not has_clean_shutdown_file(tmp_path)
    write_clean_shutdown_file(tmp_path, broker_epoch=7)
    assert has_clean_shutdown_file(tmp_path)
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).read_text() == '{"version":0,"brokerEpoch":7}'
    delete_clean_shutdown_file(tmp_path)
    assert not has_clean_shutdown_file(tmp_path)
    delete_clean_shutdown_file(tmp_path)  # already gone: fine


def test_empty_clean_shutdown_marker_from_older_kafka_counts(tmp_path):
    (tmp_path / CLEAN_SHUTDOWN_FILE).write_bytes(b"")
    assert has_clean_shutdown_file(tmp_path)


# --- the writer refuses what its reader could not read back ---

@pytest.mark.parametrize("topic", ["evil\n", "a b", "", "a\rb", "t\u2028", "\ud800", "x\x0b"], ids=repr)
def test_offset_checkpoint_refuses_an_entry_it_could_not_read_back(tmp_path, topic):
    from logbroker.storage.checkpoints import UnreadableCheckpointEntryError

    path = tmp_path / "recovery-point-offset-checkpoint"
    cp = OffsetCheckpointFile(path)
    cp.write({TopicPartition("good", 0): 5})
    before = path.read_bytes()
    with pytest.raises(UnreadableCheckpointEntryError, match="would not read back"):
        cp.write({TopicPartition("good", 0): 6, TopicPartition(topic, 0): 7})
    assert path.read_bytes() == before
    assert not (tmp_path / "recovery-point-offset-checkpoint.tmp").exists()
    assert cp.read() == {TopicPartition("good", 0): 5}


def test_offset_checkpoint_with_a_split_line_is_an_error_naming_the_file(tmp_path):
    path = tmp_path / "replication-offset-checkpoint"
    path.write_bytes(b"0\n2\nevil\n 0 5\ngood 0 9\n")  # what a topic "evil\n" used to leave
    with pytest.raises(KafkaStorageError, match="replication-offset-checkpoint.*'evil'"):
        OffsetCheckpointFile(path).read()
