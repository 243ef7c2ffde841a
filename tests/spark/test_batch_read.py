"""Batch reads through the data source equal what a plain confluent-kafka consumer reads."""

from __future__ import annotations

import json
import random

import pytest
from spark_kafka import consume_all, create_topic, new_topic_name, produce

BASE_TS = 1_700_000_000_000


def read(spark, bootstrap: str, topic: str, **options):
    reader = (spark.read.format("logbroker").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic))
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def as_records(rows) -> list[dict]:
    out = []
    for row in rows:
        d = row.asDict(recursive=True)
        d["key"] = None if d["key"] is None else bytes(d["key"])
        d["value"] = None if d["value"] is None else bytes(d["value"])
        d["timestamp_ms"] = round(d.pop("timestamp").timestamp() * 1000)
        if "headers" in d:
            d["headers"] = None if d["headers"] is None else [
                (h["key"], None if h["value"] is None else bytes(h["value"])) for h in d["headers"]]
        out.append(d)
    return sorted(out, key=lambda r: (r["partition"], r["offset"]))


@pytest.fixture(scope="module")
def three_partitions(shared_broker):
    """A 3-partition topic with keys (some null), values (some null), headers and timestamps."""
    bootstrap = shared_broker.bootstrap
    topic = new_topic_name()
    # The timestamps are from 2023: under the default 7-day retention the session broker's next
    # retention check (every 5 minutes) would delete them while the module reads.
    create_topic(bootstrap, topic, 3, config={"retention.ms": "-1"})
    rng = random.Random(5)
    records = []
    for i in range(300):
        record = {"value": None if i % 50 == 7 else rng.randbytes(rng.randint(0, 300)),
                  "partition": i % 3, "timestamp": BASE_TS + i * 1000}
        if i % 10:
            record["key"] = f"user-{rng.randint(1, 20)}".encode()
        if i % 4 == 0:
            record["headers"] = [("source", b"test"), ("n", str(i).encode()), ("empty", None)]
        records.append(record)
    produce(bootstrap, topic, records)
    return topic


def test_batch_read_equals_consumer_read(spark, bootstrap, three_partitions):
    expected = consume_all(bootstrap, three_partitions, 3)
    df = read(spark, bootstrap, three_partitions, includeHeaders="true")
    assert df.rdd.getNumPartitions() == 3
    got = as_records(df.collect())
    assert len(got) == len(expected) == 300
    assert got == expected


def test_schema_is_spark_kafka_schema(spark, bootstrap, three_partitions):
    df = read(spark, bootstrap, three_partitions)
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int>")
    with_headers = read(spark, bootstrap, three_partitions, includeHeaders="true")
    assert with_headers.schema.simpleString().endswith(
        ",headers:array<struct<key:string,value:binary>>>")


def test_starting_and_ending_offsets_json_are_honoured(spark, bootstrap, three_partitions):
    expected = consume_all(bootstrap, three_partitions, 3)
    starting = {three_partitions: {"0": 10, "1": -2, "2": 95}}
    ending = {three_partitions: {"0": 20, "1": 5, "2": -1}}
    df = read(spark, bootstrap, three_partitions, startingOffsets=json.dumps(starting),
              endingOffsets=json.dumps(ending))
    got = [(r["partition"], r["offset"]) for r in as_records(df.collect())]
    want = [(r["partition"], r["offset"]) for r in expected
            if (r["partition"] == 0 and 10 <= r["offset"] < 20)
            or (r["partition"] == 1 and r["offset"] < 5)
            or (r["partition"] == 2 and r["offset"] >= 95)]
    assert got == want


def test_assign_reads_only_the_assigned_partitions(spark, bootstrap, three_partitions):
    df = (spark.read.format("logbroker").option("kafka.bootstrap.servers", bootstrap)
          .option("assign", json.dumps({three_partitions: [1]})).load())
    assert {r["partition"] for r in df.select("partition").distinct().collect()} == {1}
    assert df.count() == 100


def test_subscribe_pattern_matches_topics(spark, bootstrap, three_partitions):
    df = (spark.read.format("logbroker").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribePattern", three_partitions[:-3] + ".*").load())
    assert df.count() == 300


def test_starting_timestamp_starts_at_the_first_record_at_or_after_it(spark, bootstrap,
                                                                     three_partitions):
    # Record i has timestamp BASE_TS + i s and sits in partition i % 3 at offset i // 3.
    df = read(spark, bootstrap, three_partitions, startingTimestamp=str(BASE_TS + 150_000))
    offsets = sorted((r["partition"], r["offset"]) for r in df.collect())
    assert offsets == sorted((i % 3, i // 3) for i in range(150, 300))


def test_min_partitions_splits_ranges_without_losing_records(spark, bootstrap, three_partitions):
    df = read(spark, bootstrap, three_partitions, minPartitions="7")
    assert df.rdd.getNumPartitions() >= 7
    rows = df.select("partition", "offset").collect()
    assert sorted((r["partition"], r["offset"]) for r in rows) == \
        sorted((i % 3, i // 3) for i in range(300))


def test_ending_before_starting_is_an_error(spark, bootstrap, three_partitions):
    df = read(spark, bootstrap, three_partitions,
              startingOffsets=json.dumps({three_partitions: {"0": 5, "1": 0, "2": 0}}),
              endingOffsets=json.dumps({three_partitions: {"0": 1, "1": 1, "2": 1}}))
    with pytest.raises(Exception, match="ending offset 1 is before the starting offset 5"):
        df.collect()


def test_missing_bootstrap_servers_is_an_option_error(spark):
    with pytest.raises(Exception, match="kafka.bootstrap.servers"):
        spark.read.format("logbroker").option("subscribe", "x").load().collect()


def test_ending_timestamp_ends_before_the_first_record_at_or_after_it(spark, bootstrap,
                                                                      three_partitions):
    df = read(spark, bootstrap, three_partitions, endingTimestamp=str(BASE_TS + 150_000))
    offsets = sorted((r["partition"], r["offset"]) for r in df.collect())
    assert offsets == sorted((i % 3, i // 3) for i in range(150))


def test_starting_below_the_log_start_is_data_loss_unless_allowed(spark, bootstrap):
    from spark_kafka import delete_records_before

    topic = new_topic_name()
    create_topic(bootstrap, topic, 1)
    produce(bootstrap, topic, [{"value": str(i).encode()} for i in range(20)])
    delete_records_before(bootstrap, topic, 0, 8)
    starting = json.dumps({topic: {"0": 2}})
    with pytest.raises(Exception, match="failOnDataLoss"):
        read(spark, bootstrap, topic, startingOffsets=starting).collect()
    rows = read(spark, bootstrap, topic, startingOffsets=starting, failOnDataLoss="false").collect()
    assert [r["offset"] for r in rows] == list(range(8, 20))
