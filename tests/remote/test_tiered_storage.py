"""Tiered storage end to end: a real broker copies closed segments to moto's S3 server, deletes
them locally after the copy, and serves consumers from offset 0 out of the bucket."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka import TopicPartition as CkTopicPartition

from logbroker.testing import TEST_OVERRIDES, BrokerProcess

from clients import TIMEOUT_S, RawClient, Spec, admin, consume_confluent, create_topic, produce_confluent
from tiered_helpers import (
    BASE_TIMESTAMP,
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

def test_closed_segments_go_to_the_bucket_and_a_consumer_reads_all_from_offset_zero(tmp_path, bucket):
    broker = start_broker(tmp_path, bucket, **{"metrics.port": "0"})
    try:
        topic = "tiered"
        create_topic(broker.bootstrap, topic, config=TIERED)
        produce_confluent(broker.bootstrap, topic, specs(2000), **PRODUCER)
        # The local log keeps only its tail once the copies are recorded.
        wait_until(lambda: local_segments(broker, topic)[0] > 1600, "local segments deleted after upload")
        local = local_segments(broker, topic)
        segments = remote_metadata(bucket, topic)
        assert len(segments) >= 10
        assert segments[0]["start_offset"] == 0
        for before, after in zip(segments, segments[1:]):
            assert after["start_offset"] == before["end_offset"] + 1  # contiguous, no overlap
        assert local[0] <= segments[-1]["end_offset"] + 1
        directory = f"cluster-a/{topic}-0-"
        for meta in segments:
            stem = f"{meta['start_offset']:020d}-{meta['segment_id']}"
            names = {k.rsplit("/", 1)[1] for k in bucket.keys(directory) if stem in k}
            assert names >= {stem + s for s in (".log", ".index", ".timeindex", ".leader_epoch_checkpoint",
                                                ".metadata")}
            assert meta["state"] == "COPY_SEGMENT_FINISHED"
        log_key = next(k for k in bucket.keys(directory)
                       if k.endswith(f"{segments[1]['start_offset']:020d}-{segments[1]['segment_id']}.log"))
        first = bucket.get(log_key)
        assert int.from_bytes(first[:8], "big") == segments[1]["start_offset"]  # Kafka's .log bytes
        assert len(first) == segments[1]["segment_size_in_bytes"]

        records = consume_confluent(broker.bootstrap, topic, {0: 0}, 2000)
        assert [r.offset for r in records] == list(range(2000))
        assert [r.value for r in records] == [s.value for s in specs(2000)]

        # `logbroker dump-log` reads a segment straight from the bucket.
        dumped = subprocess.run(
            [sys.executable, "-m", "logbroker.cli", "dump-log", f"s3://{bucket.name}/{log_key}",
             "--s3-endpoint", bucket.endpoint, "--deep-iteration"],
            capture_output=True, text=True, timeout=60, check=True).stdout
        first_offset, last_offset = segments[1]["start_offset"], segments[1]["end_offset"]
        assert f"Log starting offset: {first_offset}" in dumped
        offsets = [int(m) for m in re.findall(r"^\| offset: (\d+)", dumped, re.M)]
        assert offsets == list(range(first_offset, last_offset + 1))

        with RawClient(broker.bootstrap) as client:
            earliest = client.list_offset(topic, 0, -2, version=9)
            earliest_local = client.list_offset(topic, 0, -4, version=9)
            latest_tiered = client.list_offset(topic, 0, -5, version=9)
            fetched = client.fetch(topic, 0, 5)
        assert (int(earliest.error_code), earliest.offset) == (0, 0)
        assert (int(earliest_local.error_code), earliest_local.offset) == (0, local_segments(broker, topic)[0])
        assert int(latest_tiered.error_code) == 0
        assert latest_tiered.offset == remote_metadata(bucket, topic)[-1]["end_offset"]
        assert latest_tiered.offset >= earliest_local.offset - 1
        assert fetched.log_start_offset == 0
        with RawClient(broker.bootstrap) as client:  # by timestamp: in remote segments, then locally
            for offset in (0, 5, 1234, earliest_local.offset + 7, 1999):
                found = client.list_offset(topic, 0, BASE_TIMESTAMP + 10 * offset - 3, version=9)
                assert (int(found.error_code), found.offset, found.timestamp) == \
                    (0, offset, BASE_TIMESTAMP + 10 * offset)

        prefix = "kafka_server_brokertopicmetrics_"
        lag = prefix + f'remotecopylagsegments{{topic="{topic}"}}'
        metrics = wait_until(lambda: (m := scrape(broker)).get(lag) == 0 and m, "every closed segment copied")
        segments = remote_metadata(bucket, topic)
        assert metrics[prefix + "remotecopybytes_total"] == sum(m["segment_size_in_bytes"] for m in segments)
        assert metrics[prefix + "remotecopyrequests_total"] == len(segments)
        assert metrics[prefix + "remotecopyerrors_total"] == 0
        below = sum(m["segment_size_in_bytes"] for m in segments if m["end_offset"] < 1600)
        assert metrics[prefix + "remotefetchbytes_total"] >= below  # what the consumer read remotely
        assert metrics[prefix + "remotefetchrequests_total"] >= 1
        assert metrics[prefix + f'remotelogsizebytes{{topic="{topic}"}}'] == \
            sum(m["segment_size_in_bytes"] for m in segments)
        assert metrics[prefix + f'remotelogmetadatacount{{topic="{topic}"}}'] == len(segments)
    finally:
        broker.stop()


def test_read_committed_hides_aborted_transactions_that_live_in_the_bucket(tmp_path, bucket):
    broker = start_broker(tmp_path, bucket)
    try:
        topic = "tiered-txn"
        create_topic(broker.bootstrap, topic, config=TIERED)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "tiered-txn",
                             **PRODUCER})
        producer.init_transactions(TIMEOUT_S)
        committed = []
        for round_ in range(24):
            producer.begin_transaction()
            values = [f"r{round_:02d}-{i:03d}-".encode() * 10 for i in range(40)]
            for value in values:
                producer.produce(topic, value=value, partition=0)
            producer.flush(TIMEOUT_S)  # written before the marker, not purged by the abort
            if round_ % 3 == 1:
                producer.abort_transaction(TIMEOUT_S)
            else:
                producer.commit_transaction(TIMEOUT_S)
                committed += values
        wait_until(lambda: local_segments(broker, topic)[0] > 500, "local segments deleted after upload")
        assert any(k.endswith(".txnindex") for k in bucket.keys(f"cluster-a/{topic}-0-"))
        assert any(k.endswith(".snapshot") for k in bucket.keys(f"cluster-a/{topic}-0-"))

        read = consume_confluent(broker.bootstrap, topic, {0: 0}, len(committed),
                                 **{"isolation.level": "read_committed"})
        assert [r.value for r in read] == committed
        offsets = [r.offset for r in read]
        assert offsets == sorted(offsets) and offsets[0] == 0
        uncommitted = consume_confluent(broker.bootstrap, topic, {0: 0}, 24 * 40,
                                        **{"isolation.level": "read_uncommitted"})
        assert len(uncommitted) == 24 * 40  # the aborted records are there, hidden only above
    finally:
        broker.stop()


def test_kill_during_uploads_loses_nothing_and_orphaned_objects_are_deleted(tmp_path, bucket):
    broker = start_broker(tmp_path, bucket)
    topic = "tiered-kill"
    try:
        create_topic(broker.bootstrap, topic, config=TIERED)
        produce_confluent(broker.bootstrap, topic, specs(1500), **PRODUCER, acks="all")
        wait_until(lambda: remote_metadata(bucket, topic), "a first upload")
        produce_confluent(broker.bootstrap, topic, specs(1500, 1500), **PRODUCER, acks="all")
        broker.kill()  # SIGKILL with uploads under way
        # What a copy cut short leaves: objects of a segment id without metadata.
        directory = remote_metadata(bucket, topic)[0]
        prefix = f"cluster-a/{topic}-0-{directory['topic_id']}/"
        orphan = f"{prefix}{10**9:020d}-AAAAAAAAAAAAAAAAAAAAAA"
        for suffix in (".log", ".index"):
            bucket.client.put_object(Bucket=bucket.name, Key=orphan + suffix, Body=b"torn")
        broker.start()
        wait_until(lambda: not any(k.startswith(orphan) for k in bucket.keys(prefix)),
                   "the orphaned objects deleted")
        wait_until(lambda: local_segments(broker, topic)[0] > 0, "uploads after the restart")
        segments = remote_metadata(bucket, topic)
        for before, after in zip(segments, segments[1:]):
            assert after["start_offset"] > before["end_offset"]  # no duplicate segments
        ids = {m["segment_id"] for m in segments}
        for key in bucket.keys(prefix):
            if not key.endswith("log-start-offset"):
                assert key.rsplit("/", 1)[1][21:43] in ids  # every object belongs to a segment
        records = consume_confluent(broker.bootstrap, topic, {0: 0}, 3000)
        assert [r.offset for r in records] == list(range(3000))
        assert [r.value for r in records] == [s.value for s in specs(3000)]
    finally:
        broker.stop()


def test_delete_records_and_topic_deletion_remove_remote_segments_in_the_local_store(tmp_path, bucket):
    store = tmp_path / "remote-store"
    broker = BrokerProcess(tmp_path / "broker", overrides={
        **TEST_OVERRIDES, "remote.log.storage.system.enable": "true",
        "remote.log.storage.manager.class.name": "org.apache.kafka.server.log.remote.storage.LocalTieredStorage",
        "rsm.config.dir": str(store), "remote.log.manager.task.interval.ms": "100"}).start()
    try:
        topic = "tiered-local"
        create_topic(broker.bootstrap, topic, config=TIERED)
        produce_confluent(broker.bootstrap, topic, specs(2000), **PRODUCER)
        wait_until(lambda: local_segments(broker, topic)[0] > 0, "local segments deleted after upload")
        [directory] = [d for d in store.iterdir() if d.name.startswith(f"{topic}-0-")]
        first_metas = sorted(json.loads(p.read_bytes())["end_offset"] for p in directory.glob("*.metadata"))
        cut = first_metas[2] + 1  # the first three remote segments lie wholly below
        [deleted] = admin(broker.bootstrap).delete_records([CkTopicPartition(topic, 0, cut)]).values()
        assert deleted.result(TIMEOUT_S).low_watermark == cut
        def remote_ends() -> list[int]:
            ends = []
            for path in directory.glob("*.metadata"):
                try:
                    ends.append(json.loads(path.read_bytes())["end_offset"])
                except FileNotFoundError:
                    pass  # deleted while we looked
            return sorted(ends)
        wait_until(lambda: remote_ends()[0] >= cut, "remote segments below the new log start deleted")
        assert set(first_metas) - set(remote_ends()) == set(first_metas[:3])
        with RawClient(broker.bootstrap) as client:
            assert client.list_offset(topic, 0, -2, version=9).offset == cut
        records = consume_confluent(broker.bootstrap, topic, {0: cut}, 2000 - cut)
        assert [r.offset for r in records] == list(range(cut, 2000))
        with pytest.raises(KafkaException, match="Offset out of range"):
            consume_confluent(broker.bootstrap, topic, {0: 0}, 1, timeout_s=5)
        broker.stop()
        broker.start()  # the log start offset inside the remote range survives a restart
        wait_until(lambda: earliest_offset(broker, topic) == cut, "the log start offset read back from the store")
        records = consume_confluent(broker.bootstrap, topic, {0: cut}, 2000 - cut)
        assert [r.offset for r in records] == list(range(cut, 2000))

        admin(broker.bootstrap).delete_topics([topic])[topic].result(TIMEOUT_S)
        wait_until(lambda: not any(directory.iterdir()) if directory.exists() else True,
                   "the deleted topic's remote data gone")
    finally:
        broker.stop()


def test_tiered_topic_configs_are_checked_as_kafka_checks_them(tmp_path, bucket):
    broker = start_broker(tmp_path, bucket)
    plain = BrokerProcess(tmp_path / "plain", overrides=TEST_OVERRIDES).start()
    try:
        cases = [
            (broker, {"remote.storage.enable": "true", "cleanup.policy": "compact"},
             "Remote log storage only supports topics with cleanup.policy=delete"),
            (broker, {"remote.storage.enable": "true", "retention.bytes": "1000",
                      "local.retention.bytes": "2000"},
             "Value must not be more than retention.bytes property value: 1000"),
            (broker, {"remote.storage.enable": "true", "retention.ms": "1000", "local.retention.ms": "-1"},
             "Value must not be -1 as retention.ms value is set as 1000"),
            (plain, {"remote.storage.enable": "true"}, "Tiered Storage functionality is disabled in the broker"),
        ]
        for i, (target, config, message) in enumerate(cases):
            with pytest.raises(KafkaException) as raised:
                create_topic(target.bootstrap, f"refused-{i}", config=config)
            assert raised.value.args[0].name() == "INVALID_CONFIG"
            assert message in raised.value.args[0].str()
        create_topic(broker.bootstrap, "accepted", config={"remote.storage.enable": "true",
                                                           "retention.ms": "100000",
                                                           "local.retention.ms": "1000"})
    finally:
        plain.stop()
        broker.stop()


def test_a_missing_bucket_keeps_local_data_counts_errors_and_copying_resumes_once_it_exists(tmp_path, bucket):
    name = f"{bucket.name}-late"
    overrides = {**bucket.broker_overrides(), "rsm.config.s3.bucket": name, "metrics.port": "0"}
    broker = BrokerProcess(tmp_path / "broker", overrides={
        **TEST_OVERRIDES, **overrides, "remote.log.manager.task.interval.ms": "100"}).start()
    try:
        topic = "tiered-late"
        create_topic(broker.bootstrap, topic, config=TIERED)
        produce_confluent(broker.bootstrap, topic, specs(1000), **PRODUCER)
        errors = "kafka_server_brokertopicmetrics_remotecopyerrors_total"
        wait_until(lambda: scrape(broker).get(errors, 0) >= 3, "copy errors counted")
        assert local_segments(broker, topic)[0] == 0  # nothing deleted locally
        assert "the bucket does not exist" in broker.new_log_text()
        records = consume_confluent(broker.bootstrap, topic, {0: 0}, 1000)
        assert [r.offset for r in records] == list(range(1000))

        bucket.client.create_bucket(Bucket=name)
        wait_until(lambda: local_segments(broker, topic)[0] > 0, "copies once the bucket exists")
        records = consume_confluent(broker.bootstrap, topic, {0: 0}, 1000)
        assert [r.offset for r in records] == list(range(1000))
    finally:
        broker.stop()


def test_a_topic_lost_with_its_broker_is_restored_from_the_bucket_and_goes_on(tmp_path, bucket):
    broker = start_broker(tmp_path, bucket)
    topic = "tiered-lost"
    try:
        create_topic(broker.bootstrap, topic, partitions=2, config=TIERED)
        for partition in (0, 1):
            produce_confluent(broker.bootstrap, topic, [Spec(partition, s.key, s.value, timestamp=s.timestamp)
                                                        for s in specs(800)], **PRODUCER)
        for partition in (0, 1):
            wait_until(lambda p=partition: sorted(int(f.stem) for f in (broker.data_dir / f"{topic}-{p}").glob("*.log"))[0] > 0,
                       f"partition {partition} copied")
    finally:
        broker.stop()
    copied = {p: max(json.loads(bucket.get(k))["end_offset"] for k in bucket.keys()
                     if k.endswith(".metadata") and k.split("/")[1].startswith(f"{topic}-{p}-"))
              for p in (0, 1)}
    shutil.rmtree(broker.base_dir)  # the broker, its disk and its topic metadata are gone

    fresh = start_broker(tmp_path / "fresh", bucket)
    try:
        restored = subprocess.run(
            [sys.executable, "-m", "logbroker.cli", "restore-topic", "--bootstrap-server", fresh.bootstrap,
             "--topic", topic, *[f"--store-config={k}={v}" for k, v in bucket.broker_overrides().items()
                                 if k.startswith(("rsm.", "remote.log.storage.manager"))],
             "--config", "segment.bytes=8192"],
            capture_output=True, text=True, timeout=120)
        assert restored.returncode == 0, restored.stderr
        assert f"Restored topic {topic}" in restored.stdout
        for partition in (0, 1):
            records = consume_confluent(fresh.bootstrap, topic, {partition: 0}, copied[partition] + 1)
            assert [r.offset for r in records] == list(range(copied[partition] + 1))
            assert [r.value for r in records] == [s.value for s in specs(copied[partition] + 1)]
        produce_confluent(fresh.bootstrap, topic, [Spec(0, b"k", b"after the restore")])
        [after] = consume_confluent(fresh.bootstrap, topic, {0: copied[0] + 1}, 1)
        assert (after.offset, after.value) == (copied[0] + 1, b"after the restore")
    finally:
        fresh.stop()


def test_turning_remote_storage_on_tiers_an_existing_topic_and_off_deletes_its_remote_data(tmp_path):
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    store = tmp_path / "remote-store"
    broker = BrokerProcess(tmp_path / "broker", overrides={
        **TEST_OVERRIDES, "remote.log.storage.system.enable": "true",
        "remote.log.storage.manager.class.name": "local", "rsm.config.dir": str(store),
        "remote.log.manager.task.interval.ms": "100"}).start()

    def alter(**configs: str) -> None:
        resource = ConfigResource("TOPIC", topic, incremental_configs=[
            ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET)
            for k, v in configs.items()])
        admin(broker.bootstrap).incremental_alter_configs([resource])[resource].result(TIMEOUT_S)

    try:
        topic = "tiered-later"
        create_topic(broker.bootstrap, topic, config={k: v for k, v in TIERED.items() if k != "remote.storage.enable"})
        produce_confluent(broker.bootstrap, topic, specs(1000), **PRODUCER)
        assert not store.exists() or not any(store.iterdir())
        alter(remote_storage_enable="true")
        wait_until(lambda: local_segments(broker, topic)[0] > 0, "copies once remote.storage.enable is on")
        [directory] = [d for d in store.iterdir() if d.name.startswith(f"{topic}-0-")]
        assert list(directory.glob("*.metadata"))
        with pytest.raises(KafkaException, match="without deleting remote data"):
            alter(remote_storage_enable="false")
        alter(remote_storage_enable="false", remote_log_delete_on_disable="true")
        wait_until(lambda: not list(directory.glob("*")), "the remote data deleted")
    finally:
        broker.stop()
