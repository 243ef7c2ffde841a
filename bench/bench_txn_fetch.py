"""read_committed vs read_uncommitted fetch: a real `logbroker serve` subprocess, a
one-partition topic holding transactions of which 10% are aborted, read back whole by
confluent-kafka's consumer under each isolation level.

    .venv/bin/python bench/bench_txn_fetch.py            # ~200 MB log, 3 runs per level
    .venv/bin/python bench/bench_txn_fetch.py --quick    # ~50 MB, 2 runs per level

The log is written with the storage API while the broker is stopped (5 producers taking turns,
one transactional batch of 100 records of 1 KiB per transaction, then its COMMIT or ABORT marker;
every 10th transaction aborted), then the broker is started on it. Each run assigns the
partition at the beginning and consumes until the consumer reaches the log end: it gets every
record under read_uncommitted, the committed 90% under read_committed — the broker sends the
same bytes either way (records leave through sendfile untouched) plus the aborted_transactions
list under read_committed, which the client filters with. Reported: log MB/s (the whole log over
the wall time), and the broker's CPU seconds per GB of log. Runs are interleaved; medians.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import machine_info, median, say, table  # noqa: E402

from logbroker.clock import SystemClock  # noqa: E402
from logbroker.records.builder import build_batch  # noqa: E402
from logbroker.records.control import build_end_txn_marker_batch  # noqa: E402
from logbroker.storage.log import Log  # noqa: E402
from logbroker.storage.log_config import LogConfig  # noqa: E402
from logbroker.testing import BrokerProcess  # noqa: E402

TOPIC = "txn-bench"
PRODUCERS = 5
RECORDS_PER_TXN = 100
VALUE = b"x" * 1024
CLK_TCK = 100


def proc_cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def write_log(partition_dir: Path, transactions: int) -> tuple[int, int, int]:
    """(records, committed records, log bytes) after writing the transactions."""
    log = Log.open(partition_dir, LogConfig.defaults(), clock=SystemClock(), had_clean_shutdown=True)
    seqs = [0] * PRODUCERS
    committed = 0
    now = SystemClock().time_ms()
    for i in range(transactions):
        pid = 1000 + i % PRODUCERS
        batch = build_batch([(None, VALUE)] * RECORDS_PER_TXN, producer_id=pid, producer_epoch=0,
                            base_sequence=seqs[pid - 1000], transactional=True, now_ms=now)
        seqs[pid - 1000] += RECORDS_PER_TXN
        log.append_as_leader(bytearray(batch), leader_epoch=0)
        commit = i % 10 != 9
        committed += RECORDS_PER_TXN if commit else 0
        log.append_as_leader(build_end_txn_marker_batch(
            commit=commit, producer_id=pid, producer_epoch=0, coordinator_epoch=0, timestamp_ms=now),
            leader_epoch=0, is_from_client=False)
    size = log.size_in_bytes
    log.flush()
    log.close()
    return transactions * RECORDS_PER_TXN, committed, size


def consume_all(bootstrap: str, isolation: str, expected: int) -> float:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                         "isolation.level": isolation, "fetch.max.bytes": 64 << 20,
                         "max.partition.fetch.bytes": 16 << 20, "fetch.wait.max.ms": 100})
    try:
        consumer.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
        got = 0
        started = time.monotonic()
        while got < expected:
            for msg in consumer.consume(100_000, timeout=1.0):
                if msg.error() is None:
                    got += 1
            if time.monotonic() - started > 300:
                raise RuntimeError(f"{isolation}: {got} of {expected} records after 300 s")
        return time.monotonic() - started
    finally:
        consumer.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    transactions, reps = (500, 2) if args.quick else (2000, 3)
    with tempfile.TemporaryDirectory(prefix="bench-txn-") as tmp:
        root = Path(tmp)
        broker = BrokerProcess(root, overrides={"num.partitions": "1"}).start()
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(15)
        del admin
        broker.stop()
        records, committed, size = write_log(broker.data_dir / f"{TOPIC}-0", transactions)
        broker.start()
        pid = broker.process.pid
        results: dict[str, list[tuple[float, float]]] = {"read_uncommitted": [], "read_committed": []}
        try:
            consume_all(broker.bootstrap, "read_uncommitted", records)  # warm the page cache
            for _ in range(reps):
                for isolation, expected in (("read_uncommitted", records), ("read_committed", committed)):
                    cpu = proc_cpu_s(pid)
                    elapsed = consume_all(broker.bootstrap, isolation, expected)
                    results[isolation].append((elapsed, proc_cpu_s(pid) - cpu))
        finally:
            broker.stop()
        machine = machine_info(root)
    say(f"machine: {machine.nproc} cores, {machine.cpu_model}, {machine.kernel}, {machine.python}, "
        f"{machine.filesystem}; {machine.date_utc} UTC (shared, noisy)")
    say(f"log: {records} records in {transactions} transactions (10% aborted), {size / 1e6:.0f} MB")
    rows = []
    mbps = {}
    for isolation, runs in results.items():
        wall = median([r[0] for r in runs])
        cpu = median([r[1] for r in runs])
        mbps[isolation] = size / 1e6 / wall
        rows.append([isolation, f"{mbps[isolation]:.0f}", f"{cpu / (size / 1e9):.2f}",
                     ", ".join(f"{size / 1e6 / r[0]:.0f}" for r in runs)])
    say(table(["isolation", "log MB/s (median)", "broker CPU-s per GB", "runs (MB/s)"], rows))
    ratio = mbps["read_committed"] / mbps["read_uncommitted"]
    say(f"read_committed / read_uncommitted = {ratio:.2f} (goal >= 0.9)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
