"""A data dir whose `__consumer_offsets` placed groups by `hashCode & 0x7fffffff` (what earlier
logbroker versions did) keeps every group's committed offsets once the broker places them as Kafka
does (`Utils.abs(hashCode)`): on load, each group found in a partition that does not own it is
copied to the one that does, and tombstoned where it was.

The old data dir is made as an earlier version left it: offset commit records (Kafka's record
schema) appended offline to the partition the old formula gives, in the broker's own log format;
one group is in both places, as a move cut short by a crash leaves it, with newer offsets in its
owner, which win.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as CkTopicPartition

from clients import create_topic

from logbroker.clock import SystemClock
from logbroker.coordinator.offsets_log import build_records, replay
from logbroker.coordinator.offsets_schema import (
    GroupMetadataRecord,
    OffsetAndMetadata,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
    java_string_hash,
    partition_for,
)
from logbroker.storage.log import Log
from logbroker.storage.log_config import LogConfig
from logbroker.testing import TEST_OVERRIDES, BrokerProcess

pytestmark = pytest.mark.timeout(120)

PARTITIONS = 10
TOPIC = "data"


def old_partition(group_id: str) -> int:
    return (java_string_hash(group_id) & 0x7FFFFFFF) % PARTITIONS


# Negative hashes that the two formulas place apart (with 10 partitions), and one placed alike.
MOVED = ["my-group", "orders-consumer", "spark-kafka-source-3f2c", "\U0001F600-group"]
STAYS = "group-1"
IN_BOTH = MOVED[-1]


def committed(bootstrap: str, group_id: str) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group_id, "enable.auto.commit": False})
    try:
        return [tp.offset for tp in consumer.committed([CkTopicPartition(TOPIC, p) for p in range(3)], timeout=30)]
    finally:
        consumer.close()


def expected(index: int) -> list[int]:
    return [100 * index + p + 1 for p in range(3)]


def write_offsets(data_dir, partition: int, group_id: str, offsets: list[int], *, with_group_record: bool) -> None:
    """Append `group_id`'s offset commits (and an Empty consumer group's record) to
    `__consumer_offsets-<partition>` as the broker would have: one batch, at the partition's
    leader epoch."""
    log = Log.open(data_dir / f"__consumer_offsets-{partition}", LogConfig.defaults(), clock=SystemClock(),
                   had_clean_shutdown=True)
    try:
        now_ms = SystemClock().time_ms()
        entries = [(encode_offset_commit_key(group_id, TOPIC, p),
                    encode_offset_commit_value(OffsetAndMetadata(offset, commit_timestamp_ms=now_ms)))
                   for p, offset in enumerate(offsets)]
        if with_group_record:
            entries.append((encode_group_metadata_key(group_id), encode_group_metadata_value(GroupMetadataRecord(
                protocol_type="consumer", generation=3, protocol=None, leader=None,
                current_state_timestamp_ms=now_ms, members=()))))
        log.append_as_leader(build_records(entries, now_ms), leader_epoch=log.latest_epoch or 0)
        log.flush()
    finally:
        log.close()


def latest_values(data_dir, partition: int) -> dict[bytes, bytes | None]:
    log = Log.open(data_dir / f"__consumer_offsets-{partition}", LogConfig.defaults(), clock=SystemClock(),
                   had_clean_shutdown=True)
    try:
        return dict(replay(log, log.log_end_offset))
    finally:
        log.close()


def test_groups_written_with_the_old_placement_keep_their_offsets(tmp_path):
    assert all(old_partition(g) != partition_for(g, PARTITIONS) for g in MOVED)
    assert java_string_hash(STAYS) > 0
    broker = BrokerProcess(tmp_path, overrides={**TEST_OVERRIDES, "offsets.topic.num.partitions": str(PARTITIONS)})
    with broker:
        create_topic(broker.bootstrap, TOPIC, partitions=3)
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": STAYS})
        consumer.commit(offsets=[CkTopicPartition(TOPIC, p, o) for p, o in enumerate(expected(0))],
                        asynchronous=False)
        consumer.close()
    assert not broker.running
    for index, group_id in enumerate(MOVED, start=1):
        write_offsets(broker.data_dir, old_partition(group_id), group_id, [o - 50 for o in expected(index)]
                      if group_id == IN_BOTH else expected(index), with_group_record=index % 2 == 1)
    # A move cut short by a crash: the group is in both places, and the owner's offsets are newer.
    write_offsets(broker.data_dir, partition_for(IN_BOTH, PARTITIONS), IN_BOTH,
                  expected(MOVED.index(IN_BOTH) + 1), with_group_record=False)

    broker.start()
    try:
        assert committed(broker.bootstrap, STAYS) == expected(0)
        for index, group_id in enumerate(MOVED, start=1):
            assert committed(broker.bootstrap, group_id) == expected(index), group_id
        moves = [line for line in broker.new_log_text().splitlines() if "Moved" in line]
        assert len(moves) == 4, moves
        # the two with a group record, the one without, and the one already in its owner
        assert sorted(line.split("Moved ")[1].split(" from")[0] for line in moves) == [
            "0 group(s) (0 record(s))", "1 group(s) (3 record(s))", "1 group(s) (4 record(s))",
            "1 group(s) (4 record(s))"]
    finally:
        broker.stop()

    for group_id in MOVED:  # moved: tombstones where they were, records where Kafka looks
        old = latest_values(broker.data_dir, old_partition(group_id))
        new = latest_values(broker.data_dir, partition_for(group_id, PARTITIONS))
        keys = [encode_offset_commit_key(group_id, TOPIC, p) for p in range(3)]
        assert [old[k] for k in keys] == [None, None, None], group_id
        assert all(new[k] is not None for k in keys), group_id

    broker.start()  # and a second start finds nothing to move and everything in place
    try:
        for index, group_id in enumerate(MOVED, start=1):
            assert committed(broker.bootstrap, group_id) == expected(index), group_id
        assert committed(broker.bootstrap, STAYS) == expected(0)
        assert "Found" not in broker.new_log_text()
    finally:
        broker.stop()
