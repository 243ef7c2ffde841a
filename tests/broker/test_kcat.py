"""kcat (librdkafka 2.0.2 built in): produce and consume with keys and headers, list metadata,
and query offsets by time — the operator's first tool against any Kafka broker."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from logbroker.records.builder import build_batch

from clients import (
    RawClient,
    consume_confluent,
    create_topic,
    now_ms,
    stored_batches,
)

pytestmark = [pytest.mark.timeout(60),
              pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")]


def kcat(bootstrap: str, *args: str, stdin: bytes | None = None) -> str:
    done = subprocess.run(["kcat", "-b", bootstrap, *args], input=stdin, capture_output=True, timeout=30)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode()


# kcat 1.7.1 carries librdkafka 2.0.2, which compresses gzip, snappy and lz4 only if the broker
# accepts Produce v0 (its compr_req table asks rd_kafka_broker_ApiVersion_supported(Produce, 0, 0)),
# and we start at v3 (magic 2 only, as Kafka 4.0 does after KIP-896): it sends those batches
# uncompressed and logs "Broker does not support compression type". zstd needs Produce v7, which
# we have. Later librdkafka (confluent-kafka 2.16 here) compresses gzip and snappy normally.
KCAT_COMPRESSES = {"none", "zstd"}


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "zstd"])
def test_kcat_round_trip_with_keys_and_headers(shared_broker, topic, codec):
    create_topic(shared_broker.bootstrap, topic, partitions=2)
    lines = [(b"k%d" % i, b"value %d" % i) for i in range(50)]
    stdin = b"".join(k + b"\t" + v + b"\n" for k, v in lines)

    kcat(shared_broker.bootstrap, "-P", "-t", topic, "-p", "1", "-K", "\t", "-z", codec,
         "-H", "origin=kcat", "-H", "dup=1", "-H", "dup=2", "-H", "empty", stdin=stdin)

    out = kcat(shared_broker.bootstrap, "-C", "-t", topic, "-p", "1", "-o", "beginning", "-e", "-J")
    messages = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert [(m["partition"], m["offset"], m["key"], m["payload"]) for m in messages] == [
        (1, i, k.decode(), v.decode()) for i, (k, v) in enumerate(lines)]
    assert all(m["headers"] == ["origin", "kcat", "dup", "1", "dup", "2", "empty", None] for m in messages)
    if codec in KCAT_COMPRESSES:
        assert {b.compression_name for b in stored_batches(shared_broker.data_dir, topic, 1)} == {codec}
    # Another client reads the same headers, null value included.
    got = consume_confluent(shared_broker.bootstrap, topic, {1: 0}, 50)
    assert [(r.key, r.value) for r in got] == lines
    assert got[0].headers == (("origin", b"kcat"), ("dup", b"1"), ("dup", b"2"), ("empty", None))


def test_kcat_lists_metadata(shared_broker, topic):
    create_topic(shared_broker.bootstrap, topic, partitions=3)

    listing = json.loads(kcat(shared_broker.bootstrap, "-L", "-J", "-t", topic))

    assert listing["brokers"] == [{"id": 0, "name": shared_broker.bootstrap}]
    assert listing["controllerid"] == 0
    [described] = listing["topics"]
    assert described["topic"] == topic
    assert described.get("error") is None
    assert [(p["partition"], p["leader"], p["replicas"], p["isrs"]) for p in described["partitions"]] == [
        (p, 0, [{"id": 0}], [{"id": 0}]) for p in range(3)]


def test_kcat_queries_offsets_by_time(shared_broker, topic):
    create_topic(shared_broker.bootstrap, topic)
    base = now_ms() - 100_000
    with RawClient(shared_broker.bootstrap) as client:
        for k in range(3):  # offsets 3k..3k+2 at base + 1000k + 10j
            batch = build_batch([(None, b"v", (), base + 1000 * k + 10 * j) for j in range(3)])
            assert int(client.produce(topic, 0, batch).error_code) == 0

    def offset_at(timestamp: int) -> int:
        out = kcat(shared_broker.bootstrap, "-Q", "-t", f"{topic}:0:{timestamp}")
        prefix = f"{topic} [0] offset "
        [line] = [line for line in out.splitlines() if line.startswith(prefix)]
        return int(line.removeprefix(prefix))

    assert offset_at(base - 5) == 0
    assert offset_at(base + 1000) == 3
    assert offset_at(base + 1015) == 5
    assert offset_at(base + 1500) == 6
    assert offset_at(base + 2020) == 8
    assert offset_at(base + 2021) == -1
    assert offset_at(-1) == 9  # end
    assert offset_at(-2) == 0  # beginning
