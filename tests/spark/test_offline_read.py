"""Offline backfill: `.option("path", log_dir)` reads a stopped broker's segment files."""

from __future__ import annotations

import json

import pytest
from spark_kafka import consume_all, create_topic, produce

from logbroker.testing import BrokerProcess


@pytest.fixture(scope="module")
def stopped_log_dir(tmp_path_factory):
    """A broker with small segments, two topics; stopped cleanly. Returns (log dir, records)."""
    broker = BrokerProcess(tmp_path_factory.mktemp("offline"),
                           overrides={"log.segment.bytes": "16384"})
    broker.start()
    try:
        create_topic(broker.bootstrap, "clicks", 3)
        create_topic(broker.bootstrap, "other", 1)
        produce(broker.bootstrap, "clicks", [
            {"key": f"k{i}".encode() if i % 3 else None, "value": bytes([i % 256]) * (i % 200),
             "partition": i % 3, "timestamp": 1_700_000_000_000 + i,
             **({"headers": [("n", str(i).encode())]} if i % 2 else {})} for i in range(900)],
            **{"batch.size": 4096})  # batches must fit the small segments
        produce(broker.bootstrap, "other", [{"value": b"x"}] * 10)
        expected = consume_all(broker.bootstrap, "clicks", 3)
    finally:
        assert broker.stop() == 0
    return broker.data_dir, expected


def offline(spark, log_dir, **options):
    reader = spark.read.format("logbroker").option("path", str(log_dir))
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def test_offline_read_equals_what_consumers_read_one_task_per_segment(spark, stopped_log_dir):
    log_dir, expected = stopped_log_dir
    segments = sum(1 for p in log_dir.glob("clicks-*/*.log"))
    assert segments > 3  # small segments: several per partition
    df = offline(spark, log_dir, subscribe="clicks", includeHeaders="true")
    assert df.rdd.getNumPartitions() == segments
    got = []
    for row in df.collect():
        d = row.asDict(recursive=True)
        got.append({"key": None if d["key"] is None else bytes(d["key"]),
                    "value": bytes(d["value"]), "topic": d["topic"], "partition": d["partition"],
                    "offset": d["offset"], "timestamp_ms": round(d["timestamp"].timestamp() * 1000),
                    "timestampType": d["timestampType"],
                    "headers": None if d["headers"] is None else
                    [(h["key"], bytes(h["value"])) for h in d["headers"]]})
    assert sorted(got, key=lambda r: (r["partition"], r["offset"])) == expected


def test_offline_read_honours_offsets_and_topic_selection(spark, stopped_log_dir):
    log_dir, _ = stopped_log_dir
    df = offline(spark, log_dir, subscribe="clicks",
                 startingOffsets=json.dumps({"clicks": {"0": 100, "1": -2, "2": 299}}),
                 endingOffsets=json.dumps({"clicks": {"0": 150, "1": 3, "2": -1}}))
    offsets = sorted((r["partition"], r["offset"]) for r in df.collect())
    assert offsets == [(0, o) for o in range(100, 150)] + [(1, o) for o in range(3)] + [(2, 299)]
    assert offline(spark, log_dir).count() == 910  # no subscription: every topic


def test_offline_read_of_a_missing_dir_is_an_option_error(spark, tmp_path):
    with pytest.raises(Exception, match="not a directory"):
        offline(spark, tmp_path / "nope", subscribe="x").collect()
