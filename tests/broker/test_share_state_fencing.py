"""The share-group state APIs fence a deposed share-partition leader, as Kafka's
ShareCoordinatorShard: ReadShareGroupState and WriteShareGroupState carry a leader epoch and a
state epoch; a write older in either is FENCED_LEADER_EPOCH (74) / FENCED_STATE_EPOCH (124), and
a read with a newer leader epoch is stored before it is answered. Raw requests to a real broker,
after a real ShareConsumer created the share-partition's state."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import confluent_kafka as ck
from kio.schema.read_share_group_state.v0.request import PartitionData as ReadPartition
from kio.schema.read_share_group_state.v0.request import ReadShareGroupStateRequest, ReadStateData
from kio.schema.write_share_group_state.v1.request import PartitionData as WritePartition
from kio.schema.write_share_group_state.v1.request import StateBatch, WriteShareGroupStateRequest, WriteStateData
from kio.static.primitive import i8, i16, i32, i64
from share_helpers import create_topic, drain, produce, set_group_configs, share_consumer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cluster"))
from raw_requests import send  # noqa: E402

FENCED_LEADER_EPOCH, FENCED_STATE_EPOCH = 74, 124


def topic_id_of(bootstrap: str, topic: str) -> uuid.UUID:
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": bootstrap})  # alive until the result is in
    described = admin.describe_topics(TopicCollection([topic]))[topic].result(20)
    uid = described.topic_id
    return uuid.UUID(bytes=uid.get_most_significant_bits().to_bytes(8, "big", signed=True)
                     + uid.get_least_significant_bits().to_bytes(8, "big", signed=True))


def read(process, group, topic_id, *, leader_epoch):
    response = send(process, ReadShareGroupStateRequest(group_id=group, topics=(ReadStateData(
        topic_id=topic_id, partitions=(ReadPartition(partition=i32(0), leader_epoch=i32(leader_epoch)),)),)))
    return response.results[0].partitions[0]


def write(process, group, topic_id, *, leader_epoch, state_epoch, start_offset):
    response = send(process, WriteShareGroupStateRequest(group_id=group, topics=(WriteStateData(
        topic_id=topic_id, partitions=(WritePartition(
            partition=i32(0), state_epoch=i32(state_epoch), leader_epoch=i32(leader_epoch),
            start_offset=i64(start_offset), delivery_complete_count=i32(-1),
            state_batches=(StateBatch(first_offset=i64(start_offset), last_offset=i64(start_offset),
                                      delivery_state=i8(0), delivery_count=i16(1)),)),)),)))
    return response.results[0].partitions[0]


def test_a_newer_leaders_read_fences_the_older_leaders_writes(logbroker_process):
    bootstrap = logbroker_process.bootstrap
    topic, group = f"q-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic)
    set_group_configs(bootstrap, group, share_auto_offset_reset="earliest")
    produce(bootstrap, topic, 3)
    consumer = share_consumer(bootstrap, group, topic, explicit=True)
    try:
        got = drain([consumer], 3, timeout_s=30,
                    on_message=lambda _i, c, m: c.acknowledge(m, ck.AcknowledgeType.ACCEPT))[0]
        consumer.commit_sync()
        assert got, "the share-partition exists and has state"
        topic_id = topic_id_of(bootstrap, topic)

        # The broker leads the partition at leader epoch 0: a leader at epoch 5 reads the state.
        state = read(logbroker_process, group, topic_id, leader_epoch=5)
        assert state.error_code == 0 and state.state_epoch == 0 and state.start_offset >= 0
        start = state.start_offset
        # Older leader epochs are fenced from now on, for writes and for reads alike.
        assert write(logbroker_process, group, topic_id, leader_epoch=4, state_epoch=0,
                     start_offset=start).error_code == FENCED_LEADER_EPOCH
        assert read(logbroker_process, group, topic_id, leader_epoch=3).error_code == FENCED_LEADER_EPOCH
        # -1 is "not given" (the admin APIs): no leader-epoch check.
        assert read(logbroker_process, group, topic_id, leader_epoch=-1).start_offset == start
        # A newer state epoch moves on; the old one is then fenced.
        assert write(logbroker_process, group, topic_id, leader_epoch=5, state_epoch=1,
                     start_offset=start).error_code == 0
        assert write(logbroker_process, group, topic_id, leader_epoch=6, state_epoch=0,
                     start_offset=start).error_code == FENCED_STATE_EPOCH
        after = read(logbroker_process, group, topic_id, leader_epoch=5)
        assert (after.error_code, after.state_epoch, after.start_offset) == (0, 1, start)
        assert [(b.first_offset, b.last_offset, b.delivery_count) for b in after.state_batches] == [(start, start, 1)]

        # The broker itself leads at epoch 0 and is deposed now: its acknowledgement is refused
        # (the write is fenced) and the state stays what the newer leader wrote.
        produce(bootstrap, topic, 3, prefix="late")
        more = drain([consumer], 1, timeout_s=20)[0]
        assert more
        for message in more:
            consumer.acknowledge(message, ck.AcknowledgeType.ACCEPT)
        results = consumer.commit_sync()
        assert results and all(error is not None for error in results.values()), results
        final = read(logbroker_process, group, topic_id, leader_epoch=5)
        assert (final.state_epoch, final.start_offset) == (1, start)
    finally:
        consumer.close()

    # A restart replays the stored leader epoch: still fenced.
    logbroker_process.stop()
    logbroker_process.start()
    assert write(logbroker_process, group, topic_id, leader_epoch=4, state_epoch=1,
                 start_offset=start).error_code == FENCED_LEADER_EPOCH
