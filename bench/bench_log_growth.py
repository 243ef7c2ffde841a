"""What grows with the log: broker memory against aborted transactions, and the time from a
kill -9 to serving against the active segment's size. Real `logbroker serve` subprocesses.

    .venv/bin/python bench/bench_log_growth.py rss [--aborted 1000,10000,100000] [--src A --src B]
    .venv/bin/python bench/bench_log_growth.py recovery [--mib 64,256,1024] [--src A --src B]
    .venv/bin/python bench/bench_log_growth.py tracemalloc [--aborted 100000]

`rss`: a one-partition topic whose log holds N aborted transactions and N/10 committed ones
(5 producers taking turns, one 100-byte record per transaction, then its marker), written with the
storage API while the broker is stopped. The broker is started on it (clean shutdown), a
confluent-kafka read_committed consumer reads the partition from the start to its end (every
.txnindex entry is needed once), and the broker's VmRSS / RssAnon are read 1 s later.

`recovery`: a one-partition topic whose single, active segment holds S MiB of ~1 KiB batches
(5 idempotent producers), appended with the storage API as the broker appends them — with the
recovery checkpoints the broker takes as the segment grows, when the source tree has them — and
then abandoned without closing anything (what kill -9 leaves: the page cache, no clean-shutdown
marker). Each run copies that directory, starts the broker on the copy and measures the time
from spawn to a broker that answers Metadata and returns the partition's last record to a fetch,
and the broker's CPU seconds when it starts listening (what a busy machine does not inflate).
The floor: reading the segment file with dd (page cache warm), nothing of ours.

`tracemalloc`: in one process, the log of `rss` opened with `Log.open` and read whole under
read_committed; the allocations still alive afterwards, by line (what grows).

`--src` runs the broker from another source tree (PYTHONPATH), for before/after; the logs are
written with this tree (the formats are Kafka's, the same for both).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_broker import proc_cpu_s, proc_mem_mib  # noqa: E402
from common import dd_read, machine_info, median, say, table  # noqa: E402

from logbroker.clock import SystemClock  # noqa: E402
from logbroker.records.builder import build_batch  # noqa: E402
from logbroker.records.control import build_end_txn_marker_batch  # noqa: E402
from logbroker.storage.checkpoints import OffsetCheckpointFile  # noqa: E402
from logbroker.storage.log import Log  # noqa: E402
from logbroker.storage.log_config import LogConfig  # noqa: E402
from logbroker.testing import BrokerProcess  # noqa: E402
from logbroker.types import TopicPartition  # noqa: E402

TOPIC = "growth"
PRODUCERS = 5


def create_topic(root: Path) -> BrokerProcess:
    """A broker dir holding the empty one-partition topic, the broker stopped."""
    broker = BrokerProcess(root, overrides={"num.partitions": "1"}).start()
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(15)
    del admin
    broker.stop()
    return broker


def write_txns(partition_dir: Path, aborted: int) -> tuple[int, int]:
    """`aborted` aborted transactions and one committed after every 10th; (committed records,
    log bytes)."""
    log = Log.open(partition_dir, LogConfig.defaults(), clock=SystemClock(), had_clean_shutdown=True)
    seqs = [0] * PRODUCERS
    now = SystemClock().time_ms()
    committed = 0
    total = aborted + aborted // 10
    for i in range(total):
        pid = 1000 + i % PRODUCERS
        batch = build_batch([(None, b"v" * 100)], producer_id=pid, producer_epoch=0,
                            base_sequence=seqs[pid - 1000], transactional=True, now_ms=now)
        seqs[pid - 1000] += 1
        log.append_as_leader(bytearray(batch), leader_epoch=0)
        commit = i % 11 == 10
        committed += commit
        log.append_as_leader(build_end_txn_marker_batch(
            commit=commit, producer_id=pid, producer_epoch=0, coordinator_epoch=0, timestamp_ms=now),
            leader_epoch=0, is_from_client=False)
        log.update_high_watermark(log.log_end_offset)  # as a leader alone in its ISR: the
        # completed transactions leave the producer state's list of unreplicated ones
    size = log.size_in_bytes
    log.flush()
    log.close()
    return committed, size


def consume_to_end(bootstrap: str, expected: int | None, *, start_offset: int | None = None,
                   timeout_s: float = 300) -> int:
    """Read the partition under read_committed from `start_offset` (else the beginning) until
    `expected` records came (or, with None, the first one). Returns how many came."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition as KTP

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "fetch.wait.max.ms": 100,
                         "topic.metadata.refresh.interval.ms": 100})
    try:
        consumer.assign([KTP(TOPIC, 0, OFFSET_BEGINNING if start_offset is None else start_offset)])
        got = 0
        deadline = time.monotonic() + timeout_s
        while (got < expected if expected is not None else got == 0):
            for msg in consumer.consume(10_000, timeout=0.2):
                if msg.error() is None:
                    got += 1
            if time.monotonic() > deadline:
                raise RuntimeError(f"{got} of {expected} records after {timeout_s} s")
        return got
    finally:
        consumer.close()


def use_src(src: str | None) -> None:
    if src:
        os.environ["PYTHONPATH"] = src
    else:
        os.environ.pop("PYTHONPATH", None)


def bench_rss(args, root: Path) -> None:
    rows = []
    for n in args.aborted:
        base = root / f"rss-{n}"
        broker = create_topic(base)
        committed, size = write_txns(broker.data_dir / f"{TOPIC}-0", n)
        for src in args.src or [None]:
            use_src(src)
            broker.start()
            try:
                idle = proc_mem_mib(broker.process.pid)
                consume_to_end(broker.bootstrap, committed)
                time.sleep(1.0)
                mem = proc_mem_mib(broker.process.pid)
            finally:
                broker.stop()
            say(f"{n} aborted, {src or 'this tree'}: {mem}")
            rows.append([f"{n:,}", f"{size / 1e6:.1f}", src or "this tree", f"{idle['VmRSS']:.1f}",
                         f"{mem['VmRSS']:.1f}", f"{mem['RssAnon']:.1f}"])
        use_src(None)
        shutil.rmtree(base, ignore_errors=True)
    say(table(["aborted txns", "log MB", "tree", "VmRSS at start (MiB)",
               "VmRSS after read_committed read (MiB)", "RssAnon after (MiB)"], rows))


def write_active_segment(partition_dir: Path, mib: int, log_dir: Path) -> tuple[int, int]:
    """Append ~1 KiB idempotent batches until the active segment holds `mib` MiB, taking the
    broker's recovery checkpoints when this tree has them, then abandon the log as kill -9
    would. (batches, last offset)."""
    config = LogConfig.defaults()
    log = Log.open(partition_dir, config, clock=SystemClock(), had_clean_shutdown=True)
    tp = TopicPartition(TOPIC, 0)
    seqs = [0] * PRODUCERS
    value = b"x" * 940
    target = min(mib * 1024 * 1024, config.segment_bytes - 4096)  # full, not rolled
    batches = 0
    checkpoints = 0
    while log.active_segment.size < target:
        pid = 1000 + batches % PRODUCERS
        batch = build_batch([(None, value)], producer_id=pid, producer_epoch=0,
                            base_sequence=seqs[pid - 1000], now_ms=SystemClock().time_ms())
        seqs[pid - 1000] += 1
        log.append_as_leader(bytearray(batch), leader_epoch=0)
        batches += 1
        if getattr(log, "recovery_checkpoint_due", lambda: False)() and log.checkpoint_active_segment():
            OffsetCheckpointFile(log_dir / "recovery-point-offset-checkpoint").write({tp: log.recovery_point})
            checkpoints += 1
    assert len(log.segments) == 1, "the segment rolled"
    say(f"wrote {mib} MiB: {batches} batches, {checkpoints} recovery checkpoints, recovery point "
        f"{log.recovery_point} of {log.log_end_offset}")
    last = log.log_end_offset - 1
    log.close_handles()
    (log_dir / ".kafka_cleanshutdown").unlink(missing_ok=True)
    return batches, last


def time_to_serving(broker: BrokerProcess, last_offset: int) -> tuple[float, float, float]:
    """(spawn → 'started' line, the broker's CPU seconds then, spawn → the last record
    fetched), seconds. The CPU seconds are what a loaded machine cannot inflate."""
    t0 = time.monotonic()
    broker.start()
    started = time.monotonic() - t0
    cpu = proc_cpu_s(broker.process.pid)
    consume_to_end(broker.bootstrap, None, start_offset=last_offset, timeout_s=600)
    return started, cpu, time.monotonic() - t0


def bench_recovery(args, root: Path) -> None:
    rows = []
    for mib in args.mib:
        base = root / f"rec-{mib}"
        broker = create_topic(base)
        written = base / "written"
        t0 = time.monotonic()
        batches, last = write_active_segment(broker.data_dir / f"{TOPIC}-0", mib, broker.data_dir)
        say(f"  (written in {time.monotonic() - t0:.0f} s)")
        shutil.copytree(broker.data_dir, written)
        segment = next((written / f"{TOPIC}-0").glob("*.log"))
        floor = median([dd_read(segment) for _ in range(3)])
        for src in args.src or [None]:
            use_src(src)
            for _ in range(args.runs):
                shutil.rmtree(broker.data_dir)
                shutil.copytree(written, broker.data_dir)
                try:
                    started, cpu, serving = time_to_serving(broker, last)
                    text = broker.new_log_text()
                finally:
                    broker.kill()
                replayed = [line.split(": ", 2)[-1] for line in text.splitlines() if "Recovered segment" in line]
                say(f"{mib} MiB, {src or 'this tree'}: started {started:.2f} s, serving {serving:.2f} s; {replayed}")
                rows.append([mib, f"{batches:,}", src or "this tree", f"{started:.2f}", f"{cpu:.2f}", f"{serving:.2f}",
                             f"{floor:.2f}", "; ".join(replayed) or "(no recovery line)"])
        use_src(None)
        shutil.rmtree(base, ignore_errors=True)
    say(table(["active segment MiB", "batches", "tree", "spawn → started (s)", "broker CPU-s then",
               "spawn → last record fetched (s)", "floor: dd of the segment (s)", "recovery"], rows))


def bench_tracemalloc(args, root: Path) -> None:
    import tracemalloc

    n = args.aborted[-1]
    directory = root / f"{TOPIC}-0"
    committed, size = write_txns(directory, n)
    tracemalloc.start(5)
    before = tracemalloc.take_snapshot()
    log = Log.open(directory, LogConfig.defaults(), clock=SystemClock(), had_clean_shutdown=True)
    log.update_high_watermark(log.log_end_offset)
    lso = log.last_stable_offset
    aborted = 0
    for offset in range(0, lso, max(1, lso // 500)):  # fetches spread over the whole log
        info = log.read(offset, max_bytes=64 * 1024, max_offset=lso, include_aborted_txns=True)
        aborted += len(info.aborted_transactions or ())
    after = tracemalloc.take_snapshot()
    stats = after.compare_to(before, "lineno")
    say(f"{n} aborted transactions, {size / 1e6:.1f} MB log; {aborted} aborted ranges returned")
    say(table(["allocated by", "KiB alive", "blocks"],
              [[str(s.traceback[0]), f"{s.size / 1024:.0f}", s.count] for s in stats[:8]]))
    log.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["rss", "recovery", "tracemalloc"])
    parser.add_argument("--aborted", default="1000,10000,100000")
    parser.add_argument("--mib", default="64,256,1024")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--src", action="append", default=[], help="logbroker source tree (repeatable)")
    args = parser.parse_args(argv)
    args.aborted = [int(x) for x in args.aborted.split(",")]
    args.mib = [int(x) for x in args.mib.split(",")]
    with tempfile.TemporaryDirectory(prefix="bench-growth-") as tmp:
        root = Path(tmp)
        say(f"## {args.what}")
        for line in machine_info(root).lines():
            say(line)
        {"rss": bench_rss, "recovery": bench_recovery, "tracemalloc": bench_tracemalloc}[args.what](args, root)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
