"""Share groups (KIP-932): records per second through 1, 2 and 4 confluent-kafka
ShareConsumers sharing one partition.

    .venv/bin/python bench/bench_share_groups.py            # 100,000 records of 100 bytes, 3 runs
    .venv/bin/python bench/bench_share_groups.py --quick    # 30,000 records, 1 run

One broker (a `logbroker serve` subprocess, default config), one topic of one partition filled
first; then per case a new share group (share.auto.offset.reset=earliest) whose K consumers (each
polling in its own thread, implicit acknowledgement: each poll accepts the previous poll's
records) read until every record arrived once. Reported: records/s from the first poll to the last
record, the broker's CPU seconds per 100,000 records (utime + stime from /proc), and how many
records arrived more than once (redeliveries; should be 0: nobody crashes, locks are 30 s).
Every acknowledgement is written to `__share_group_state` (acks=-1, a snapshot of the window)
before it is answered, which is the cost this measures beside acquisition.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import machine_info, median, say, table  # noqa: E402
import confluent_kafka as ck  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from logbroker.testing import BrokerProcess  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")


def proc_cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def fill(bootstrap: str, topic: str, count: int, size: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result()
    producer = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 256 * 1024})
    value = b"x" * size
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, value=value, partition=0)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0


def earliest(bootstrap: str, group: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result()


def run_case(bootstrap: str, topic: str, count: int, consumers: int, broker_pid: int) -> dict:
    group = f"bench-{uuid.uuid4().hex[:8]}"
    earliest(bootstrap, group)
    seen: dict[int, int] = {}
    lock = threading.Lock()
    done = threading.Event()
    first_poll: list[float] = []
    last_record = [0.0]

    def consume() -> None:
        consumer = ck.ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
        consumer.subscribe([topic])
        with lock:
            first_poll.append(time.monotonic())
        while not done.is_set():
            batch = consumer.poll(0.5)
            messages = [] if batch is None else list(batch) if not hasattr(batch, "offset") else [batch]
            with lock:
                if done.is_set():
                    break  # what comes after the last record is another member's unacknowledged tail
                for m in messages:
                    if m.error() is None:
                        seen[m.offset()] = seen.get(m.offset(), 0) + 1
                if len(seen) >= count and not done.is_set():
                    last_record[0] = time.monotonic()
                    done.set()
        consumer.close()

    cpu_before = proc_cpu_s(broker_pid)
    threads = [threading.Thread(target=consume) for _ in range(consumers)]
    for t in threads:
        t.start()
    done.wait(300)
    cpu_after = proc_cpu_s(broker_pid)
    for t in threads:
        t.join(30)
    elapsed = last_record[0] - min(first_poll)
    return {"consumers": consumers, "records": len(seen), "elapsed_s": elapsed,
            "records_per_s": len(seen) / elapsed if elapsed > 0 else 0.0,
            "broker_cpu_s_per_100k": (cpu_after - cpu_before) * 100_000 / max(len(seen), 1),
            "redelivered": sum(n - 1 for n in seen.values())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--size", type=int, default=100)
    args = parser.parse_args()
    count, reps = (30_000, 1) if args.quick else (100_000, 3)
    root = Path(tempfile.mkdtemp(prefix="bench-share-"))
    machine = machine_info(root)
    broker = BrokerProcess(root / "broker", overrides={"group.initial.rebalance.delay.ms": "0"}).start()
    try:
        topic = "queue"
        say(f"filling {topic} with {count:,} records of {args.size} bytes")
        fill(broker.bootstrap, topic, count, args.size)
        results = []
        for rep in range(reps):
            for consumers in (1, 2, 4):
                result = run_case(broker.bootstrap, topic, count, consumers, broker.process.pid)
                say(f"run {rep + 1}: {consumers} consumer(s): {result['records_per_s']:,.0f} records/s, "
                    f"{result['redelivered']} redelivered")
                results.append(result)
    finally:
        broker.stop()
    print(f"machine: {machine}")
    rows = []
    for consumers in (1, 2, 4):
        runs = [r for r in results if r["consumers"] == consumers]
        rows.append((consumers, f"{count:,}", f"{median([r['records_per_s'] for r in runs]):,.0f}",
                     " / ".join(f"{r['records_per_s']:,.0f}" for r in runs),
                     f"{median([r['broker_cpu_s_per_100k'] for r in runs]):.2f}",
                     sum(r["redelivered"] for r in runs)))
    print(table(("consumers", "records", "records/s (median)", "runs", "broker CPU-s per 100k", "redelivered"),
                rows))


if __name__ == "__main__":
    main()
