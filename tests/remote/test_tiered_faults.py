"""Tiered storage when things go wrong: kill -9 during remote expiry and during a remote replay, a
truncated or missing remote object, a garbage .metadata, refused credentials and an unreachable
endpoint. Real brokers, moto's S3 server, real clients."""

from __future__ import annotations

import json
import socket
import urllib.request
import uuid
from contextlib import contextmanager

import boto3
import pytest
from confluent_kafka import OFFSET_BEGINNING, OFFSET_STORED, Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

from logbroker.testing import BrokerProcess

from clients import (
    TIMEOUT_S,
    RawClient,
    Spec,
    admin,
    consume_confluent,
    create_topic,
    produce_confluent,
    records_in,
)
from tiered_helpers import (
    PRODUCER,
    TIERED,
    earliest_offset,
    local_segments,
    remote_metadata,
    scrape,
    specs,
    start_broker,
    wait_until,
)

METRICS = "kafka_server_brokertopicmetrics_"
UNKNOWN_SERVER_ERROR = -1
OFFSET_NOT_AVAILABLE = 78
# Many small segments: an expiry deletes dozens of them, so a kill lands in the middle.
SMALL_SEGMENTS = {**TIERED, "segment.bytes": "4096", "local.retention.bytes": "8192"}


def all_copied(broker: BrokerProcess, bucket, topic: str, partition: int = 0) -> bool:
    """Every closed segment is in the bucket (the next offset to copy is the active segment's base)."""
    segments = remote_metadata(bucket, topic, partition)
    return bool(segments) and segments[-1]["end_offset"] + 1 == local_segments(broker, topic, partition)[-1]


def partition_prefix(bucket, topic: str, partition: int = 0) -> str:
    [directory] = {k.split("/")[1] for k in bucket.keys("cluster-a/") if k.split("/")[1].startswith(f"{topic}-{partition}-")}
    return f"cluster-a/{directory}/"


def objects(bucket, prefix: str) -> dict[str, tuple[int, str]]:
    """Key → (size, ETag) of every object below `prefix`."""
    found, token = {}, None
    while True:
        page = bucket.client.list_objects_v2(Bucket=bucket.name, Prefix=prefix,
                                              **({"ContinuationToken": token} if token else {}))
        found.update({o["Key"]: (o["Size"], o["ETag"]) for o in page.get("Contents", [])})
        token = page.get("NextContinuationToken")
        if not token:
            return found


def stray_objects(bucket, prefix: str) -> list[str]:
    """Objects that belong to no COPY_SEGMENT_FINISHED metadata (what a next run must delete)."""
    keys = bucket.keys(prefix)
    finished = set()
    for key in keys:
        if key.endswith(".metadata"):
            try:
                meta = json.loads(bucket.get(key))
            except bucket.client.exceptions.NoSuchKey:
                return [key]  # deleted while we looked: not done yet
            if meta["state"] == "COPY_SEGMENT_FINISHED":
                finished.add(meta["segment_id"])
    return [k for k in keys if not k.endswith("log-start-offset") and k.rsplit("/", 1)[1][21:43] not in finished]


def alter_topic(bootstrap: str, topic: str, **configs: str) -> None:
    resource = ConfigResource("TOPIC", topic, incremental_configs=[
        ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()])
    admin(bootstrap).incremental_alter_configs([resource])[resource].result(TIMEOUT_S)


@pytest.mark.parametrize("trigger", ["delete_records", "retention_bytes", "retention_ms"])
def test_kill_during_remote_expiry_loses_nothing_inside_retention_and_the_next_run_finishes_it(
        tmp_path, bucket, trigger):
    broker = start_broker(tmp_path, bucket)
    topic = f"expiry-{trigger.replace('_', '-')}"
    count = 1000
    # The first half two hours old, the rest one hour: retention.ms of 90 minutes expires the first.
    written = [Spec(0, s.key, s.value, timestamp=s.timestamp - (7_200_000 if i < count // 2 else 0))
               for i, s in enumerate(specs(count))]
    try:
        create_topic(broker.bootstrap, topic, config=SMALL_SEGMENTS)
        produce_confluent(broker.bootstrap, topic, written, **PRODUCER, acks="all")
        wait_until(lambda: all_copied(broker, bucket, topic), "every closed segment copied")
        segments = remote_metadata(bucket, topic)
        assert len(segments) >= 20
        prefix = partition_prefix(bucket, topic)
        half = len(segments) // 2
        if trigger == "delete_records":
            kept_from = segments[half]["start_offset"] + 3  # inside a segment: that one stays
            [deleted] = admin(broker.bootstrap).delete_records([CkTopicPartition(topic, 0, kept_from)]).values()
            assert deleted.result(TIMEOUT_S).low_watermark == kept_from
        elif trigger == "retention_bytes":
            # retention.bytes counts remote and local bytes: exactly the older half exceeds it.
            active = (broker.data_dir / f"{topic}-0" / f"{local_segments(broker, topic)[-1]:020d}.log").stat().st_size
            kept_from = segments[half]["start_offset"]
            alter_topic(broker.bootstrap, topic, retention_bytes=str(
                sum(m["segment_size_in_bytes"] for m in segments[half:]) + active))
        else:
            half = next(i for i, m in enumerate(segments) if m["end_offset"] >= count // 2)
            kept_from = segments[half]["start_offset"]
            alter_topic(broker.bootstrap, topic, retention_ms=str(5_400_000))
        wait_until(lambda: len([k for k in bucket.keys(prefix) if k.endswith(".metadata")]) < len(segments),
                   "remote expiry under way", timeout_s=30)
        broker.kill()

        # What a kill mid-deletion leaves, made certain: a segment marked DELETE_SEGMENT_STARTED
        # with some of its files gone.
        metas = {k: json.loads(bucket.get(k)) for k in bucket.keys(prefix) if k.endswith(".metadata")}
        doomed = [(k, m) for k, m in metas.items() if m["end_offset"] < kept_from]
        assert len(doomed) < half  # the kill came after the first deletions
        if doomed and not any(m["state"] == "DELETE_SEGMENT_STARTED" for _, m in doomed):
            key, meta = min(doomed, key=lambda km: km[1]["start_offset"])
            bucket.client.put_object(Bucket=bucket.name, Key=key,
                                     Body=json.dumps({**meta, "state": "DELETE_SEGMENT_STARTED"}).encode())
            bucket.client.delete_object(Bucket=bucket.name, Key=key.replace(".metadata", ".log"))

        broker.start()
        wait_until(lambda: earliest_offset(broker, topic) == kept_from, "ListOffsets -2 at the retention boundary")
        wait_until(lambda: not stray_objects(bucket, prefix), "no orphaned or half-deleted object left")
        remaining = remote_metadata(bucket, topic)
        assert remaining[0]["start_offset"] <= kept_from <= remaining[0]["end_offset"]
        assert [m["segment_id"] for m in remaining] == [m["segment_id"] for m in segments
                                                          if m["end_offset"] >= kept_from]
        records = consume_confluent(broker.bootstrap, topic, {0: OFFSET_BEGINNING}, count - kept_from,
                                    **{"auto.offset.reset": "earliest"})
        assert [r.offset for r in records] == list(range(kept_from, count))  # no gap, no duplicate
        assert [(r.value, r.timestamp) for r in records] == [(s.value, s.timestamp) for s in written][kept_from:]
    finally:
        broker.stop()


def test_kill_during_a_remote_replay_resumes_from_the_committed_offset_exactly_once(tmp_path, bucket):
    broker = start_broker(tmp_path, bucket)
    topic = "replay"
    count = 2000
    try:
        create_topic(broker.bootstrap, topic, config=TIERED)
        produce_confluent(broker.bootstrap, topic, specs(count), **PRODUCER, acks="all")
        wait_until(lambda: all_copied(broker, bucket, topic) and local_segments(broker, topic)[0] > 1500,
                   "the history in the bucket, the local log only its tail")
        prefix = partition_prefix(bucket, topic)
        before = objects(bucket, prefix)

        def consumer() -> Consumer:  # small fetches: a replay of many remote reads
            return Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "replay",
                             "enable.auto.commit": False, "auto.offset.reset": "error",
                             "fetch.wait.max.ms": 100, "max.partition.fetch.bytes": 2048,
                             "queued.min.messages": 20})

        first = consumer()
        first.assign([CkTopicPartition(topic, 0, 0)])
        read = []
        while len(read) < 400:
            batch = first.consume(50, timeout=0.2)
            assert all(m.error() is None for m in batch), [m.error() for m in batch]
            if batch:
                read += batch
                first.commit(offsets=[CkTopicPartition(topic, 0, read[-1].offset() + 1)], asynchronous=False)
        broker.kill()  # the consumer is fetching ahead: remote reads under way
        first.close()
        committed = read[-1].offset() + 1

        broker.start()
        resumed = consumer()
        resumed.assign([CkTopicPartition(topic, 0, OFFSET_STORED)])
        try:
            while len(read) < count:
                batch = resumed.consume(200, timeout=0.2)
                assert all(m.error() is None for m in batch), [m.error() for m in batch]
                read += batch
        finally:
            resumed.close()
        assert [m.offset() for m in read] == list(range(count))  # the rest exactly once, in order
        assert [m.value() for m in read] == [s.value for s in specs(count)]
        assert read[committed].offset() == committed
        wait_until(lambda: "Loaded" in broker.new_log_text(), "the store loaded after the restart")
        assert objects(bucket, prefix) == before  # reads change nothing in the bucket
    finally:
        broker.stop()


def fetch_both(broker: BrokerProcess, topic: str, offsets: dict[int, int]) -> dict[int, tuple[int, list[int]]]:
    """A Fetch of both partitions: partition → (error code, offsets of the records). Sent again
    while a partition gets neither (its remote read outlived remote.fetch.max.wait.ms)."""
    def fetch():
        with RawClient(broker.bootstrap) as client:
            answers = client.fetch_many(topic, offsets, max_bytes=1 << 20, partition_max_bytes=64 << 10)
        found = {p: (int(a.error_code), [r.offset for r in records_in(a.records)]) for p, a in answers.items()}
        return found if (0, []) not in found.values() else None
    return wait_until(fetch, "an answer for both partitions")


def test_a_truncated_or_missing_remote_object_fails_only_its_partition_with_a_clear_error(tmp_path, bucket):
    broker = start_broker(tmp_path, bucket, **{"metrics.port": "0"})
    topic = "faulty"
    try:
        create_topic(broker.bootstrap, topic, partitions=2, config=TIERED)
        for partition in (0, 1):
            produce_confluent(broker.bootstrap, topic, [Spec(partition, s.key, s.value, timestamp=s.timestamp)
                                                        for s in specs(800)], **PRODUCER, acks="all")
        for partition in (0, 1):
            wait_until(lambda p=partition: local_segments(broker, topic, p)[0] > 400, f"partition {partition} tiered")
        segments = remote_metadata(bucket, topic, 0)
        prefix = partition_prefix(bucket, topic, 0)

        def key(meta: dict, suffix: str) -> str:
            return f"{prefix}{meta['start_offset']:020d}-{meta['segment_id']}{suffix}"

        def stored(meta: dict, suffix: str) -> str:  # the key below the store's prefix, as logged
            return key(meta, suffix).removeprefix("cluster-a/")

        cut_log, no_index, short_index, garbage = segments[1], segments[2], segments[3], segments[4]
        whole = bucket.get(key(cut_log, ".log"))
        bucket.client.put_object(Bucket=bucket.name, Key=key(cut_log, ".log"), Body=whole[:len(whole) // 2])
        bucket.client.delete_object(Bucket=bucket.name, Key=key(no_index, ".index"))
        bucket.client.put_object(Bucket=bucket.name, Key=key(short_index, ".index"),
                                 Body=bucket.get(key(short_index, ".index"))[:5])

        for bad in (cut_log, no_index):  # that partition fails, the other one of the fetch is served
            answers = fetch_both(broker, topic, {0: bad["start_offset"] + 1, 1: 0})
            assert answers[0] == (UNKNOWN_SERVER_ERROR, [])
            assert answers[1][0] == 0 and answers[1][1][:3] == [0, 1, 2]
        # A prefix of an offset index is a sparser index: still read right.
        answers = fetch_both(broker, topic, {0: short_index["start_offset"] + 1, 1: 0})
        assert answers[0][0] == 0 and answers[0][1][0] <= short_index["start_offset"] + 1
        assert answers[0][1][-1] >= short_index["start_offset"] + 1

        failed = scrape(broker)[METRICS + "remotefetcherrors_total"]
        text = broker.new_log_text()
        assert failed >= 2 and text.count(f"Remote read of {topic}-0 at offset") == failed  # one line each
        assert f"UNKNOWN_SERVER_ERROR: Remote object {stored(cut_log, '.log')} is shorter than" in text
        assert f"UNKNOWN_SERVER_ERROR: Remote object {stored(no_index, '.index')} not found" in text
        with pytest.raises(KafkaException) as raised:  # what a librdkafka application sees
            consume_confluent(broker.bootstrap, topic, {0: cut_log["start_offset"] + 1}, 1, timeout_s=10)
        assert raised.value.args[0].code() == KafkaError.UNKNOWN
        # Other clients go on: the healthy partition read whole, the broken one produced to and
        # read above its remote range.
        records = consume_confluent(broker.bootstrap, topic, {1: 0}, 800)
        assert [r.offset for r in records] == list(range(800))
        produce_confluent(broker.bootstrap, topic, [Spec(0, b"k", b"after")], acks="all")
        [after] = consume_confluent(broker.bootstrap, topic, {0: 800}, 1)
        assert (after.offset, after.value) == (800, b"after")

        # A garbage .metadata: the partition's store cannot be loaded; its remote reads fail,
        # nothing in the bucket is deleted, and it loads once the object is mended.
        broker.stop()
        metadata = bucket.get(key(garbage, ".metadata"))
        bucket.client.put_object(Bucket=bucket.name, Key=key(garbage, ".metadata"), Body=b"{not json")
        before = objects(bucket, prefix)
        broker.start()
        answers = fetch_both(broker, topic, {0: 0, 1: 0})
        assert answers[0] == (UNKNOWN_SERVER_ERROR, [])
        assert answers[1][0] == 0 and answers[1][1][0] == 0
        wait_until(lambda: "Unreadable remote segment metadata" in broker.new_log_text(), "the task's error")
        assert f"Unreadable remote segment metadata {stored(garbage, '.metadata')}" in broker.new_log_text()
        assert objects(bucket, prefix) == before
        # ListOffsets -2 cannot say where the log starts without the store: a retriable error,
        # never the local log start (a consumer resetting to earliest would skip the history).
        with RawClient(broker.bootstrap) as client:
            assert int(client.list_offset(topic, 0, -2, version=9).error_code) == OFFSET_NOT_AVAILABLE
        assert broker.running
        assert broker.new_log_text().count(f"Remote log manager task failed on {topic}-0") <= 3  # rate-limited
        bucket.client.put_object(Bucket=bucket.name, Key=key(garbage, ".metadata"), Body=metadata)
        wait_until(lambda: fetch_both(broker, topic, {0: 0, 1: 0})[0][0] == 0, "the store loaded once mended")
        assert earliest_offset(broker, topic) == 0
        records = consume_confluent(broker.bootstrap, topic, {0: garbage["start_offset"]}, 801 - garbage["start_offset"])
        assert [r.offset for r in records] == list(range(garbage["start_offset"], 801))
    finally:
        broker.stop()


@contextmanager
def moto_checks_credentials(endpoint: str):
    """moto's server checks signatures and IAM policies meanwhile (it accepts anything otherwise)."""
    def reset_auth(count: str) -> None:
        urllib.request.urlopen(urllib.request.Request(f"{endpoint}/moto-api/reset-auth", data=count.encode(),
                                                      headers={"Content-Type": "text/plain"}, method="POST"),
                               timeout=TIMEOUT_S).read()
    reset_auth("0")
    try:
        yield reset_auth
    finally:
        reset_auth("inf")


def test_refused_credentials_keep_local_data_count_errors_and_copying_resumes_once_allowed(tmp_path, bucket):
    iam = boto3.client("iam", endpoint_url=bucket.endpoint, region_name="us-east-1")
    user = f"broker-{uuid.uuid4().hex[:8]}"
    iam.create_user(UserName=user)
    access_key = iam.create_access_key(UserName=user)["AccessKey"]
    topic = "tiered-creds"
    count = 600
    errors = METRICS + "remotecopyerrors_total"
    with moto_checks_credentials(bucket.endpoint) as reset_auth:
        broker = start_broker(tmp_path, bucket, **{"metrics.port": "0", "rsm.config.s3.access.key.id": "AKIAUNKNOWNKEY000000",
                                                  "rsm.config.s3.secret.access.key": "wrong"})
        try:
            create_topic(broker.bootstrap, topic, config=TIERED)
            produce_confluent(broker.bootstrap, topic, specs(count), **PRODUCER, acks="all")
            wait_until(lambda: scrape(broker).get(errors, 0) >= 2, "copy errors counted")
            assert "the credentials were refused (InvalidAccessKeyId)" in broker.new_log_text()
            assert local_segments(broker, topic)[0] == 0  # nothing deleted locally
            broker.stop()
            # Known credentials without a policy allowing S3: access denied.
            broker.overrides.update({"rsm.config.s3.access.key.id": access_key["AccessKeyId"],
                                     "rsm.config.s3.secret.access.key": access_key["SecretAccessKey"]})
            broker.start()
            wait_until(lambda: scrape(broker).get(errors, 0) >= 2, "copy errors counted")
            assert "access denied (AccessDenied)" in broker.new_log_text()
            assert local_segments(broker, topic)[0] == 0
            records = consume_confluent(broker.bootstrap, topic, {0: 0}, count)
            assert [r.offset for r in records] == list(range(count))

            reset_auth("inf")  # the test's own IAM call goes through unchecked
            iam.put_user_policy(UserName=user, PolicyName="s3", PolicyDocument=json.dumps({
                "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}))
            reset_auth("0")
            wait_until(lambda: local_segments(broker, topic)[0] > 0, "copies once the policy allows them")
            records = consume_confluent(broker.bootstrap, topic, {0: 0}, count)
            assert [r.offset for r in records] == list(range(count))
            assert [r.value for r in records] == [s.value for s in specs(count)]
        finally:
            broker.stop()
    assert remote_metadata(bucket, topic)[0]["start_offset"] == 0


@pytest.mark.parametrize("endpoint", ["refusing", "silent"])
def test_an_unreachable_endpoint_stalls_no_local_partition_and_copying_resumes_once_it_answers(
        tmp_path, bucket, endpoint):
    from moto.server import ThreadedMotoServer

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    if endpoint == "silent":
        listener.listen(16)  # connections are made, and nothing ever answers
    else:
        listener.close()  # nothing listens
    broker = start_broker(tmp_path, bucket, **{"metrics.port": "0",
                                               "rsm.config.s3.endpoint": f"http://127.0.0.1:{port}"})
    server = None
    topic, plain = "tiered-unreachable", "plain"
    count = 600
    try:
        create_topic(broker.bootstrap, topic, config=TIERED)
        create_topic(broker.bootstrap, plain)
        produce_confluent(broker.bootstrap, topic, specs(count), **PRODUCER, acks="all")
        # Produce and fetch go on meanwhile, on a local topic and on the tiered one's local log.
        for round_ in range(3):
            produce_confluent(broker.bootstrap, plain, [Spec(0, b"k", f"plain-{round_}".encode())], acks="all")
            [got] = consume_confluent(broker.bootstrap, plain, {0: round_}, 1)
            assert got.value == f"plain-{round_}".encode()
        records = consume_confluent(broker.bootstrap, topic, {0: 0}, count)
        assert [r.offset for r in records] == list(range(count))
        wait_until(lambda: scrape(broker).get(METRICS + "remotecopyerrors_total", 0) >= 1, "copy errors counted",
                   timeout_s=40)
        why = "connection refused" if endpoint == "refusing" else "timed out"
        assert f"cannot reach the endpoint ({why})" in broker.new_log_text()
        assert local_segments(broker, topic)[0] == 0

        listener.close()
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        server.start()  # the same moto backend: the bucket is there
        wait_until(lambda: local_segments(broker, topic)[0] > 0, "copies once the endpoint answers", timeout_s=40)
        records = consume_confluent(broker.bootstrap, topic, {0: 0}, count)
        assert [r.offset for r in records] == list(range(count))
        assert [r.value for r in records] == [s.value for s in specs(count)]
    finally:
        broker.stop()
        listener.close()
        if server is not None:
            server.stop()
