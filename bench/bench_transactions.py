"""Transactional produce: a confluent-kafka transactional producer committing every
100 ms against the idempotent producer, 1 KiB records, one broker, one 3-partition topic.

    .venv/bin/python bench/bench_transactions.py [--seconds 15] [--reps 3]

Each rep runs each producer for `--seconds`, as fast as librdkafka takes records
(linger.ms=5, acks=all, the broker's defaults), and counts the records acknowledged — for the
transactional one, those of committed transactions. Reported: the median records/s of each and
their ratio (the goal is ≥ 0.8), and the LSO lag under that load: every 20 ms during the
transactional runs, high watermark minus last stable offset summed over the partitions (ListOffsets
latest under READ_UNCOMMITTED and READ_COMMITTED), in records and in MiB.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

from common import machine_info, median, say, table
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
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


class LsoLagSampler(threading.Thread):
    """Samples high watermark minus last stable offset, summed over the topic's partitions."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        super().__init__(daemon=True)
        self._consumers = {level: Consumer({"bootstrap.servers": bootstrap, "group.id": f"lso-{level}",
                                            "isolation.level": level})
                           for level in ("read_uncommitted", "read_committed")}
        self._tps = [CkTopicPartition(topic, p) for p in range(partitions)]
        self.samples: list[int] = []
        self.stop = threading.Event()

    def _end(self, level: str) -> int:
        return sum(self._consumers[level].get_watermark_offsets(tp, timeout=5)[1] for tp in self._tps)

    def run(self) -> None:
        while not self.stop.wait(0.02):
            self.samples.append(self._end("read_uncommitted") - self._end("read_committed"))
        for consumer in self._consumers.values():
            consumer.close()


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
            lags: list[int] = []
            for _ in range(args.reps):
                for name in results:
                    sampler = LsoLagSampler(broker.bootstrap, "bench-txn", 3) if name == "transactional" else None
                    if sampler is not None:
                        sampler.start()
                    results[name].append(run(broker.bootstrap, "bench-txn", args.seconds,
                                             transactional=name == "transactional"))
                    if sampler is not None:
                        sampler.stop.set()
                        sampler.join()
                        lags.extend(sampler.samples)
    idem, txn = median(results["idempotent"]), median(results["transactional"])
    say(table(["producer", "records/s (median)", "MiB/s", "runs"],
              [[name, f"{median(v):,.0f}", f"{median(v) / 1024:.1f}", " ".join(f"{x:,.0f}" for x in v)]
               for name, v in results.items()]))
    say(f"transactional / idempotent: {txn / idem:.2f}")
    lags.sort()
    if lags:
        p50, p99 = lags[len(lags) // 2], lags[min(len(lags) - 1, len(lags) * 99 // 100)]
        say(f"LSO lag under load ({len(lags)} samples, records): p50 {p50:,}, p99 {p99:,}, max {lags[-1]:,} "
            f"(p99 {p99 * len(VALUE) / 2**20:.1f} MiB)")


if __name__ == "__main__":
    main()
