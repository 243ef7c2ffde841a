"""Option parsing, offset JSON, range splitting and rate limiting: pure functions, no Spark."""

from __future__ import annotations

import json

import pytest

from logbroker.spark.errors import OptionError
from logbroker.spark.fetch import OffsetRange, split_ranges
from logbroker.spark.offsets import from_json_dict, to_json, to_json_dict
from logbroker.spark.options import parse_sink_options, parse_source_options
from logbroker.spark.stream_reader import rate_limit

BOOT = {"kafka.bootstrap.servers": "h:9092"}


def test_offsets_json_has_string_partition_keys_in_numeric_order():
    offsets = {("b", 10): 5, ("b", 2): 7, ("a", 0): 1}
    assert to_json(offsets) == '{"a":{"0":1},"b":{"2":7,"10":5}}'
    assert from_json_dict(json.loads(to_json(offsets))) == offsets
    assert from_json_dict({"a": {0: 1}}) == {("a", 0): 1}
    assert list(to_json_dict(offsets)["b"]) == ["2", "10"]


def test_kafka_options_pass_through_without_prefix():
    opts = parse_source_options({**BOOT, "subscribe": "a, b", "kafka.fetch.max.bytes": "1000",
                                 "kafka.key.deserializer": "x"}, streaming=False)
    assert opts.bootstrap_servers == "h:9092"
    assert opts.kafka_config == {"fetch.max.bytes": "1000"}
    assert opts.subscription.topics == ("a", "b")


def test_option_names_are_case_insensitive():
    opts = parse_source_options({**BOOT, "SUBSCRIBE": "a", "maxoffsetspertrigger": "5",
                                 "INCLUDEHEADERS": "true"}, streaming=True)
    assert opts.max_offsets_per_trigger == 5 and opts.include_headers


@pytest.mark.parametrize("options, message", [
    ({"subscribe": "a"}, "kafka.bootstrap.servers"),
    ({**BOOT}, "exactly one"),
    ({**BOOT, "subscribe": "a", "assign": '{"a":[0]}'}, "exactly one"),
    ({**BOOT, "assign": "[0]"}, "assign"),
    ({**BOOT, "subscribe": "a", "endingOffsets": "earliest"}, "endingOffsets"),
    ({**BOOT, "subscribe": "a", "endingOffsets": '{"a":{"0":-2}}'}, "-2"),
    ({**BOOT, "subscribe": "a", "startingOffsets": "latest"}, "batch"),
    ({**BOOT, "subscribe": "a", "startingOffsets": "{bad"}, "startingOffsets"),
    ({**BOOT, "subscribe": "a", "minPartitions": "0"}, "minPartitions"),
    ({**BOOT, "subscribe": "a", "failOnDataLoss": "maybe"}, "failOnDataLoss"),
    ({**BOOT, "subscribe": "a", "kafka.enable.auto.commit": "true"}, "not supported"),
])
def test_bad_batch_options_are_refused_naming_the_option(options, message):
    with pytest.raises(OptionError, match=message):
        parse_source_options(options, streaming=False)


def test_streaming_defaults_to_latest_and_batch_to_earliest():
    assert parse_source_options({**BOOT, "subscribe": "a"}, streaming=True).starting.kind == "latest"
    assert parse_source_options({**BOOT, "subscribe": "a"}, streaming=False).starting.kind == \
        "earliest"


def test_starting_offsets_by_timestamp():
    opts = parse_source_options({**BOOT, "subscribe": "a",
                                 "startingOffsetsByTimestamp": '{"a":{"0":1000}}'},
                                streaming=True)
    assert opts.starting.kind == "timestamp" and opts.starting.timestamps == {"a": {0: 1000}}


def test_sink_options():
    assert parse_sink_options({**BOOT, "topic": "out"}).topic == "out"
    assert parse_sink_options(BOOT).topic is None


def test_split_ranges_by_min_partitions_is_proportional_and_complete():
    ranges = [OffsetRange(topic="t", partition=0, from_offset=0, until_offset=900),
              OffsetRange(topic="t", partition=1, from_offset=50, until_offset=150),
              OffsetRange(topic="t", partition=2, from_offset=7, until_offset=7)]
    pieces = split_ranges(ranges, min_partitions=10, max_records_per_partition=None)
    assert len(pieces) >= 10
    assert sum(1 for p in pieces if p.partition == 0) == 9
    for partition, lo, hi in ((0, 0, 900), (1, 50, 150)):
        mine = [p for p in pieces if p.partition == partition]
        assert mine[0].from_offset == lo and mine[-1].until_offset == hi
        assert all(a.until_offset == b.from_offset for a, b in zip(mine, mine[1:]))


def test_split_ranges_by_max_records_per_partition():
    pieces = split_ranges([OffsetRange(topic="t", partition=0, from_offset=0, until_offset=25)],
                          min_partitions=None, max_records_per_partition=10)
    assert [p.size for p in pieces] == [8, 8, 9]


def test_rate_limit_shares_the_limit_by_backlog_and_never_exceeds_it():
    start = {("t", 0): 0, ("t", 1): 100, ("t", 2): 5}
    latest = {("t", 0): 1000, ("t", 1): 200, ("t", 2): 5}
    end = rate_limit(start, latest, 110)
    assert sum(end[tp] - start[tp] for tp in start) == 110
    assert end[("t", 0)] == 100 and end[("t", 1)] == 110 and end[("t", 2)] == 5
    assert rate_limit(start, latest, 10_000) == latest
    odd = rate_limit({("t", 0): 0, ("t", 1): 0, ("t", 2): 0},
                     {("t", 0): 1, ("t", 1): 1, ("t", 2): 1}, 2)
    assert sum(odd.values()) == 2


def test_min_offsets_per_trigger_waits_until_enough_or_max_trigger_delay():
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

    from logbroker.spark.stream_reader import LogbrokerStreamReader

    base = {**BOOT, "subscribe": "t", "minOffsetsPerTrigger": "100"}
    reader = LogbrokerStreamReader(parse_source_options(base, streaming=True))
    low, few, many = {("t", 0): 0}, {("t", 0): 50}, {("t", 0): 150}
    assert reader._waits_for_more(low, few, ReadAllAvailable())
    assert not reader._waits_for_more(low, many, ReadAllAvailable())
    reader._available_now_target = few
    assert not reader._waits_for_more(low, few, ReadAllAvailable())

    expired = LogbrokerStreamReader(parse_source_options(
        {**base, "maxTriggerDelay": "0s", "maxOffsetsPerTrigger": "10"}, streaming=True))
    assert not expired._waits_for_more(low, few, ReadMaxRows(10))
    assert parse_source_options({**base, "maxTriggerDelay": "2m"},
                                streaming=True).max_trigger_delay_ms == 120_000


def test_exactly_once_option_and_the_producer_keys_the_sink_owns():
    base = {"kafka.bootstrap.servers": "h:1", "topic": "t"}
    assert parse_sink_options(base).exactly_once is None  # decided by probing the brokers
    assert parse_sink_options({**base, "exactlyOnce": "false"}).exactly_once is False
    assert parse_sink_options({**base, "EXACTLYONCE": "true"}).exactly_once is True
    assert parse_sink_options({**base, "transactionalIdPrefix": "etl"}) \
        .transactional_id_prefix == "etl"
    for key in ("kafka.transactional.id", "kafka.enable.idempotence"):
        with pytest.raises(OptionError, match=key):
            parse_sink_options({**base, key: "x"})
    with pytest.raises(OptionError, match="exactlyOnce"):
        parse_sink_options({**base, "exactlyOnce": "maybe"})


def test_transaction_support_is_probed_with_api_versions(bootstrap):
    import socket

    from logbroker.spark.exactly_once import _api_keys, brokers_support_transactions

    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        keys = _api_keys(sock)
    assert {0, 1, 18, 22, 24, 25, 26, 28} <= keys  # Produce, Fetch, ApiVersions, the txn APIs
    assert brokers_support_transactions(parse_sink_options({"kafka.bootstrap.servers": bootstrap}))
    # Nobody listening: assume support (the query then fails loudly instead of downgrading).
    assert brokers_support_transactions(parse_sink_options({"kafka.bootstrap.servers": "127.0.0.1:1"}))
