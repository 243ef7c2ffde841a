"""Log compaction on a real broker: confluent-kafka produces keyed records and deletes to a
compacted topic with small segments; once the cleaner has run, a consumer reads exactly the
latest value of each live key below the cleaned offset, at the offsets they were written at."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer

from logbroker.storage.checkpoints import CLEANER_OFFSET_CHECKPOINT_FILE, OffsetCheckpointFile
from logbroker.testing import BrokerProcess
from logbroker.types import TopicPartition

from clients import TIMEOUT_S, confluent_consumer, confluent_rec, create_topic

pytestmark = pytest.mark.timeout(60)

KEYS = 40
UPDATES = 1500


def produce(bootstrap: str, topic: str, items: list[tuple[bytes, bytes | None]]) -> list[int]:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 2000})
    producer.list_topics(topic, timeout=TIMEOUT_S)
    offsets: list[int] = [-1] * len(items)

    def on_delivery(i, err, msg):
        assert err is None, err
        offsets[i] = msg.offset()

    for i, (key, value) in enumerate(items):
        producer.produce(topic, key=key, value=value, partition=0,
                         on_delivery=lambda err, msg, i=i: on_delivery(i, err, msg))
        producer.poll(0)
    assert producer.flush(TIMEOUT_S) == 0
    return offsets


def read_to_end(bootstrap: str, topic: str) -> list:
    """Every record of partition 0, from its start up to the high watermark."""
    from confluent_kafka import TopicPartition as CkTopicPartition

    consumer = confluent_consumer(bootstrap, **{"auto.offset.reset": "earliest"})
    try:
        _, high = consumer.get_watermark_offsets(CkTopicPartition(topic, 0), timeout=TIMEOUT_S)
        consumer.assign([CkTopicPartition(topic, 0, 0)])
        out = []
        deadline = time.monotonic() + TIMEOUT_S
        while (not out or out[-1].offset < high - 1) and time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=0.2):
                assert msg.error() is None, msg.error()
                out.append(confluent_rec(msg))
        assert out and out[-1].offset == high - 1
        return out
    finally:
        consumer.close()


def test_consumer_reads_latest_value_per_live_key_after_cleaning(tmp_path):
    with BrokerProcess(tmp_path / "broker", overrides={"log.cleaner.backoff.ms": "200"}) as broker:
        topic = "compacted"
        create_topic(broker.bootstrap, topic, config={
            "cleanup.policy": "compact", "segment.bytes": "4096",
            "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "0",
            "file.delete.delay.ms": "0"})
        items = [(b"key-%d" % (i % KEYS), b"value-%d" % i) for i in range(UPDATES)]
        items += [(b"key-%d" % k, None) for k in range(0, KEYS, 4)]  # delete every fourth key
        items += [(b"tail-%d" % i, b"x" * 200) for i in range(60)]  # push the rest out of the active segment
        offsets = produce(broker.bootstrap, topic, items)
        produced = {offset: item for offset, item in zip(offsets, items)}
        latest: dict[bytes, int] = {}
        for offset in sorted(produced):
            latest[produced[offset][0]] = offset
        deleted_keys = {key for key, offset in latest.items() if produced[offset][1] is None}

        checkpoint = OffsetCheckpointFile(broker.data_dir / CLEANER_OFFSET_CHECKPOINT_FILE)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            bound = checkpoint.read().get(TopicPartition(topic, 0), 0)  # then read: it only grows
            records = read_to_end(broker.bootstrap, topic)
            below = [r for r in records if r.offset < bound]
            if bound > latest[b"key-39"] and all(r.value is not None for r in below):
                break
            time.sleep(0.2)
        else:
            pytest.fail(f"the cleaner did not finish: checkpoint {bound}")

        # Offsets preserved: every record read is one that was produced, at its offset.
        assert [r.offset for r in records] == sorted({r.offset for r in records})
        for r in records:
            assert produced[r.offset] == (r.key, r.value)
        # Below the cleaned offset: exactly the latest value of each live key.
        assert {r.key: r.offset for r in below} == {
            key: offset for key, offset in latest.items()
            if offset < bound and key not in deleted_keys}
        # And overall the latest value of every key is still there (tombstones may be gone).
        seen = {r.key: r.offset for r in records}
        for key, offset in latest.items():
            if key not in deleted_keys:
                assert seen[key] == offset
        assert len(records) < len(produced) // 5
