"""Share-group subscriptions follow the topics (KIP-932), with confluent-kafka's ShareConsumer
against a real broker: a topic created after the subscription, partitions added to a subscribed
topic, and a topic deleted and created again under the same name."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions

from clients import RawClient
from logbroker.testing import TEST_OVERRIDES, BrokerProcess
from share_helpers import TIMEOUT_S, create_topic, drain, produce, set_group_configs, share_consumer


METADATA, READ_SHARE_GROUP_STATE_SUMMARY = 3, 87


@pytest.fixture
def logbroker(tmp_path_factory):
    """A broker whose share consumers heartbeat every second (Kafka's least): a change of the
    topics reaches the members at their next heartbeat."""
    process = BrokerProcess(tmp_path_factory.mktemp("share"), overrides={
        **TEST_OVERRIDES, "group.share.heartbeat.interval.ms": "1000"})
    yield process.start().bootstrap
    process.kill()


def names() -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:8]
    return f"queue-{suffix}", f"workers-{suffix}"


def delivered(messages) -> list[tuple[int, int, bytes]]:
    return sorted((m.partition(), m.offset(), m.value()) for m in messages)


def around(bootstrap: str, group: str, topic: str, change, *, before: int, after: int):
    """What a share consumer subscribed to `topic` gets: the `before` records there are (none:
    nothing within 2 s), acknowledged; then, once `change()` has run, `after` records."""
    consumer = share_consumer(bootstrap, group, topic)
    try:
        first = drain([consumer], max(before, 1), timeout_s=TIMEOUT_S if before else 2)[0]
        consumer.commit_sync()
        change()
        second = drain([consumer], after)[0]
    finally:
        consumer.close()
    return delivered(first), delivered(second)


def test_a_topic_created_after_the_subscription_is_delivered(logbroker):
    topic, group = names()
    set_group_configs(logbroker, group, share_auto_offset_reset="earliest")

    def create_and_produce():
        create_topic(logbroker, topic)
        produce(logbroker, topic, 3)
    first, then = around(logbroker, group, topic, create_and_produce, before=0, after=3)
    assert first == []
    assert then == [(0, 0, b"v0"), (0, 1, b"v1"), (0, 2, b"v2")]


def test_partitions_added_to_a_subscribed_topic_are_assigned(logbroker):
    topic, group = names()
    create_topic(logbroker, topic)
    set_group_configs(logbroker, group, share_auto_offset_reset="earliest")
    produce(logbroker, topic, 2, prefix="p0-")

    def add_partitions_and_produce():
        admin = AdminClient({"bootstrap.servers": logbroker})
        admin.create_partitions([NewPartitions(topic, 3)])[topic].result(TIMEOUT_S)
        produce(logbroker, topic, 2, partition=1, prefix="p1-")
        produce(logbroker, topic, 1, partition=2, prefix="p2-")
    first, then = around(logbroker, group, topic, add_partitions_and_produce, before=2, after=3)
    assert first == [(0, 0, b"p0-0"), (0, 1, b"p0-1")]
    assert then == [(1, 0, b"p1-0"), (1, 1, b"p1-1"), (2, 0, b"p2-0")]


def test_a_topic_deleted_and_created_again_delivers_its_new_records(logbroker):
    topic, group = names()
    create_topic(logbroker, topic)
    set_group_configs(logbroker, group, share_auto_offset_reset="earliest")
    produce(logbroker, topic, 5, prefix="old")
    old_starts = []

    def recreate_and_produce():
        old_starts.append(start_offset(logbroker, group, old_id))
        admin = AdminClient({"bootstrap.servers": logbroker})
        admin.delete_topics([topic])[topic].result(TIMEOUT_S)
        create_topic(logbroker, topic)
        produce(logbroker, topic, 3, prefix="new")
    old_id = topic_id(logbroker, topic)
    first, then = around(logbroker, group, topic, recreate_and_produce, before=5, after=3)
    assert [offset for _, offset, _ in first] == [0, 1, 2, 3, 4]
    assert old_starts == [5], "the five were acknowledged"
    assert then == [(0, 0, b"new0"), (0, 1, b"new1"), (0, 2, b"new2")], \
        "the new topic's share-partition starts afresh, not at the old one's offset 5"
    assert topic_id(logbroker, topic) != old_id
    assert wait_for(lambda: start_offset(logbroker, group, old_id) == -1), "the old topic's state was deleted"


def topic_id(bootstrap: str, topic: str) -> uuid.UUID:
    with RawClient(bootstrap) as raw:
        return raw.request(METADATA, 12, topics=[{"name": topic}], allow_auto_topic_creation=False).topics[0].topic_id


def start_offset(bootstrap: str, group: str, topic_id: uuid.UUID) -> int:
    """The share-partition start offset of (group, topic id, partition 0) in
    __share_group_state (ReadShareGroupStateSummary; -1: no state)."""
    with RawClient(bootstrap) as raw:
        response = raw.request(READ_SHARE_GROUP_STATE_SUMMARY, 1, group_id=group, topics=[
            {"topic_id": topic_id, "partitions": [{"partition": 0, "leader_epoch": 0}]}])
    return response.results[0].partitions[0].start_offset


def wait_for(condition, *, timeout_s: float = TIMEOUT_S) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True
