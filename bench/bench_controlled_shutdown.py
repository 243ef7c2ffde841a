"""Controlled shutdown: what a clean SIGTERM of a partition leader costs, with
controlled.shutdown.enable=true (leadership moved first) and false (the controller moves it once
the broker's ZooKeeper session has ended).

    .venv/bin/python bench/bench_controlled_shutdown.py            # ~1 minute
    .venv/bin/python bench/bench_controlled_shutdown.py --reps 5

Three `logbroker serve` processes and one ZooKeeper on loopback; a topic of 12 partitions, RF=3,
min.insync.replicas=2, so each broker leads about 4. An acks=all producer writes one record to
every partition each 10 ms (linger.ms=0). Broker 1 is stopped with SIGTERM; measured:

- shutdown: SIGTERM to process exit, and of it the controlled shutdown (the broker's own log line:
  fetchers stopped, the ControlledShutdown round trip, leadership moved);
- worst delivery: the longest produce()-to-acknowledgement time of any record produced from
  1 s before the SIGTERM on (the stall a producer sees while leadership moves);
- errors: delivery errors the producer saw (expected 0 either way).
"""

from __future__ import annotations

import argparse
import math
import re
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import machine_info, table  # noqa: E402
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from logbroker.testing import BrokerProcess  # noqa: E402
from logbroker.zookeeper_process import ZooKeeperProcess  # noqa: E402

PARTITIONS = 12


def start_brokers(base: Path, connect: str, enabled: bool) -> list[BrokerProcess]:
    overrides = {"zookeeper.connect": connect, "offsets.topic.replication.factor": "1",
                 "controlled.shutdown.enable": str(enabled).lower(),
                 "auto.leader.rebalance.enable": "false"}
    return [BrokerProcess(base / f"broker-{i}", overrides={**overrides, "broker.id": str(i)}).start()
            for i in (1, 2, 3)]


def fully_led(bootstrap: str) -> bool:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics("bench", timeout=10)
    topic = md.topics.get("bench")
    return (topic is not None and topic.error is None and len(topic.partitions) == PARTITIONS
            and all(p.leader > 0 and len(p.isrs) == 3 for p in topic.partitions.values()))


MOVED = re.compile(r"Controlled shutdown request returned successfully after (\d+) ms")


def one_run(base: Path, zookeeper: ZooKeeperProcess, enabled: bool) -> tuple[float, float, float, int]:
    connect = f"{zookeeper.connect_string}/bench-{uuid.uuid4().hex[:8]}"
    brokers = start_brokers(base / uuid.uuid4().hex[:8], connect, enabled)
    try:
        bootstrap = ",".join(b.bootstrap for b in brokers)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("bench", PARTITIONS, 3, config={"min.insync.replicas": "2"})])["bench"].result(30)
        deadline = time.monotonic() + 60
        while not fully_led(bootstrap):
            if time.monotonic() > deadline:
                raise RuntimeError("the topic did not get leaders within 60 s")
            time.sleep(0.2)
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                             "enable.idempotence": False})
        latencies: list[tuple[float, float]] = []  # (produced at, latency)
        errors: list = []
        stop = threading.Event()

        def delivered(sent: float):
            def callback(err, _msg):
                (errors.append(err) if err is not None
                 else latencies.append((sent, time.monotonic() - sent)))
            return callback

        def produce() -> None:
            while not stop.is_set():
                for partition in range(PARTITIONS):
                    producer.produce("bench", b"x" * 100, partition=partition,
                                     on_delivery=delivered(time.monotonic()))
                producer.poll(0.01)
            producer.flush(60)

        thread = threading.Thread(target=produce, daemon=True)
        thread.start()
        time.sleep(2)
        signalled = time.monotonic()
        brokers[0].stop(timeout_s=120)
        shutdown_s = time.monotonic() - signalled
        time.sleep(3)
        stop.set()
        thread.join(90)
        worst = max((lat for sent, lat in latencies if sent >= signalled - 1), default=float("nan"))
        moved = MOVED.search(brokers[0].new_log_text())
        return shutdown_s, int(moved.group(1)) / 1000 if moved else float("nan"), worst, len(errors)
    finally:
        for broker in brokers:
            broker.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-cs-") as tmp:
        base = Path(tmp)
        print("\n".join(machine_info(base).lines()))
        with ZooKeeperProcess(base / "zookeeper") as zookeeper:
            results: dict[bool, list[tuple[float, float, float, int]]] = {True: [], False: []}
            for rep in range(args.reps):
                for enabled in (True, False):
                    print(f"rep {rep + 1}, controlled.shutdown.enable={enabled}", file=sys.stderr)
                    results[enabled].append(one_run(base, zookeeper, enabled))
    rows = []
    for enabled, runs in results.items():
        row = [str(enabled).lower()]
        for column in range(3):
            values = [r[column] * 1000 for r in runs]
            if all(math.isnan(v) for v in values):  # no controlled shutdown, nothing moved
                row += ["-", "-"]
                continue
            row += [f"{statistics.median(values):.0f} ms", ", ".join(f"{v:.0f}" for v in values)]
        rows.append(row + [str(sum(r[3] for r in runs))])
    print(table(["controlled.shutdown.enable", "shutdown (median)", "each run (ms)",
                 "of it moving leadership", "each run (ms)", "worst delivery (median)",
                 "each run (ms)", "delivery errors"], rows))


if __name__ == "__main__":
    main()
