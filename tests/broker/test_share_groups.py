"""Share groups (KIP-932) with confluent-kafka's ShareConsumer against a real broker."""

from __future__ import annotations

import time
import uuid

import confluent_kafka as ck
import pytest

from logbroker.testing import BrokerProcess, TEST_OVERRIDES
from share_helpers import create_topic, drain, poll_messages, produce, set_group_configs, share_consumer

ACCEPT, RELEASE, REJECT = ck.AcknowledgeType.ACCEPT, ck.AcknowledgeType.RELEASE, ck.AcknowledgeType.REJECT


def names() -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:8]
    return f"queue-{suffix}", f"workers-{suffix}"


@pytest.fixture
def short_locks(tmp_path_factory):
    """A broker whose acquisition locks last 2 s and delivery limit is 2."""
    process = BrokerProcess(tmp_path_factory.mktemp("share"), overrides={
        **TEST_OVERRIDES, "group.share.record.lock.duration.ms": "2000", "group.share.delivery.count.limit": "2"})
    yield process.start()
    process.kill()


def closing(*consumers):
    for consumer in consumers:
        consumer.close()


def test_share_consumers_on_one_partition_each_get_distinct_records(logbroker):
    topic, group = names()
    create_topic(logbroker, topic)
    set_group_configs(logbroker, group, share_auto_offset_reset="earliest")
    values = produce(logbroker, topic, 300, batch=20)
    consumers = [share_consumer(logbroker, group, topic, **{"max.poll.records": 20}) for _ in range(3)]
    try:
        got = drain(consumers, 300)
    finally:
        closing(*consumers)
    offsets = [m.offset() for ms in got.values() for m in ms]
    assert sorted(offsets) == list(range(300)), "every record delivered exactly once"
    assert sorted(m.value() for ms in got.values() for m in ms) == sorted(values)
    assert sum(1 for ms in got.values() if ms) >= 2, "more than one consumer got records"


def test_latest_is_the_default_start(logbroker):
    topic, group = names()
    create_topic(logbroker, topic)
    produce(logbroker, topic, 5, prefix="before")
    consumer = share_consumer(logbroker, group, topic)
    try:
        assert drain([consumer], 1, timeout_s=4)[0] == []
        produce(logbroker, topic, 3, prefix="after")
        got = drain([consumer], 3)[0]
    finally:
        consumer.close()
    assert [m.value() for m in got] == [b"after0", b"after1", b"after2"]


def test_release_redelivers_and_reject_does_not(logbroker):
    topic, group = names()
    create_topic(logbroker, topic)
    set_group_configs(logbroker, group, share_auto_offset_reset="earliest")
    produce(logbroker, topic, 4)
    decisions = {0: RELEASE, 1: REJECT, 2: ACCEPT, 3: ACCEPT}
    seen: list[tuple[int, int]] = []

    def acknowledge(_i, consumer, message):
        seen.append((message.offset(), message.delivery_count() if hasattr(message, "delivery_count") else 0))
        first_time = sum(1 for o, _ in seen if o == message.offset()) == 1
        consumer.acknowledge(message, decisions[message.offset()] if first_time else ACCEPT)

    consumer = share_consumer(logbroker, group, topic, explicit=True)
    try:
        drain([consumer], 5, on_message=acknowledge)
        consumer.commit_sync()
        assert drain([consumer], 1, timeout_s=3, on_message=acknowledge)[0] == []
    finally:
        consumer.close()
    offsets = [o for o, _ in seen]
    assert sorted(offsets) == [0, 0, 1, 2, 3], "the released record came back, the rejected one did not"


def test_a_crashed_members_records_come_back_after_the_lock_expires(short_locks):
    bootstrap = short_locks.bootstrap
    topic, group = names()
    create_topic(bootstrap, topic)
    set_group_configs(bootstrap, group, share_auto_offset_reset="earliest")
    produce(bootstrap, topic, 10)
    crashed = share_consumer(bootstrap, group, topic, explicit=True)
    held = drain([crashed], 10)[0]
    assert len(held) == 10
    # The member never acknowledges nor closes (as if its process died): its locks run out.
    other = share_consumer(bootstrap, group, topic)
    started = time.monotonic()
    try:
        again = drain([other], 10)[0]
    finally:
        other.close()
    assert sorted(m.offset() for m in again) == list(range(10))
    assert time.monotonic() - started >= 1.0, "not before the 2 s lock expired"
    del crashed  # destroyed without close()


def test_the_delivery_limit_archives_a_record(short_locks):
    bootstrap = short_locks.bootstrap
    topic, group = names()
    create_topic(bootstrap, topic)
    set_group_configs(bootstrap, group, share_auto_offset_reset="earliest")
    produce(bootstrap, topic, 1)
    deliveries = []

    def release(_i, consumer, message):
        deliveries.append(message.offset())
        consumer.acknowledge(message, RELEASE)

    consumer = share_consumer(bootstrap, group, topic, explicit=True)
    try:
        drain([consumer], 3, timeout_s=8, on_message=release)
    finally:
        consumer.close()
    assert deliveries == [0, 0], "delivered twice (group.share.delivery.count.limit=2), then archived"


def test_restart_keeps_acknowledged_records_and_redelivers_the_rest(logbroker_process):
    bootstrap = logbroker_process.bootstrap
    topic, group = names()
    create_topic(bootstrap, topic)
    set_group_configs(bootstrap, group, share_auto_offset_reset="earliest")
    produce(bootstrap, topic, 20)
    acked = set()

    def accept_even(_i, consumer, message):
        if message.offset() % 2 == 0:
            consumer.acknowledge(message, ACCEPT)
            acked.add(message.offset())

    consumer = share_consumer(bootstrap, group, topic, explicit=True)
    try:
        drain([consumer], 20, on_message=accept_even)
        consumer.commit_sync()
    finally:
        pass
    assert acked == set(range(0, 20, 2))
    logbroker_process.kill()
    logbroker_process.start()
    bootstrap = logbroker_process.bootstrap
    again = share_consumer(bootstrap, group, topic)
    try:
        got = drain([again], 10)[0]
        got += drain([again], 1, timeout_s=2)[0]
    finally:
        again.close()
    assert sorted(m.offset() for m in got) == list(range(1, 20, 2))


def test_restart_resumes_the_share_group_from_its_records(logbroker_process):
    from clients import RawClient
    bootstrap = logbroker_process.bootstrap
    topic, group = names()
    create_topic(bootstrap, topic)
    consumers = [share_consumer(bootstrap, group, topic) for _ in range(2)]
    try:
        drain(consumers, 1, timeout_s=3)  # both join
    finally:
        pass
    with RawClient(bootstrap) as raw:
        before = raw.request(77, 1, group_ids=[group], include_authorized_operations=False).groups[0]
    assert before.error_code == 0 and len(before.members) == 2
    logbroker_process.kill()
    logbroker_process.start()
    with RawClient(logbroker_process.bootstrap) as raw:
        raw.request(10, 4, key_type=0, coordinator_keys=[group])
        after = raw.request(77, 1, group_ids=[group], include_authorized_operations=False).groups[0]
        listed = raw.request(16, 5, states_filter=[], types_filter=["share"]).groups
    assert after.error_code == 0 and after.group_epoch == before.group_epoch
    assert sorted(m.member_id for m in after.members) == sorted(m.member_id for m in before.members)
    assert [(g.group_id, g.group_type) for g in listed if g.group_id == group] == [(group, "share")]
    del consumers  # their broker went away under them
