"""Log cleaner benchmark: cleaning throughput, and produce latency while a broker cleans.

    .venv/bin/python bench/bench_cleaner.py [--size-mb 256] [--rate 500] [--dir PARENT]

1. Throughput, in process: a compacted log of ~size-mb (records of a 12-byte key and a 100-byte
   value, 200 per batch, uncompressed; each key written 10 times, so 10% of the records are
   live), rolled so that all of it is cleanable, then one `LogCleaner.clean_logs` round timed.
   MB/s = bytes of the log before cleaning / seconds (the dedupe pass and the rewrite both read
   it, so the disk sees about twice that).
2. Produce p99 while cleaning: the same log is written into a stopped broker's data dir as topic
   `compacted` (cleanup.policy=compact); the broker starts with the cleaner off, and
   confluent-kafka produces 100-byte records to another topic at a fixed rate (acks=1,
   linger.ms=0) for the baseline; then the broker restarts with the cleaner on
   (log.cleaner.backoff.ms=1000) and the same load runs until the cleaner has logged its round.
   Latency = produce() call to delivery report.
Prints Markdown (machine, tables) for docs/benchmarks.md; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import machine_info, percentile, say, table  # noqa: E402

from logbroker.clock import SystemClock  # noqa: E402
from logbroker.records.builder import build_batch  # noqa: E402
from logbroker.storage.checkpoints import (  # noqa: E402
    RECOVERY_POINT_CHECKPOINT_FILE,
    REPLICATION_OFFSET_CHECKPOINT_FILE,
    OffsetCheckpointFile,
)
from logbroker.storage.cleaner_manager import LogCleaner  # noqa: E402
from logbroker.storage.log import Log  # noqa: E402
from logbroker.storage.log_config import LogConfig  # noqa: E402
from logbroker.testing import BrokerProcess  # noqa: E402
from logbroker.types import TopicPartition  # noqa: E402

RECORDS_PER_BATCH = 200
VALUE = b"v" * 100
COMPACT = {"cleanup.policy": "compact", "segment.bytes": str(64 << 20),
           "min.cleanable.dirty.ratio": "0.5"}


def write_log(directory: Path, size_bytes: int) -> tuple[Log, int]:
    """A compacted log of about `size_bytes`, every key written 10 times; returns (log, records)."""
    config = LogConfig.defaults().with_overrides(COMPACT)
    lg = Log.open(directory, config, clock=SystemClock(), had_clean_shutdown=True)
    record_size = 12 + len(VALUE) + 10
    total = size_bytes // record_size // RECORDS_PER_BATCH * RECORDS_PER_BATCH
    keys = total // 10
    now = int(time.time() * 1000) - 3_600_000
    for start in range(0, total, RECORDS_PER_BATCH):
        records = [(b"key-%08d" % ((start + i) % keys), VALUE, (), now)
                   for i in range(RECORDS_PER_BATCH)]
        lg.append_as_leader(bytearray(build_batch(records)), leader_epoch=0)
    lg.roll()
    lg.update_high_watermark(lg.log_end_offset)
    lg.flush()
    return lg, total


def bench_throughput(parent: Path, size_mb: int) -> list[list[str]]:
    work = Path(tempfile.mkdtemp(prefix="bench-cleaner-", dir=parent))
    try:
        say(f"writing a {size_mb} MiB compacted log ...")
        lg, total = write_log(work / "compacted-0", size_mb << 20)
        size = lg.size_in_bytes
        say(f"cleaning {size / 1e6:.0f} MB ({total} records) ...")
        cleaner = LogCleaner()
        started = time.monotonic()
        results = cleaner.clean_logs([lg], int(time.time() * 1000))
        elapsed = time.monotonic() - started
        stats = results[0].stats
        after = lg.size_in_bytes
        lg.close()
        return [[f"{size / 1e6:,.0f}", f"{total:,}", f"{after / 1e6:,.1f}",
                 f"{stats.records_retained:,}", f"{elapsed:.1f} s", f"{size / 1e6 / elapsed:.1f} MB/s"]]
    finally:
        shutil.rmtree(work, ignore_errors=True)


def produce_at_rate(bootstrap: str, topic: str, rate: int, stop: threading.Event,
                    max_s: float) -> list[float]:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": 1})
    producer.list_topics(topic, timeout=10)
    latencies: list[float] = []

    def on_delivery(sent: float, err, _msg) -> None:
        if err is None:
            latencies.append(time.monotonic() - sent)

    interval = 1.0 / rate
    started = next_at = time.monotonic()
    while not stop.is_set() and time.monotonic() - started < max_s:
        now = time.monotonic()
        if now < next_at:
            time.sleep(min(next_at - now, 0.005))
            producer.poll(0)
            continue
        producer.produce(topic, value=VALUE, on_delivery=lambda e, m, s=now: on_delivery(s, e, m))
        producer.poll(0)
        next_at += interval
    producer.flush(10)
    return sorted(latencies)


def bench_latency(parent: Path, size_mb: int, rate: int, baseline_s: float) -> list[list[str]]:
    from confluent_kafka.admin import AdminClient, NewTopic

    work = Path(tempfile.mkdtemp(prefix="bench-cleaner-broker-", dir=parent))
    rows = []
    try:
        broker = BrokerProcess(work, overrides={"log.cleaner.enable": "false"}).start()
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for name, config in (("compacted", COMPACT), ("latency", {})):
            admin.create_topics([NewTopic(name, 1, 1, config=config)])[name].result(10)
        del admin
        broker.stop()
        say(f"writing a {size_mb} MiB log into the broker's data dir ...")
        lg, _ = write_log(broker.data_dir / "compacted-0", size_mb << 20)
        end = lg.log_end_offset
        lg.close()
        tp = TopicPartition("compacted", 0)
        for name, value in ((RECOVERY_POINT_CHECKPOINT_FILE, end), (REPLICATION_OFFSET_CHECKPOINT_FILE, end)):
            checkpoint = OffsetCheckpointFile(broker.data_dir / name)
            offsets = checkpoint.read()
            offsets[tp] = value
            checkpoint.write(offsets)

        broker.start()
        say(f"baseline: {rate} records/s for {baseline_s:.0f} s, cleaner off ...")
        base = produce_at_rate(broker.bootstrap, "latency", rate, threading.Event(), baseline_s)
        broker.stop()

        broker.overrides.update({"log.cleaner.enable": "true", "log.cleaner.backoff.ms": "1000"})
        broker.start()
        stop = threading.Event()
        cleaned = {}

        def watch() -> None:
            while not stop.is_set():
                match = re.search(r"Cleaned compacted-0: .* in ([\d.]+) s \(([\d.]+) MB/s\)",
                                  broker.new_log_text())
                if match:
                    cleaned["s"], cleaned["mbps"] = float(match.group(1)), float(match.group(2))
                    stop.set()
                time.sleep(0.2)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        say(f"cleaning: {rate} records/s until the cleaner's round ends ...")
        during = produce_at_rate(broker.bootstrap, "latency", rate, stop, 600)
        stop.set()
        broker.stop()
        for label, lat in (("cleaner off", base), (f"while cleaning ({cleaned.get('s', '?')} s, "
                                                    f"{cleaned.get('mbps', '?')} MB/s)", during)):
            rows.append([label, f"{len(lat):,}", f"{percentile(lat, 50) * 1000:.2f} ms",
                         f"{percentile(lat, 99) * 1000:.2f} ms", f"{percentile(lat, 99.9) * 1000:.2f} ms",
                         f"{lat[-1] * 1000:.2f} ms"])
        return rows
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=256)
    parser.add_argument("--rate", type=int, default=500, help="produce rate, records/s")
    parser.add_argument("--baseline-s", type=float, default=15.0)
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--no-broker", action="store_true", help="skip the produce-latency part")
    args = parser.parse_args()
    print("## Log cleaner\n")
    print("\n".join(machine_info(args.dir).lines()))
    print()
    rows = bench_throughput(args.dir, args.size_mb)
    print(table(["log MB", "records", "after MB", "records kept", "clean time", "throughput"], rows))
    print()
    if not args.no_broker:
        rows = bench_latency(args.dir, args.size_mb, args.rate, args.baseline_s)
        print(f"Produce latency, {args.rate} records/s of 100 B, acks=1, linger.ms=0, "
              f"one partition, beside a {args.size_mb} MiB compacted partition:\n")
        print(table(["phase", "records", "p50", "p99", "p99.9", "max"], rows))


if __name__ == "__main__":
    main()
