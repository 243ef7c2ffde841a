"""ListOffsets through real clients: earliest, latest (the high watermark), by timestamp, and the
max timestamp (clients.md 12).

The topic holds five batches of four records; batch k carries timestamps T + 1000k + 10j
(j = 0..3), so offset 4k + j has timestamp T + 1000k + 10j. A timestamp that falls between two
records of one batch must find the later record (the broker scans that batch's records), not
the batch's first offset.
"""

from __future__ import annotations

import asyncio

import pytest
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import OffsetSpec

from logbroker.protocol.apis import SUPPORTED_APIS, ApiKey
from logbroker.records.builder import build_batch

from clients import (
    TIMEOUT_S,
    RawClient,
    admin,
    confluent_consumer,
    create_topic,
    now_ms,
    stored_batches,
)

pytestmark = pytest.mark.timeout(60)

BATCHES = 5
PER_BATCH = 4
END = BATCHES * PER_BATCH


def ts_of(base: int, offset: int) -> int:
    return base + 1000 * (offset // PER_BATCH) + 10 * (offset % PER_BATCH)


# (timestamp relative to T, the offset ListOffsets must answer; None: no such record)
CASES = [
    (-1_000_000, 0),           # before everything: the first record
    (0, 0),                    # exactly the first timestamp
    (2000, 8),                 # exactly the first record of batch 2
    (2015, 10),                # between two records inside batch 2: the later one
    (2030, 11),                # the last record of batch 2
    (2500, 12),                # between batches: the next batch's first record
    (4030, 19),                # the largest timestamp
    (4031, None),              # past the end: -1 / None
]


@pytest.fixture(scope="module")
def timed_topic(shared_broker) -> tuple[str, int]:
    import uuid

    topic = f"lo-{uuid.uuid4().hex[:12]}"
    create_topic(shared_broker.bootstrap, topic)
    base = now_ms() - 600_000
    with RawClient(shared_broker.bootstrap) as client:  # exactly these five batches
        for k in range(BATCHES):
            offsets = range(k * PER_BATCH, (k + 1) * PER_BATCH)
            batch = build_batch([(b"k", b"v%d" % o, (), ts_of(base, o)) for o in offsets],
                                compression="gzip" if k % 2 else "none")
            answer = client.produce(topic, 0, batch)
            assert (int(answer.error_code), answer.base_offset) == (0, k * PER_BATCH)
    assert [(b.base_offset, b.records_count) for b in stored_batches(shared_broker.data_dir, topic, 0)] == [
        (k * PER_BATCH, PER_BATCH) for k in range(BATCHES)]
    return topic, base


@pytest.mark.parametrize(("relative_ts", "expected"), CASES)
def test_confluent_offsets_for_times(shared_broker, timed_topic, relative_ts, expected):
    topic, base = timed_topic
    consumer = confluent_consumer(shared_broker.bootstrap)
    try:
        [answer] = consumer.offsets_for_times([CkTopicPartition(topic, 0, base + relative_ts)], timeout=TIMEOUT_S)
    finally:
        consumer.close()
    assert answer.error is None
    assert answer.offset == (-1 if expected is None else expected)


@pytest.mark.parametrize(("relative_ts", "expected"), CASES)
def test_kafka_python_offsets_for_times(shared_broker, timed_topic, relative_ts, expected):
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KpTopicPartition

    topic, base = timed_topic
    tp = KpTopicPartition(topic, 0)
    consumer = KafkaConsumer(bootstrap_servers=shared_broker.bootstrap, group_id=None)
    try:
        answer = consumer.offsets_for_times({tp: base + relative_ts})[tp]
    finally:
        consumer.close()
    if expected is None:
        assert answer is None
    else:
        assert (answer.offset, answer.timestamp) == (expected, ts_of(base, expected))


def test_aiokafka_offsets_earliest_latest_and_by_time(shared_broker, timed_topic):
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition as AioTopicPartition

    topic, base = timed_topic
    tp = AioTopicPartition(topic, 0)

    async def run():
        consumer = AIOKafkaConsumer(bootstrap_servers=shared_broker.bootstrap, group_id=None)
        await consumer.start()
        try:
            by_time = {}
            for relative_ts, _ in CASES:
                by_time[relative_ts] = (await consumer.offsets_for_times({tp: base + relative_ts}))[tp]
            return ((await consumer.beginning_offsets([tp]))[tp], (await consumer.end_offsets([tp]))[tp],
                    by_time)
        finally:
            await consumer.stop()

    earliest, latest, by_time = asyncio.run(run())

    assert (earliest, latest) == (0, END)
    for relative_ts, expected in CASES:
        answer = by_time[relative_ts]
        if expected is None:
            assert answer is None, relative_ts
        else:
            assert (answer.offset, answer.timestamp) == (expected, ts_of(base, expected)), relative_ts


def test_watermarks_are_log_start_and_high_watermark(shared_broker, timed_topic):
    topic, _ = timed_topic
    consumer = confluent_consumer(shared_broker.bootstrap)
    try:
        assert consumer.get_watermark_offsets(CkTopicPartition(topic, 0), timeout=TIMEOUT_S) == (0, END)
    finally:
        consumer.close()


def test_kafka_python_beginning_and_end_offsets(shared_broker, timed_topic):
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KpTopicPartition

    topic, _ = timed_topic
    tp = KpTopicPartition(topic, 0)
    consumer = KafkaConsumer(bootstrap_servers=shared_broker.bootstrap, group_id=None)
    try:
        assert (consumer.beginning_offsets([tp])[tp], consumer.end_offsets([tp])[tp]) == (0, END)
    finally:
        consumer.close()


def test_admin_list_offsets_every_spec(shared_broker, timed_topic):
    topic, base = timed_topic
    tp = CkTopicPartition(topic, 0)
    specs = {"earliest": OffsetSpec.earliest(), "latest": OffsetSpec.latest(),
             "max": OffsetSpec.max_timestamp(), "at": OffsetSpec.for_timestamp(base + 3010)}
    answers = {}
    for name, spec in specs.items():
        answers[name] = admin(shared_broker.bootstrap).list_offsets({tp: spec})[tp].result(TIMEOUT_S)

    assert answers["earliest"].offset == 0
    assert answers["latest"].offset == END
    assert (answers["max"].offset, answers["max"].timestamp) == (END - 1, ts_of(base, END - 1))
    assert (answers["at"].offset, answers["at"].timestamp) == (13, ts_of(base, 13))


@pytest.mark.parametrize("version", range(SUPPORTED_APIS[ApiKey.LIST_OFFSETS].min_version,
                                           SUPPORTED_APIS[ApiKey.LIST_OFFSETS].max_version + 1))
def test_every_list_offsets_version_answers_latest_and_by_time(shared_broker, timed_topic, version):
    topic, base = timed_topic
    with RawClient(shared_broker.bootstrap) as client:
        latest = client.list_offset(topic, 0, -1, version=version)
        earliest = client.list_offset(topic, 0, -2, version=version)
        at = client.list_offset(topic, 0, base + 1005, version=version)
        past = client.list_offset(topic, 0, base + 99_999, version=version)

    assert (int(latest.error_code), latest.offset) == (0, END)
    assert (int(earliest.error_code), earliest.offset) == (0, 0)
    assert (int(at.error_code), at.offset, at.timestamp) == (0, 5, ts_of(base, 5))
    assert (int(past.error_code), past.offset, past.timestamp) == (0, -1, -1)


@pytest.mark.parametrize("version", [8, 9, 10])
def test_tiered_storage_specs_are_answered_as_kafka_without_tiered_storage(shared_broker, topic, version):
    # -4 earliest local timestamp (v8) is the log start; -5 latest tiered timestamp (v9) is -1/-1.
    create_topic(shared_broker.bootstrap, topic)
    with RawClient(shared_broker.bootstrap) as client:
        empty_local = client.list_offset(topic, 0, -4, version=version)
        client.produce(topic, 0, build_batch([(b"k", b"v")] * 3))
        [deleted] = admin(shared_broker.bootstrap).delete_records([CkTopicPartition(topic, 0, 1)]).values()
        deleted.result(TIMEOUT_S)
        local = client.list_offset(topic, 0, -4, version=version)
        tiered = client.list_offset(topic, 0, -5, version=version)
    assert (int(empty_local.error_code), empty_local.offset, empty_local.timestamp) == (0, 0, -1)
    assert (int(local.error_code), local.offset, local.timestamp, local.leader_epoch) == (0, 1, -1, 0)
    if version >= 9:
        assert (int(tiered.error_code), tiered.offset, tiered.timestamp, tiered.leader_epoch) == (0, -1, -1, -1)


def test_unknown_partition_is_unknown_topic_or_partition(shared_broker, timed_topic):
    topic, _ = timed_topic
    with RawClient(shared_broker.bootstrap) as client:
        answer = client.list_offset(topic, 7, -1)
    assert int(answer.error_code) == 3


def test_empty_partition_offsets(shared_broker, topic):
    create_topic(shared_broker.bootstrap, topic)
    with RawClient(shared_broker.bootstrap) as client:
        latest = client.list_offset(topic, 0, -1)
        earliest = client.list_offset(topic, 0, -2)
        max_timestamp = client.list_offset(topic, 0, -3)
        by_time = client.list_offset(topic, 0, 0)
    assert (latest.offset, earliest.offset) == (0, 0)
    assert (max_timestamp.offset, max_timestamp.timestamp) == (-1, -1)
    assert (by_time.offset, by_time.timestamp) == (-1, -1)
    assert all(int(a.error_code) == 0 for a in (latest, earliest, max_timestamp, by_time))


def test_offsets_for_times_across_many_segments(shared_broker, topic):
    # 60 batches over several small segments (time index entries every 256 bytes), batch k's
    # records at distinct times within [T + 1000k, T + 1000k + 999], in no order inside the
    # batch. ListOffsets must find the first record at or after each target, as a scan would.
    import random

    create_topic(shared_broker.bootstrap, topic, config={"segment.bytes": "3000", "index.interval.bytes": "256"})
    rng = random.Random(12)
    base = now_ms() - 3_600_000
    stamps: list[int] = []
    with RawClient(shared_broker.bootstrap) as client:
        for k in range(60):
            times = [base + 1000 * k + t for t in rng.sample(range(1000), rng.randrange(1, 6))]
            batch = build_batch([(None, b"v%d" % (len(stamps) + i), (), ts) for i, ts in enumerate(times)],
                                compression="gzip" if k % 3 == 0 else "none")
            assert client.produce(topic, 0, batch).base_offset == len(stamps)
            stamps += times
        assert len(list((shared_broker.data_dir / f"{topic}-0").glob("*.log"))) >= 3

        targets = [base - 1, base + 59_999] + [base + rng.randrange(60_000) for _ in range(40)]
        targets += [stamps[i] for i in rng.sample(range(len(stamps)), 10)]
        for target in targets:
            want = next((o for o, ts in enumerate(stamps) if ts >= target), -1)
            answer = client.list_offset(topic, 0, target)
            assert (answer.offset, answer.timestamp) == (want, stamps[want] if want >= 0 else -1), target
        newest = client.list_offset(topic, 0, -3)
        assert (newest.offset, newest.timestamp) == (stamps.index(max(stamps)), max(stamps))
