"""DescribeLogDirs and AlterReplicaLogDirs on a broker with two log dirs, through kafka-python's
admin client and raw requests: sizes and lags as the files are, a replica moved between the dirs
while a producer writes and a consumer reads, nothing lost and the order kept."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from kafka import KafkaAdminClient, TopicPartitionReplica
from kafka import TopicPartition as KafkaTopicPartition
from kafka.errors import NoError

from logbroker.protocol.apis import ApiKey
from logbroker.records.builder import build_batch
from logbroker.testing import TEST_OVERRIDES, BrokerProcess, wait_for

from clients import RawClient, confluent_consumer, create_topic, sample_specs, produce_confluent

KAFKA_STORAGE_ERROR = 56
LOG_DIR_NOT_FOUND = 57
REPLICA_NOT_AVAILABLE = 9


@pytest.fixture(scope="module")
def two_dir_broker(tmp_path_factory):
    base = tmp_path_factory.mktemp("two-dirs")
    dirs = [base / "d1", base / "d2"]
    broker = BrokerProcess(base / "broker", overrides={
        **TEST_OVERRIDES, "log.dirs": ",".join(str(d) for d in dirs), "log.segment.bytes": "1048576",
        # a move of the 5 MB log below takes about 2.5 s: long enough to watch it under way
        "replica.alter.log.dirs.io.max.bytes.per.second": str(2 << 20)})
    broker.start()
    yield broker, [str(d.absolute()) for d in dirs]
    broker.stop()


def kafka_python_admin(bootstrap: str) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=bootstrap, client_id="tests-log-dirs")


def log_dirs_of(bootstrap: str, topic_partitions=None) -> dict[str, dict]:
    admin = kafka_python_admin(bootstrap)
    try:
        (answer,) = admin.describe_log_dirs(topic_partitions)
    finally:
        admin.close()
    return {d["log_dir"]: d for d in answer["log_dirs"]}


def replicas_in(log_dir: dict, topic: str) -> dict[tuple[int, bool], dict]:
    return {(p["partition_index"], p["is_future_key"]): p
            for t in log_dir["topics"] if t["name"] == topic for p in t["partitions"]}


def dir_of(dirs: dict[str, dict], topic: str, partition: int) -> str:
    (found,) = [path for path, d in dirs.items() if (partition, False) in replicas_in(d, topic)]
    return found


def move_replica(bootstrap: str, topic: str, target: str) -> None:
    """Move partition 0's replica on broker 0 to `target` and wait until it is there."""
    admin = kafka_python_admin(bootstrap)
    try:
        result = admin.alter_replica_log_dirs({TopicPartitionReplica(topic, 0, 0): target})
    finally:
        admin.close()
    assert list(result.values()) == [NoError]
    wait_for(lambda: dir_of(log_dirs_of(bootstrap, [topic]), topic, 0) == target,
             timeout_s=60, what="the replica in the target dir")


def test_describe_log_dirs_gives_each_dirs_partitions_sizes_and_disk_space(two_dir_broker):
    broker, paths = two_dir_broker
    create_topic(broker.bootstrap, "sized", partitions=4)
    produce_confluent(broker.bootstrap, "sized", sample_specs(200, partitions=4, seed=3))
    dirs = log_dirs_of(broker.bootstrap, ["sized"])
    assert sorted(dirs) == sorted(paths)
    found = 0
    for path, d in dirs.items():
        assert d["error_code"] == 0
        stat = os.statvfs(path)
        assert d["total_bytes"] == stat.f_blocks * stat.f_frsize
        assert 0 < d["usable_bytes"] <= d["total_bytes"]
        for (index, future), p in replicas_in(d, "sized").items():
            assert not future and p["offset_lag"] == 0
            on_disk = sum(f.stat().st_size for f in (Path(path) / f"sized-{index}").glob("*.log"))
            assert p["partition_size"] == on_disk > 0
            found += 1
        assert {t["name"] for t in d["topics"]} <= {"sized"}
    assert found == 4  # each partition in exactly one dir


def test_describe_log_dirs_v1_to_v4_and_a_partition_filter(two_dir_broker):
    broker, paths = two_dir_broker
    create_topic(broker.bootstrap, "filtered", partitions=3)
    with RawClient(broker.bootstrap) as raw:
        for version in (1, 2, 3, 4):
            answer = raw.request(ApiKey.DESCRIBE_LOG_DIRS, version,
                                 topics=[{"topic": "filtered", "partitions": [1]}])
            assert sorted(r.log_dir for r in answer.results) == sorted(paths)
            listed = [(t.name, p.partition_index) for r in answer.results for t in r.topics for p in t.partitions]
            assert listed == [("filtered", 1)]
            if version >= 4:
                assert all(r.total_bytes > 0 and r.usable_bytes > 0 for r in answer.results)


def test_alter_replica_log_dirs_refuses_unknown_dirs_and_partitions(two_dir_broker):
    broker, paths = two_dir_broker
    create_topic(broker.bootstrap, "refused")
    admin = kafka_python_admin(broker.bootstrap)
    try:
        result = admin.alter_replica_log_dirs({
            TopicPartitionReplica("refused", 0, 0): "/no/such/dir",
            TopicPartitionReplica("no-such-topic", 0, 0): paths[0]})
    finally:
        admin.close()
    codes = {(tpr.topic, tpr.partition): err.errno for tpr, err in result.items()}
    assert codes == {("refused", 0): LOG_DIR_NOT_FOUND, ("no-such-topic", 0): REPLICA_NOT_AVAILABLE}
    here = dir_of(log_dirs_of(broker.bootstrap, ["refused"]), "refused", 0)
    with RawClient(broker.bootstrap) as raw:
        for version in (1, 2):
            answer = raw.request(ApiKey.ALTER_REPLICA_LOG_DIRS, version, dirs=[
                {"path": "relative/nowhere", "topics": [{"name": "refused", "partitions": [0]}]},
                {"path": here, "topics": [{"name": "refused", "partitions": [0]}]}])  # already there
            assert [(r.topic_name, [(p.partition_index, p.error_code) for p in r.partitions])
                    for r in answer.results] == [("refused", [(0, LOG_DIR_NOT_FOUND), (0, 0)])]
    assert replicas_in(log_dirs_of(broker.bootstrap, ["refused"])[here], "refused") == {
        (0, False): {"partition_index": 0, "partition_size": 0, "offset_lag": 0, "is_future_key": False}}


def test_a_replica_moves_to_the_other_dir_under_load_with_nothing_lost(two_dir_broker):
    broker, paths = two_dir_broker
    topic = "moving"
    create_topic(broker.bootstrap, topic)
    produced = {m.offset(): m.value() for m in produce_confluent(
        broker.bootstrap, topic, sample_specs(12_000, seed=7, value_size=400), **{"batch.size": 65536})}
    source = dir_of(log_dirs_of(broker.bootstrap, [topic]), topic, 0)
    target = next(p for p in paths if p != source)

    # A producer writes and a consumer reads the whole time the replica moves.
    moved = threading.Event()
    consumed: list[tuple[int, bytes | None]] = []
    failures: list[str] = []

    def produce_more() -> None:
        rounds = 0
        while not moved.is_set() or rounds < 5:
            for m in produce_confluent(broker.bootstrap, topic, sample_specs(200, seed=100 + rounds)):
                produced[m.offset()] = m.value()
            rounds += 1

    def consume() -> None:
        consumer = confluent_consumer(broker.bootstrap, **{"group.id": "mover", "auto.offset.reset": "earliest"})
        try:
            consumer.subscribe([topic])
            while not (moved.is_set() and not producer.is_alive() and len(consumed) >= len(produced)):
                msg = consumer.poll(0.5)
                if msg is not None and msg.error() is not None:
                    failures.append(str(msg.error()))
                elif msg is not None:
                    consumed.append((msg.offset(), msg.value()))
        finally:
            consumer.close()

    producer = threading.Thread(target=produce_more)
    reader = threading.Thread(target=consume)
    producer.start()
    reader.start()
    try:
        admin = kafka_python_admin(broker.bootstrap)
        try:
            result = admin.alter_replica_log_dirs({TopicPartitionReplica(topic, 0, 0): target})
        finally:
            admin.close()
        assert list(result.values()) == [NoError]
        # The copy under way: a future replica in the target dir, behind the current one.
        copying = wait_for(lambda: replicas_in(log_dirs_of(broker.bootstrap, [topic])[target], topic).get((0, True)),
                           what="the future replica in the target dir")
        assert copying["offset_lag"] > 0
        written_while_copying = len(produced)
        wait_for(lambda: dir_of(log_dirs_of(broker.bootstrap, [topic]), topic, 0) == target,
                 timeout_s=60, what="the replica in the target dir")
    finally:
        moved.set()
        producer.join()
        reader.join(timeout=120)
    assert not reader.is_alive() and failures == []
    assert replicas_in(log_dirs_of(broker.bootstrap, [topic])[source], topic) == {}
    assert not [n for n in os.listdir(target) if n.endswith("-future")]
    assert consumed == sorted(produced.items())  # every record once, in order, as written
    assert len(consumed) > written_while_copying >= 12_000
    text = broker.new_log_text()
    assert "moved from" in text


def test_a_replica_whose_log_starts_inside_a_batch_moves_with_its_log_start(two_dir_broker):
    """DeleteRecords left the log start inside a batch: the copy takes that whole batch and
    keeps the log start where it was, so a consumer from the earliest offset sees the same."""
    broker, paths = two_dir_broker
    topic = "deleted-head"
    create_topic(broker.bootstrap, topic)
    produce_confluent(broker.bootstrap, topic, sample_specs(100, seed=11), **{"linger.ms": 1000})
    admin = kafka_python_admin(broker.bootstrap)
    try:
        admin.delete_records({KafkaTopicPartition(topic, 0): 37})
    finally:
        admin.close()
    source = dir_of(log_dirs_of(broker.bootstrap, [topic]), topic, 0)
    move_replica(broker.bootstrap, topic, next(p for p in paths if p != source))
    consumer = confluent_consumer(broker.bootstrap, **{"group.id": "deleted-head", "auto.offset.reset": "earliest"})
    try:
        assert consumer.get_watermark_offsets(ConfluentTopicPartition(topic, 0), timeout=10) == (37, 100)
        consumer.subscribe([topic])
        offsets = []
        while len(offsets) < 63:
            msg = consumer.poll(10)
            assert msg is not None and msg.error() is None
            offsets.append(msg.offset())
    finally:
        consumer.close()
    assert offsets == list(range(37, 100))


def test_a_failed_dir_answers_kafka_storage_error_and_a_broker_with_none_left_stops(tmp_path):
    """Each dir is replaced by a plain file in turn (Kafka's LogDirFailureTest): the first one's
    partition answers KAFKA_STORAGE_ERROR while the other dir serves on; with both gone the
    broker shuts down with exit code 1, as Kafka halts."""
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    broker = BrokerProcess(tmp_path / "broker", overrides={
        **TEST_OVERRIDES, "log.dirs": ",".join(map(str, dirs)),
        "replica.high.watermark.checkpoint.interval.ms": "100"})
    broker.start()
    try:
        create_topic(broker.bootstrap, "split", partitions=2)
        layout = {path: sorted(p for p, _ in replicas_in(d, "split"))
                  for path, d in log_dirs_of(broker.bootstrap, ["split"]).items()}
        [first] = [path for path, partitions in layout.items() if partitions == [0]]
        os.rename(first, f"{first}.gone")
        Path(first).write_text("")
        wait_for(lambda: log_dirs_of(broker.bootstrap, ["split"])[first]["error_code"] == KAFKA_STORAGE_ERROR,
                 what="the first dir offline")
        with RawClient(broker.bootstrap) as raw:
            batch = build_batch([(None, b"v")])
            assert raw.produce("split", 0, batch).error_code == KAFKA_STORAGE_ERROR
            assert raw.produce("split", 1, batch).error_code == 0
        [second] = [path for path in layout if path != first]
        os.rename(second, f"{second}.gone")
        Path(second).write_text("")
        assert broker.process.wait(60) == 1
        assert "every log dir has failed" in broker.new_log_text()
    finally:
        broker.kill()


def test_the_replica_move_throttle_changes_without_a_restart(two_dir_broker):
    """replica.alter.log.dirs.io.max.bytes.per.second is a dynamic broker config, as in Kafka."""
    from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                       ConfigSource, ResourceType)

    broker, _ = two_dir_broker
    name = "replica.alter.log.dirs.io.max.bytes.per.second"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})

    def change(value: str | None) -> None:
        op = AlterConfigOpType.SET if value is not None else AlterConfigOpType.DELETE
        [future] = admin.incremental_alter_configs([ConfigResource(
            ResourceType.BROKER, "0", incremental_configs=[ConfigEntry(name, value, incremental_operation=op)])]).values()
        future.result(15)

    def described():
        [future] = admin.describe_configs([ConfigResource(ResourceType.BROKER, "0")]).values()
        entry = future.result(15)[name]
        return entry.value, entry.source, entry.is_read_only

    assert described() == (str(2 << 20), ConfigSource.STATIC_BROKER_CONFIG.value, False)
    change(str(5 << 20))
    assert described() == (str(5 << 20), ConfigSource.DYNAMIC_BROKER_CONFIG.value, False)
    change(None)
    assert described() == (str(2 << 20), ConfigSource.STATIC_BROKER_CONFIG.value, False)
