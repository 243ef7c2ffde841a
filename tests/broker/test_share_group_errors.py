"""Share groups (KIP-932): bad input gets Kafka's error codes and disturbs nothing else.

Raw kio requests, since a well-behaved ShareConsumer never sends these."""

from __future__ import annotations

import uuid

import confluent_kafka as ck
import pytest

from clients import RawClient
from share_helpers import create_topic, produce, set_group_configs

HEARTBEAT, DESCRIBE, SHARE_FETCH, SHARE_ACK, JOIN_GROUP, FIND_COORDINATOR, METADATA = 76, 77, 78, 79, 11, 10, 3
UNKNOWN_MEMBER_ID, INCONSISTENT_GROUP_PROTOCOL, GROUP_ID_NOT_FOUND = 25, 23, 69
FENCED_MEMBER_EPOCH, INVALID_RECORD_STATE = 110, 121
SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH = 122, 123
RECORD_LIMIT = 1  # ShareFetch v2's ShareAcquireMode: at most max_records, a batch split if need be


@pytest.fixture
def queue(logbroker):
    topic, group = f"queue-{uuid.uuid4().hex[:8]}", f"workers-{uuid.uuid4().hex[:8]}"
    create_topic(logbroker, topic)
    set_group_configs(logbroker, group, share_auto_offset_reset="earliest")
    produce(logbroker, topic, 10)
    with RawClient(logbroker) as raw:
        raw.request(FIND_COORDINATOR, 4, key_type=0, coordinator_keys=[group])  # creates __consumer_offsets
        metadata = raw.request(METADATA, 12, topics=[{"name": topic}], allow_auto_topic_creation=False)
        yield raw, topic, group, metadata.topics[0].topic_id


def heartbeat(raw, group, member_id, epoch, topics=None):
    return raw.request(HEARTBEAT, 1, group_id=group, member_id=member_id, member_epoch=epoch,
                       subscribed_topic_names=topics)


def share_fetch(raw, group, member_id, epoch, topic_id=None, acks=()):
    topics = [] if topic_id is None else [{"topic_id": topic_id, "partitions": [
        {"partition_index": 0, "acknowledgement_batches": list(acks)}]}]
    return raw.request(SHARE_FETCH, 2, group_id=group, member_id=member_id, share_session_epoch=epoch,
                       max_wait=100, min_bytes=1, max_bytes=1 << 20, max_records=5, batch_size=5,
                       share_acquire_mode=RECORD_LIMIT, topics=topics, forgotten_topics_data=[])


def test_heartbeat_with_unknown_member_or_stale_epoch(queue):
    raw, topic, group, _ = queue
    assert heartbeat(raw, group, "nobody", 3).error_code == UNKNOWN_MEMBER_ID
    joined = heartbeat(raw, group, "m1", 0, [topic])
    assert joined.error_code == 0 and joined.member_epoch == 1
    assert [list(t.partitions) for t in joined.assignment.topic_partitions] == [[0]]
    heartbeat(raw, group, "m2", 0, [topic])  # bumps the group epoch to 2
    assert heartbeat(raw, group, "m1", 7).error_code == FENCED_MEMBER_EPOCH
    assert heartbeat(raw, group, "m1", 1).member_epoch == 2  # its own epoch still works
    assert heartbeat(raw, group, "m1", -1).member_epoch == -1
    assert heartbeat(raw, group, "m1", 2).error_code == UNKNOWN_MEMBER_ID


def test_share_session_epochs(queue):
    raw, _, group, topic_id = queue
    assert share_fetch(raw, group, "m1", 1, topic_id).error_code == SHARE_SESSION_NOT_FOUND
    opened = share_fetch(raw, group, "m1", 0, topic_id)
    assert opened.error_code == 0
    assert [(a.first_offset, a.last_offset) for a in opened.responses[0].partitions[0].acquired_records] == [(0, 4)]
    assert share_fetch(raw, group, "m1", 5).error_code == INVALID_SHARE_SESSION_EPOCH
    again = share_fetch(raw, group, "m1", 1)  # the session survived the bad epoch
    assert again.error_code == 0
    assert [(a.first_offset, a.last_offset) for a in again.responses[0].partitions[0].acquired_records] == [(5, 9)]


def test_acknowledging_records_not_acquired_is_invalid_record_state(queue):
    raw, _, group, topic_id = queue
    share_fetch(raw, group, "m1", 0, topic_id)  # acquires 0-4
    ack = raw.request(SHARE_ACK, 1, group_id=group, member_id="m2", share_session_epoch=0, topics=[])
    assert ack.error_code == INVALID_SHARE_SESSION_EPOCH  # acknowledgements cannot open a session
    share_fetch(raw, group, "m2", 0, topic_id)  # acquires 5-9
    ack = raw.request(SHARE_ACK, 1, group_id=group, member_id="m2", share_session_epoch=1, topics=[
        {"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": [
            {"first_offset": 0, "last_offset": 1, "acknowledge_types": [1]}]}]}])
    assert ack.responses[0].partitions[0].error_code == INVALID_RECORD_STATE
    fine = raw.request(SHARE_ACK, 1, group_id=group, member_id="m1", share_session_epoch=1, topics=[
        {"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": [
            {"first_offset": 0, "last_offset": 4, "acknowledge_types": [1]}]}]}])
    assert fine.error_code == 0 and fine.responses[0].partitions[0].error_code == 0


def test_group_ids_of_the_other_type(queue, logbroker):
    raw, topic, group, _ = queue
    classic = f"classic-{uuid.uuid4().hex[:8]}"
    consumer = ck.Consumer({"bootstrap.servers": logbroker, "group.id": classic, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    try:
        while consumer.poll(0.5) is None:
            pass
        assert heartbeat(raw, classic, "m1", 0, [topic]).error_code == GROUP_ID_NOT_FOUND
        described = raw.request(DESCRIBE, 1, group_ids=[classic], include_authorized_operations=False)
        assert described.groups[0].error_code == GROUP_ID_NOT_FOUND
    finally:
        consumer.close()
    heartbeat(raw, group, "m1", 0, [topic])
    joined = raw.request(JOIN_GROUP, 5, group_id=group, session_timeout=10000, rebalance_timeout=10000,
                         member_id="", group_instance_id=None, protocol_type="consumer",
                         protocols=[{"name": "range", "metadata": b""}])
    assert joined.error_code == INCONSISTENT_GROUP_PROTOCOL


def test_group_configs_are_described_with_their_source(logbroker):
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType
    group = f"configured-{uuid.uuid4().hex[:8]}"
    set_group_configs(logbroker, group, share_auto_offset_reset="earliest", share_record_lock_duration_ms="15000")
    admin = AdminClient({"bootstrap.servers": logbroker})
    [future] = admin.describe_configs([ConfigResource(ResourceType.GROUP, group)]).values()
    configs = future.result()
    assert configs["share.auto.offset.reset"].value == "earliest"
    assert configs["share.record.lock.duration.ms"].value == "15000"
    assert configs["share.isolation.level"].value == "read_uncommitted"
    assert configs["share.isolation.level"].is_default
    with pytest.raises(ck.KafkaException, match="INVALID_CONFIG|share.auto.offset.reset"):
        set_group_configs(logbroker, group, share_auto_offset_reset="sometime")
