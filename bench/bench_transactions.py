"""Transactional produce (issue 12): a confluent-kafka transactional producer committing every
100 ms against the idempotent producer, 1 KiB records, one broker, one 3-partition topic.

    .venv/bin/python bench/bench_transactions.py [--seconds 15] [--reps 3]

Each rep runs each producer for `--seconds`, as fast as librdkafka takes records
(linger.ms=5, acks=all, the broker's defaults), and counts the records acknowledged — for the
transactional one, those of committed transactions. Reported: the median records/s of each and
their ratio (the issue asks for ≥ 0.8).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from common import machine_info, median, say, table
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
from logbroker.testing import TEST_OVERRIDES, BrokerProcess  # noqa: E402

VALUE = b"x" * 1024
COMMIT_EVERY_S = 0.1


def run(bootstrap: str, topic: str, seconds: float, *, transactional: bool) -> float:
    config = {"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all", "enable.idempotence": True,
              "queue.buffering.max.messages": 200_000}
    if transactional:
        config["transactional.id"] = f"bench-{time.monotonic_ns()}"
    producer = Producer(config)
    delivered = 0

    def on_delivery(err, _msg) -> None:
        nonlocal delivered
        if err is None:
            delivered += 1
    if transactional:
        producer.init_transactions(30)
        producer.begin_transaction()
    start = time.monotonic()
    next_commit = start + COMMIT_EVERY_S
    committed = 0
    while (now := time.monotonic()) < start + seconds:
        try:
            producer.produce(topic, VALUE, on_delivery=on_delivery)
        except BufferError:
            producer.poll(0.001)
        producer.poll(0)
        if transactional and now >= next_commit:
            producer.commit_transaction(30)
            committed = delivered
            producer.begin_transaction()
            next_commit = now + COMMIT_EVERY_S
    if transactional:
        producer.commit_transaction(30)
        committed = delivered
    else:
        producer.flush(30)
        committed = delivered
    return committed / (time.monotonic() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-txn-") as tmp:
        say(*machine_info(tmp).lines())
        with BrokerProcess(Path(tmp), overrides=TEST_OVERRIDES) as broker:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            admin.create_topics([NewTopic("bench-txn", num_partitions=3)])["bench-txn"].result(30)
            results = {"idempotent": [], "transactional": []}
            for _ in range(args.reps):
                for name in results:
                    results[name].append(run(broker.bootstrap, "bench-txn", args.seconds,
                                             transactional=name == "transactional"))
    idem, txn = median(results["idempotent"]), median(results["transactional"])
    say(table(["producer", "records/s (median)", "MiB/s", "runs"],
              [[name, f"{median(v):,.0f}", f"{median(v) / 1024:.1f}", " ".join(f"{x:,.0f}" for x in v)]
               for name, v in results.items()]))
    say(f"transactional / idempotent: {txn / idem:.2f}")


if __name__ == "__main__":
    main()
