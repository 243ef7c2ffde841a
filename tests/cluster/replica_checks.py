"""What the durability and healing tests check on a cluster: a producer of sequence numbers whose
acknowledgements are kept, a reader of everything committed, and a reader of each replica's
segment files (decoded with our own record code, not through any broker).

A record's value is its sequence number in ASCII, and sequence `s` goes to partition
`s % partitions`, so a missing, doubled or reordered acknowledged record shows up by number.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from logbroker.records.record_batch import iter_record_batches
from logbroker.testing import ClusterProcess, wait_for


class SequenceProducer:
    """A confluent-kafka producer (acks=all) writing 0, 1, 2 … from a background thread until
    `stop()`. `acked` holds the sequence numbers whose delivery succeeded, `errors` the
    delivery errors (none are expected: retries run until `message.timeout.ms`)."""

    def __init__(self, cluster: ClusterProcess, topic: str, *, idempotent: bool, partitions: int = 1,
                 pace_s: float = 0.002, value_bytes: int = 0, limit: int | None = None) -> None:
        self.topic = topic
        self.partitions = partitions
        self.pace_s = pace_s
        self.value_bytes = value_bytes  # values are padded with spaces up to this size
        self.limit = limit  # stop after this many records (None: at stop())
        self.acked: set[int] = set()
        self.errors: list[str] = []
        self.sent = 0
        self._producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                                   "enable.idempotence": idempotent, "linger.ms": 5,
                                   # below the tests' segment.bytes: a batch grown during an outage
                                   # must not get RECORD_LIST_TOO_LARGE
                                   "batch.size": 16_384 if value_bytes < 16_384 else 1_000_000,
                                   "message.timeout.ms": 120_000, "retry.backoff.ms": 50,
                                   "topic.metadata.refresh.interval.ms": 1000})
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sequence-producer", daemon=True)

    def _on_delivery(self, err, msg) -> None:
        if err is None:
            self.acked.add(int(msg.value()))
        else:
            self.errors.append(f"{int(msg.value())}: {err}")

    def _run(self) -> None:
        while not self._stop.is_set() and (self.limit is None or self.sent < self.limit):
            seq = self.sent
            try:
                self._producer.produce(self.topic, str(seq).encode().ljust(self.value_bytes),
                                       partition=seq % self.partitions,
                                       on_delivery=self._on_delivery)
            except BufferError:
                self._producer.poll(0.05)
                continue
            self.sent += 1
            self._producer.poll(0)
            if self.pace_s:
                time.sleep(self.pace_s)

    def start(self) -> SequenceProducer:
        self._thread.start()
        return self

    def wait_for_more_acks(self, count: int, timeout_s: float = 60.0) -> None:
        """Wait until `count` more records than now are acknowledged."""
        target = len(self.acked) + count
        wait_for(lambda: len(self.acked) >= target, timeout_s=timeout_s,
                 what=f"{count} more acknowledged records")

    def stop(self) -> None:
        """Stop producing (with a `limit`: once it is reached) and wait for every outstanding
        delivery report."""
        if self.limit is None:
            self._stop.set()
        self._thread.join()
        remaining = self._producer.flush(150)
        assert remaining == 0, f"{remaining} records never got a delivery report"


def committed_values(cluster: ClusterProcess, topic: str, partition: int) -> list[tuple[int, int]]:
    """(offset, sequence number) of every record below the high watermark, read by a consumer."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"check-{time.time()}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        _low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)
        consumer.assign([TopicPartition(topic, partition, 0)])
        records: list[tuple[int, int]] = []
        deadline = time.monotonic() + 90
        while (not records or records[-1][0] < high - 1) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                records.append((msg.offset(), int(msg.value())))
        return records
    finally:
        consumer.close()


def partition_dir(cluster: ClusterProcess, broker_id: int, topic: str, partition: int) -> Path:
    return cluster.brokers[broker_id].data_dir / f"{topic}-{partition}"


def replica_records(directory: Path) -> dict[int, int]:
    """offset → sequence number of every record in a replica's segment files."""
    records = {}
    for path in sorted(directory.glob("*.log")):
        for batch in iter_record_batches(path.read_bytes()):
            for record in batch.records():
                records[record.offset] = int(record.value)
    return records


def log_bytes(directory: Path) -> bytes:
    """A replica's segments, concatenated in offset order: its whole log as bytes."""
    return b"".join(p.read_bytes() for p in sorted(directory.glob("*.log")))


def segment_logs(directory: Path) -> dict[str, bytes]:
    """Name → bytes of every `.log` segment file. Index files are not compared: as in Kafka, a
    replica recovered after a crash appends its largest timestamp to the time index of the
    segment it was writing (LogSegment.recover), so its indexes may hold one entry more."""
    return {p.name: p.read_bytes() for p in sorted(directory.glob("*.log"))}


def wait_until_replicas_converge(cluster: ClusterProcess, topic: str, partition: int, *,
                                 same_bytes: bool = True, timeout_s: float = 60.0) -> None:
    """Wait for a full ISR and for every replica's log to be the same bytes (or, without
    `same_bytes`, to end at the same offset)."""
    cluster.wait_for_isr(topic, partition, timeout_s=timeout_s)
    dirs = [partition_dir(cluster, b, topic, partition) for b in cluster.brokers]
    if same_bytes:
        converged = lambda: len({log_bytes(d) for d in dirs}) == 1  # noqa: E731
    else:
        converged = lambda: len({max(replica_records(d), default=-1) for d in dirs}) == 1  # noqa: E731
    wait_for(converged, timeout_s=timeout_s, what=f"the same log of {topic}-{partition} on every replica")


def assert_no_acked_record_lost(cluster: ClusterProcess, topic: str, producer: SequenceProducer, *,
                                idempotent: bool, same_segments: bool = True) -> None:
    """Every acknowledged sequence number is in the committed log of its partition, and (with
    idempotence) exactly once and in order; the replicas agree offset by offset, and (with
    `same_segments`; not after a replica started over at the leader's log start) byte for byte."""
    assert not producer.errors, f"delivery failures: {producer.errors[:5]}"
    for partition in range(producer.partitions):
        wait_until_replicas_converge(cluster, topic, partition, same_bytes=same_segments)
        committed = committed_values(cluster, topic, partition)
        seqs = [seq for _, seq in committed]
        acked = {s for s in producer.acked if s % producer.partitions == partition}
        missing = acked - set(seqs)
        assert not missing, f"{len(missing)} acknowledged records lost from {topic}-{partition}: {sorted(missing)[:10]}"
        assert [o for o, _ in committed] == list(range(committed[0][0], committed[0][0] + len(committed)))
        if idempotent:
            assert seqs == sorted(set(seqs)), f"{topic}-{partition}: duplicated or reordered records"

        replicas = {b: replica_records(partition_dir(cluster, b, topic, partition)) for b in cluster.brokers}
        for offset, seq in committed:
            held = {b: records.get(offset) for b, records in replicas.items()}
            assert set(held.values()) == {seq}, f"offset {offset} of {topic}-{partition}: {held}"
        if not same_segments:
            continue
        files = {b: segment_logs(partition_dir(cluster, b, topic, partition)) for b in cluster.brokers}
        first = files[min(files)]
        for broker_id, broker_files in files.items():
            assert broker_files.keys() == first.keys(), f"broker {broker_id}: segments {sorted(broker_files)}"
            different = [name for name in first if broker_files[name] != first[name]]
            assert not different, f"broker {broker_id}: {different} differ from broker {min(files)}'s"
