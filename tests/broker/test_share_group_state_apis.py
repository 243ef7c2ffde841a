"""The share-group state APIs (KIP-932, inter-broker) served by the broker's share coordinator:
Initialize, Read, Write, ReadSummary and Delete of one share-partition's state, raw kio requests."""

from __future__ import annotations

import uuid

from clients import RawClient
from share_helpers import create_topic, drain, share_consumer

INITIALIZE, READ, WRITE, DELETE, SUMMARY = 83, 84, 85, 86, 87
FENCED_STATE_EPOCH = 124


def state_request(api_key: int, version: int, raw, group, topic_id, **partition):
    response = raw.request(api_key, version, group_id=group, topics=[
        {"topic_id": topic_id, "partitions": [{"partition": 0, **partition}]}])
    return response.results[0].partitions[0]


def test_initialize_write_read_summarize_and_delete(logbroker):
    topic, group = f"q-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    create_topic(logbroker, topic)
    consumer = share_consumer(logbroker, f"warmup-{group}", topic)
    drain([consumer], 1, timeout_s=2)  # makes the broker create __share_group_state
    consumer.close()
    with RawClient(logbroker) as raw:
        topic_id = raw.request(3, 12, topics=[{"name": topic}], allow_auto_topic_creation=False).topics[0].topic_id
        unknown = state_request(READ, 0, raw, group, topic_id, leader_epoch=0)
        assert (unknown.error_code, unknown.state_epoch, unknown.start_offset) == (0, -1, -1)
        assert state_request(INITIALIZE, 0, raw, group, topic_id, state_epoch=1, start_offset=10).error_code == 0
        written = state_request(WRITE, 1, raw, group, topic_id, state_epoch=1, leader_epoch=0, start_offset=12,
                                state_batches=[{"first_offset": 12, "last_offset": 13, "delivery_state": 2,
                                                "delivery_count": 1}])
        assert written.error_code == 0
        read = state_request(READ, 0, raw, group, topic_id, leader_epoch=0)
        assert (read.state_epoch, read.start_offset) == (1, 12)
        assert [(b.first_offset, b.last_offset, b.delivery_state) for b in read.state_batches] == [(12, 13, 2)]
        summary = state_request(SUMMARY, 1, raw, group, topic_id, leader_epoch=0)
        assert (summary.start_offset, summary.delivery_complete_count) == (12, 2)
        stale = state_request(WRITE, 1, raw, group, topic_id, state_epoch=0, leader_epoch=0, start_offset=0,
                              state_batches=[])
        assert stale.error_code == FENCED_STATE_EPOCH
        assert state_request(DELETE, 0, raw, group, topic_id).error_code == 0
        assert state_request(READ, 0, raw, group, topic_id, leader_epoch=0).start_offset == -1
