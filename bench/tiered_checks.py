"""The acceptance checks of bench/bench_tiered.py: records produced with known values, read back in
order, and what the local directory and the bucket hold afterwards.

Every value is 1000 bytes starting with a 12-byte tag naming it (`P00000000042`: the 43rd plain
record; `A00003000017`, `B…`: transactional producers A and B, transaction 3, record 17), so a
reader compares each record with the one expected at its place: a lost, duplicated or reordered
record fails there, naming its offset. Each check raises AssertionError with the numbers that
failed it, or returns the numbers it saw.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from logbroker.remote.metadata import COPY_SEGMENT_FINISHED, RemoteLogSegmentMetadata

VALUE_BYTES = 1000
PAD = b"x" * (VALUE_BYTES - 12)
STALL_S = 60


def plain_values(count: int) -> Iterator[bytes]:
    for i in range(count):
        yield b"P%011d" % i + PAD


def produce(bootstrap: str, topic: str, values: Iterable[bytes]) -> tuple[int, str]:
    """(records, sha256 of the values in order): `values` produced with acks=all and idempotence,
    every delivery checked."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "log_level": 4,
                         "linger.ms": 20, "batch.size": 1 << 20, "queue.buffering.max.messages": 500_000,
                         "compression.type": "none"})
    failures: list = []

    def delivered(err, _msg) -> None:
        if err is not None:
            failures.append(err)

    digest, count = hashlib.sha256(), 0
    for value in values:
        while True:
            try:
                producer.produce(topic, value, partition=0, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.05)
        digest.update(value)
        count += 1
    assert producer.flush(120) == 0, "records still queued after 120 s"
    assert not failures, f"{len(failures)} deliveries failed, first: {failures[0]}"
    return count, digest.hexdigest()


def produce_transactions(bootstrap: str, topic: str, transactions: int, chunks: int = 5,
                         per_chunk: int = 100) -> tuple[list[bytes], list[bytes]]:
    """(every value in log order, the committed ones in log order). Producers A and B take turns
    writing `per_chunk` records (each turn flushed, so their records interleave in the log) in
    `transactions` transactions each; A commits all, B aborts its even-numbered ones."""
    common = {"bootstrap.servers": bootstrap, "linger.ms": 5, "compression.type": "none", "log_level": 4}
    a = Producer({**common, "transactional.id": "bench-tiered-a"})
    b = Producer({**common, "transactional.id": "bench-tiered-b"})
    for producer in (a, b):
        producer.init_transactions(30)
    everything, aborted = [], set()
    for t in range(transactions):
        for producer in (a, b):
            producer.begin_transaction()
        for chunk in range(chunks):
            for name, producer in (("A", a), ("B", b)):
                values = [b"%s%05d%06d" % (name.encode(), t, chunk * per_chunk + j) + PAD for j in range(per_chunk)]
                for value in values:
                    producer.produce(topic, value, partition=0)
                assert producer.flush(30) == 0
                everything += values
                if name == "B" and t % 2 == 0:
                    aborted.update(values)
        a.commit_transaction(30)
        if t % 2 == 0:
            b.abort_transaction(30)
        else:
            b.commit_transaction(30)
    return everything, [v for v in everything if v not in aborted]


def sha256_of(values: Iterable[bytes]) -> str:
    digest = hashlib.sha256()
    for value in values:
        digest.update(value)
    return digest.hexdigest()


@dataclass
class Read:
    records: int
    seconds: float
    bytes: int
    sha256: str
    last_offset: int


def consumer(bootstrap: str, topic: str, isolation: str = "read_uncommitted") -> Consumer:
    """A confluent-kafka consumer assigned partition 0 from offset 0, fetching up to 16 MiB a partition."""
    made = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-tiered", "enable.auto.commit": False,
                     "log_level": 4, "isolation.level": isolation, "fetch.max.bytes": 64 << 20,
                     "max.partition.fetch.bytes": 16 << 20})
    made.assign([TopicPartition(topic, 0, 0)])
    return made


def replay(bootstrap: str, topic: str, count: int) -> float:
    """Seconds to read `count` records from offset 0, counting them only (the client's speed
    bounds the checked reads of `read_in_order`)."""
    reader, seen = consumer(bootstrap, topic), 0
    start = time.perf_counter()
    try:
        while seen < count:
            seen += len(reader.consume(10_000, timeout=1))
            assert time.perf_counter() - start < 30 * STALL_S, f"{topic}: {seen} of {count} records read"
        return time.perf_counter() - start
    finally:
        reader.close()


def read_in_order(bootstrap: str, topic: str, expected: Iterable[bytes], count: int, *,
                  isolation: str = "read_uncommitted") -> Read:
    """Read `count` records from offset 0, each equal to the next of `expected`, at growing
    offsets; raises AssertionError at the first that is not, or when reads stall."""
    reader = consumer(bootstrap, topic, isolation)
    expected = iter(expected)
    digest, seen, nbytes, last = hashlib.sha256(), 0, 0, -1
    start = progress = time.perf_counter()
    try:
        while seen < count:
            messages = reader.consume(10_000, timeout=1)
            if not messages and time.perf_counter() - progress > STALL_S:
                raise AssertionError(f"{topic} ({isolation}): {seen} of {count} records read, then nothing "
                                     f"for {STALL_S} s; last offset {last}")
            for message in messages:
                assert message.error() is None, f"{topic}: {message.error()}"
                value, offset = message.value(), message.offset()
                want = next(expected)
                if offset <= last or value != want:
                    raise AssertionError(f"{topic} ({isolation}): record {seen} at offset {offset} (previous "
                                         f"{last}) is {value[:12]!r}, expected {want[:12]!r}")
                digest.update(value)
                nbytes += len(value)
                seen += 1
                last = offset
                if seen == count:
                    break
            progress = time.perf_counter() if messages else progress
        return Read(seen, time.perf_counter() - start, nbytes, digest.hexdigest(), last)
    finally:
        reader.close()


def local_segments(partition_dir: Path) -> list[tuple[int, int]]:
    """(base offset, bytes) of each local .log, in offset order."""
    return sorted((int(p.stem), p.stat().st_size) for p in partition_dir.glob("*.log"))


def local_tail_holds(partition_dir: Path, local_retention: int) -> bool:
    """Kafka's local.retention.bytes invariant after a retention pass: dropping the oldest local
    segment would leave less than the retention (so it is kept), and the log starts above 0."""
    segments = local_segments(partition_dir)
    total = sum(size for _, size in segments)
    return segments[0][0] > 0 and total - segments[0][1] < local_retention


def bucket_segments(s3, bucket: str) -> tuple[list[RemoteLogSegmentMetadata], dict[str, int]]:
    """The segments the bucket's `.metadata` objects describe (offset order), and every key → size."""
    sizes, token = {}, None
    while True:
        page = s3.list_objects_v2(Bucket=bucket, **({"ContinuationToken": token} if token else {}))
        sizes.update({o["Key"]: o["Size"] for o in page.get("Contents", [])})
        token = page.get("NextContinuationToken")
        if not token:
            break
    segments = [RemoteLogSegmentMetadata.from_json(s3.get_object(Bucket=bucket, Key=k)["Body"].read())
                for k in sizes if k.endswith(".metadata")]
    return sorted(segments, key=lambda m: m.start_offset), sizes


def check_bucket(segments: list[RemoteLogSegmentMetadata], sizes: dict[str, int],
                 local: list[tuple[int, int]]) -> None:
    """The bucket holds every closed segment: remote segments run from offset 0 without gap or
    overlap up to the active local segment, each complete (its files there, the .log of the size
    its metadata says), and every closed local segment starts where a remote one does."""
    assert segments and segments[0].start_offset == 0, f"remote segments start at {segments[:1]}"
    for before, after in zip(segments, segments[1:]):
        assert after.start_offset == before.end_offset + 1, \
            f"remote gap or overlap: [{before.start_offset}, {before.end_offset}] then [{after.start_offset}, …]"
    active = local[-1][0]
    assert segments[-1].end_offset + 1 == active, \
        f"remote segments end at {segments[-1].end_offset}, the active local segment starts at {active}"
    starts = {m.start_offset for m in segments}
    missing_local = [base for base, _ in local[:-1] if base not in starts]
    assert not missing_local, f"closed local segments not in the bucket: {missing_local}"
    for m in segments:
        assert m.state == COPY_SEGMENT_FINISHED, f"{m.key('.metadata')}: {m.state}"
        absent = [k for k in m.data_keys() if k not in sizes]
        assert not absent, f"objects missing: {absent}"
        assert sizes[m.key(".log")] == m.segment_size_in_bytes, f"{m.key('.log')}: size {sizes[m.key('.log')]}"


BATCH = re.compile(r"^baseOffset: (\d+) lastOffset: (\d+) .* isvalid: (\w+)$")


def dump_remote_logs(endpoint: str, bucket: str, segments: list[RemoteLogSegmentMetadata],
                     per_call: int = 16) -> int:
    """Run `logbroker dump-log s3://…` on each segment's .log (`per_call` to a command) and check
    its batches: valid, contiguous, from the segment's start to its end offset. Returns batches."""
    cli = str(Path(sys.executable).with_name("logbroker"))
    batches = 0
    for first in range(0, len(segments), per_call):
        group = segments[first:first + per_call]
        urls = [f"s3://{bucket}/{m.key('.log')}" for m in group]
        done = subprocess.run([cli, "dump-log", "--s3-endpoint", endpoint, *urls],
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0 and not done.stderr.strip(), \
            f"dump-log exit {done.returncode}: {done.stderr.strip()[:500]}"
        parts = done.stdout.split("Dumping ")[1:]
        assert len(parts) == len(group), f"dump-log dumped {len(parts)} of {len(group)} files"
        for m, text in zip(group, parts):
            found = [BATCH.match(line) for line in text.splitlines()[1:]]
            other = [line for line, f in zip(text.splitlines()[1:], found)
                     if f is None and not line.startswith("Log starting offset")]
            assert not other, f"{m.key('.log')}: dump-log printed {other[:3]}"
            spans = [(int(f.group(1)), int(f.group(2))) for f in found if f]
            assert all(f.group(3) == "true" for f in found if f), f"{m.key('.log')}: an invalid batch"
            assert spans and spans[0][0] == m.start_offset and spans[-1][1] == m.end_offset, \
                f"{m.key('.log')}: batches {spans[:1]}…{spans[-1:]} for [{m.start_offset}, {m.end_offset}]"
            assert all(b[0] == a[1] + 1 for a, b in zip(spans, spans[1:])), f"{m.key('.log')}: offsets not contiguous"
            batches += len(spans)
    return batches
