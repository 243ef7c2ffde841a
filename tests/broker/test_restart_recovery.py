"""Restarts: what a clean stop leaves on disk (Kafka's files, in Kafka's formats, architecture.md §2),
and that no acknowledged record is lost or repeated — after SIGTERM, and after SIGKILL in the
middle of a stream of produces.

Every segment is then checked with `logbroker dump-log` as an operator would check a Kafka log:
every batch valid, offsets contiguous, the index files sane and true to the log.
"""

from __future__ import annotations

import base64
import gc
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer, TopicCollection
from confluent_kafka import TopicPartition as CkTopicPartition

from logbroker.records.builder import build_batch
from logbroker.storage.file_records import FileRecords
from logbroker.testing import TEST_OVERRIDES, BrokerProcess

from clients import (
    TIMEOUT_S,
    RawClient,
    Spec,
    admin,
    consume_confluent,
    create_topic,
    drop_admins,
    expected_records,
    produce_confluent,
    sample_specs,
    segment_files,
)
from offset_checkpoints import read_checkpoint
from transactional_clients import read_all, transactional_producer

pytestmark = pytest.mark.timeout(90)

PARTITIONS = 2
SEGMENT_BYTES = 16_384  # small segments: several per partition, rolled and closed


def dump_log(*args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "logbroker.cli", "dump-log", *map(str, args)],
                          capture_output=True, text=True, timeout=60)


BATCH_LINE = re.compile(r"^baseOffset: (\d+) lastOffset: (\d+) count: (\d+) .* isvalid: (\w+)$")


def check_segments_with_dump_log(data_dir: Path, topic: str, partition: int) -> tuple[int, int]:
    """Run dump-log over every file of a partition as an operator would; returns (first offset,
    next offset) of the batches found, which must be contiguous and all valid."""
    logs = segment_files(data_dir, topic, partition, ".log")
    indexes = segment_files(data_dir, topic, partition, ".index") + segment_files(data_dir, topic, partition, ".timeindex")
    assert logs and len(indexes) == 2 * len(logs)

    dumped = dump_log(*logs)
    assert (dumped.returncode, dumped.stderr) == (0, "")
    batches = [BATCH_LINE.match(line) for line in dumped.stdout.splitlines() if line.startswith("baseOffset:")]
    assert batches and all(b is not None and b.group(4) == "true" for b in batches), dumped.stdout[:2000]
    spans = [(int(b.group(1)), int(b.group(2)), int(b.group(3))) for b in batches]
    assert all(last - base + 1 == count for base, last, count in spans)
    assert all(b[0] == a[1] + 1 for a, b in zip(spans, spans[1:])), "offsets are not contiguous"

    sanity = dump_log("--index-sanity-check", *indexes)
    assert (sanity.returncode, sanity.stderr) == (0, "")
    verdicts = [line for line in sanity.stdout.splitlines() if not line.startswith("Dumping")]
    assert len(verdicts) == len(indexes)
    assert all(v.endswith("passed sanity check.") or v.endswith("is empty.") for v in verdicts), verdicts

    verified = dump_log("--verify-index-only", *indexes)
    assert (verified.returncode, verified.stderr) == (0, "")
    # Segments are rolled at segment.bytes, so the index did get entries somewhere.
    assert any(v.endswith("passed sanity check.") for v in verdicts)
    return spans[0][0], spans[-1][1] + 1


def topic_id(bootstrap: str, topic: str) -> str:
    futures = admin(bootstrap).describe_topics(TopicCollection([topic]))
    return str(futures[topic].result(TIMEOUT_S).topic_id)


def test_clean_shutdown_leaves_kafka_files_and_restart_keeps_every_record(broker_process):
    bootstrap = broker_process.bootstrap
    topic = "restart-clean"
    create_topic(bootstrap, topic, partitions=PARTITIONS, config={"segment.bytes": str(SEGMENT_BYTES)})
    specs = sample_specs(1200, partitions=PARTITIONS, seed=7, value_size=60)
    delivered = produce_confluent(bootstrap, topic, specs, **{"compression.type": "gzip", "linger.ms": 5,
                                                              "batch.num.messages": 20})
    expected = expected_records(specs, [m.offset() for m in delivered])
    end = {p: sum(1 for s in specs if s.partition == p) for p in range(PARTITIONS)}
    tp = CkTopicPartition(topic, 1, 37)
    assert admin(bootstrap).delete_records([tp])[tp].result(TIMEOUT_S).low_watermark == 37
    expected_id = topic_id(bootstrap, topic)
    drop_admins()

    assert broker_process.stop() == 0

    data = broker_process.data_dir
    assert (data / ".kafka_cleanshutdown").exists()
    meta = dict(line.split("=", 1) for line in (data / "meta.properties").read_text().splitlines()
                if line and not line.startswith("#"))
    assert meta["broker.id"] == "0" and meta["version"] in ("0", "1") and meta["cluster.id"]
    recovery_points = read_checkpoint(data / "recovery-point-offset-checkpoint")
    high_watermarks = read_checkpoint(data / "replication-offset-checkpoint")
    log_starts = read_checkpoint(data / "log-start-offset-checkpoint")
    for p in range(PARTITIONS):
        assert recovery_points[(topic, p)] == end[p]
        assert high_watermarks[(topic, p)] == end[p]
    # Kafka lists a log start only where it lies above the first segment's base offset.
    first_base_1 = int(segment_files(data, topic, 1)[0].stem)
    assert log_starts.get((topic, 1), first_base_1) == 37 and (topic, 0) not in log_starts
    for p in range(PARTITIONS):
        directory = data / f"{topic}-{p}"
        version_line, id_line = (directory / "partition.metadata").read_text().splitlines()
        assert version_line == "version: 0" and id_line.startswith("topic_id: ")
        # Kafka's Uuid.toString: url-safe base64 without padding (librdkafka prints standard base64).
        stored_id = id_line.removeprefix("topic_id: ")
        assert re.fullmatch(r"[A-Za-z0-9_-]{22}", stored_id)
        assert base64.urlsafe_b64decode(stored_id + "==") == base64.b64decode(expected_id + "==")
        # Epoch 0 from offset 0; DeleteRecords moved partition 1's first entry up to its log start,
        # as Kafka's truncateFromStart does.
        assert (directory / "leader-epoch-checkpoint").read_text().splitlines() == [
            "0", "1", "0 37" if p == 1 else "0 0"]
        assert len(segment_files(data, topic, p)) > 2  # rolled at segment.bytes
        for index in segment_files(data, topic, p, ".index"):  # trimmed on roll and close
            assert index.stat().st_size % 8 == 0 and index.stat().st_size < 10 * 1024 * 1024
        for index in segment_files(data, topic, p, ".timeindex"):
            assert index.stat().st_size % 12 == 0 and index.stat().st_size < 10 * 1024 * 1024
        first, next_offset = check_segments_with_dump_log(data, topic, p)
        assert next_offset == end[p]
        assert first <= (37 if p == 1 else 0)

    broker_process.start()

    assert not (data / ".kafka_cleanshutdown").exists()  # removed while running, as Kafka does
    bootstrap = broker_process.bootstrap
    got = consume_confluent(bootstrap, topic, {0: 0, 1: 37}, len(expected) - 37)
    assert sorted(got, key=lambda r: (r.partition, r.offset)) == [
        r for r in expected if r.partition == 0 or r.offset >= 37]
    with RawClient(bootstrap) as client:
        assert client.list_offset(topic, 1, -2).offset == 37  # the log start survived
        assert int(client.fetch(topic, 1, 36).error_code) == 1
    [more] = produce_confluent(bootstrap, topic, [Spec(0, b"after", b"restart")])
    assert more.offset() == end[0]  # offsets continue
    assert "unclean" not in broker_process.new_log_text().replace("(0 after an unclean shutdown)", "")


class AckedStream:
    """A producer thread sending b"%08d" % i (padded to `value_size` bytes) until stopped,
    recording each acknowledged i -> offset."""

    def __init__(self, bootstrap: str, topic: str, acks: int, value_size: int = 8) -> None:
        self.padding = b"." * max(0, value_size - 8)
        self.acked: dict[int, int] = {}
        self.failed = 0
        self.sent = 0
        self._stop = threading.Event()
        self._producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 2,
                                   "batch.num.messages": 50, "message.timeout.ms": 4000,
                                   "retries": 0, "enable.idempotence": False,
                                   "max.in.flight.requests.per.connection": 5})
        self._thread = threading.Thread(target=self._run, args=(topic,), daemon=True)
        self._thread.start()

    def _on_delivery(self, i: int, err, msg) -> None:
        if err is None:
            self.acked[i] = msg.offset()
        else:
            self.failed += 1

    def _run(self, topic: str) -> None:
        i = 0
        while not self._stop.is_set():
            try:
                self._producer.produce(topic, value=b"%08d" % i + self.padding, partition=0,
                                       on_delivery=lambda err, msg, i=i: self._on_delivery(i, err, msg))
                i += 1
                self.sent = i
            except BufferError:
                pass
            self._producer.poll(0 if i % 100 else 0.001)
        self._producer.purge(in_queue=True, in_flight=True, blocking=False)
        self._producer.flush(TIMEOUT_S)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(TIMEOUT_S + 5)
        assert not self._thread.is_alive()
        del self._producer
        gc.collect()


@pytest.mark.parametrize("acks", [1, -1])
def test_kill_during_produce_keeps_every_acknowledged_record_once(broker_process, acks):
    topic = "restart-kill"
    create_topic(broker_process.bootstrap, topic, config={"segment.bytes": str(SEGMENT_BYTES)})
    drop_admins()
    stream = AckedStream(broker_process.bootstrap, topic, acks)
    deadline = time.monotonic() + TIMEOUT_S
    while len(stream.acked) < 3000 and time.monotonic() < deadline:
        time.sleep(0.005)
    assert len(stream.acked) >= 3000, f"only {len(stream.acked)} acknowledged"

    broker_process.kill()  # SIGKILL mid-stream: produces still in flight
    stream.stop()
    acked = dict(stream.acked)
    assert not (broker_process.data_dir / ".kafka_cleanshutdown").exists()

    broker_process.start()

    assert "1 after an unclean shutdown" in broker_process.new_log_text()
    with RawClient(broker_process.bootstrap) as client:
        end = client.list_offset(topic, 0, -1).offset
    assert end >= len(acked)
    got = consume_confluent(broker_process.bootstrap, topic, {0: 0}, end)
    values = [int(r.value) for r in got]
    assert [r.offset for r in got] == list(range(end))  # dense offsets, nothing torn
    assert values == sorted(set(values))  # in order, no duplicates
    by_offset = {r.offset: int(r.value) for r in got}
    lost = {i: o for i, o in acked.items() if by_offset.get(o) != i}
    assert not lost, f"{len(lost)} acknowledged records missing or moved, e.g. {list(lost.items())[:5]}"
    # The log goes on where it ended, and a clean stop leaves it valid to Kafka's tools.
    [more] = produce_confluent(broker_process.bootstrap, topic, [Spec(0, None, b"%08d" % 99_999_999)])
    assert more.offset() == end
    assert broker_process.stop() == 0
    assert check_segments_with_dump_log(broker_process.data_dir, topic, 0) == (0, end + 1)


@pytest.mark.parametrize("acks", [1, -1])
def test_kill_while_segments_larger_than_the_writeback_step_roll(broker_process, acks):
    """Segments of 9 MiB: each has its writeback started (every 8 MiB, file_records.py) and is
    rolled and fsynced in the background while the stream goes on; SIGKILL after the second roll.
    Every acknowledged record is there once, offsets dense, and after a clean stop every file is
    Kafka's: each .log exactly its batches, rolled ones within segment.bytes, indexes trimmed."""
    topic = "restart-kill-big"
    segment_bytes = 9 << 20
    create_topic(broker_process.bootstrap, topic, config={"segment.bytes": str(segment_bytes)})
    drop_admins()
    stream = AckedStream(broker_process.bootstrap, topic, acks, value_size=1024)
    deadline = time.monotonic() + 60
    while len(segment_files(broker_process.data_dir, topic, 0)) < 3 and time.monotonic() < deadline:
        time.sleep(0.005)
    assert len(segment_files(broker_process.data_dir, topic, 0)) >= 3, f"{len(stream.acked)} acknowledged"

    broker_process.kill()
    stream.stop()
    acked = dict(stream.acked)

    broker_process.start()

    with RawClient(broker_process.bootstrap) as client:
        end = client.list_offset(topic, 0, -1).offset
    assert end >= len(acked) > 18_000
    got = consume_confluent(broker_process.bootstrap, topic, {0: 0}, end)
    assert [r.offset for r in got] == list(range(end))
    values = [int(r.value[:8]) for r in got]
    assert values == sorted(set(values))
    by_offset = {r.offset: int(r.value[:8]) for r in got}
    lost = {i: o for i, o in acked.items() if by_offset.get(o) != i}
    assert not lost, f"{len(lost)} acknowledged records missing or moved, e.g. {list(lost.items())[:5]}"
    assert broker_process.stop() == 0
    logs = segment_files(broker_process.data_dir, topic, 0)
    sizes = [p.stat().st_size for p in logs]
    assert all(size <= segment_bytes for size in sizes) and sum(sizes[:-1]) > 2 * (8 << 20)
    for path, size in zip(logs, sizes):  # the file is its batches, nothing preallocated after them
        records = FileRecords.open(path, file_already_exists=True, writable=False)
        try:
            assert sum(h.size_in_bytes for _, h in records.batches()) == size
        finally:
            records.close_handlers()
    assert check_segments_with_dump_log(broker_process.data_dir, topic, 0) == (0, end)


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_idempotent_producer_state_survives_a_restart(broker_process, how):
    # A producer whose answer was lost in the restart resends its batch: the broker must still
    # know it (from the .snapshot after a clean stop, rebuilt from the log after a crash).
    topic = "restart-idempotent"
    create_topic(broker_process.bootstrap, topic)
    drop_admins()
    with RawClient(broker_process.bootstrap) as client:
        pid, epoch = client.init_producer_id()
        batches = [build_batch([(b"k", b"seq-%d" % (3 * k + i)) for i in range(3)], producer_id=pid,
                               producer_epoch=epoch, base_sequence=3 * k) for k in range(3)]
        for k, batch in enumerate(batches[:2]):
            assert client.produce(topic, 0, batch).base_offset == 3 * k

    if how == "stop":
        assert broker_process.stop() == 0
    else:
        broker_process.kill()
    broker_process.start()

    with RawClient(broker_process.bootstrap) as client:
        resent = client.produce(topic, 0, batches[1])
        assert (int(resent.error_code), resent.base_offset) == (0, 3)  # a duplicate, not a new append
        following = client.produce(topic, 0, batches[2])
        assert (int(following.error_code), following.base_offset) == (0, 6)
        assert client.list_offset(topic, 0, -1).offset == 9


@pytest.fixture
def txn_broker(tmp_path):
    """A broker with one __transaction_state partition (each partition recovered after a kill
    costs its index files' first reads), killed at the end."""
    process = BrokerProcess(tmp_path, overrides={**TEST_OVERRIDES, "transaction.state.log.num.partitions": "1"})
    yield process.start()
    process.kill()


def test_kill_after_a_recovery_checkpoint_replays_the_tail_and_reads_committed_right(txn_broker):
    # The active segment (4 MiB segments: a recovery checkpoint every 1 MiB) holds ~1.6 MB of
    # transactions, two of three aborted; the broker is killed after the checkpoint. Recovery
    # must start at the checkpointed recovery point, from the snapshot taken there, replay
    # exactly the batches after it, and read_committed must then return exactly the committed
    # records (the aborted ranges on both sides of the checkpoint known).
    topic = "restart-txn-tail"
    create_topic(txn_broker.bootstrap, topic, 1, {"segment.bytes": str(4 << 20)})
    drop_admins()
    producer = transactional_producer(txn_broker.bootstrap, "restart-txn-tail", init_timeout_s=TIMEOUT_S,
                                      **{"linger.ms": 5, "compression.type": "none"})
    value = b"v" * 1000
    committed, total = [], 0
    for t in range(160):
        producer.begin_transaction()
        records = [b"%d-%d-" % (t, r) + value for r in range(10)]
        for record in records:
            producer.produce(topic, value=record, partition=0)
        total += len(records)
        if t % 3 == 0:
            producer.commit_transaction(TIMEOUT_S)
            committed += records
        else:
            producer.flush(TIMEOUT_S)  # written, then aborted (an abort purges what is unsent)
            producer.abort_transaction(TIMEOUT_S)
    del producer
    checkpoint_file = txn_broker.data_dir / "recovery-point-offset-checkpoint"
    deadline = time.monotonic() + TIMEOUT_S
    while (not checkpoint_file.exists() or read_checkpoint(checkpoint_file).get((topic, 0), 0) == 0) \
            and time.monotonic() < deadline:
        time.sleep(0.05)  # the checkpoint runs in a worker thread after the append that made it due
    recovery_point = read_checkpoint(checkpoint_file)[(topic, 0)]
    assert recovery_point > 0
    txn_broker.kill()
    partition_dir = txn_broker.data_dir / f"{topic}-0"
    assert (partition_dir / f"{recovery_point:020d}.snapshot").exists()
    assert len(segment_files(txn_broker.data_dir, topic, 0)) == 1
    records = FileRecords.open(segment_files(txn_broker.data_dir, topic, 0)[0], file_already_exists=True,
                               writable=False)
    try:
        headers = [h for _, h in records.batches()]
    finally:
        records.close_handlers()
    tail = sum(1 for h in headers if h.base_offset >= recovery_point)
    assert 0 < tail < len(headers)

    txn_broker.start()
    replayed = re.findall(rf"Recovered segment 0 of {topic}-0 from offset (\d+): (\d+) batch\(es\) replayed",
                          txn_broker.new_log_text())
    assert replayed == [(str(recovery_point), str(tail))]
    got = read_all(txn_broker.bootstrap, topic, isolation="read_committed", expect=len(committed),
                   timeout_s=TIMEOUT_S)
    assert [v for _, _, v in got] == committed
    got_all = read_all(txn_broker.bootstrap, topic, isolation="read_uncommitted", expect=total,
                       timeout_s=TIMEOUT_S)
    assert len(got_all) == total
