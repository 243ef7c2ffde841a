"""What metrics cost: produce throughput with `metrics.port` set vs unset, and the hooks
timed alone.

    .venv/bin/python bench/bench_metrics.py            # ~1 minute
    .venv/bin/python bench/bench_metrics.py --quick

1. The hooks in-process, per call: the request wrapper (`TimedHandler`) around a handler that
   does nothing, `BrokerMetrics.on_produce` / `on_fetch` for one partition, the test the hooks
   cost when metrics are off, and — for comparison — prometheus-client's own `Counter.inc()` on a
   cached labelled child, which the design avoids on the hot path.
2. A real broker (subprocess) and the confluent-kafka producer: small records in small batches,
   so per-request costs weigh as much as they can (100-byte values, batch.num.messages=16,
   linger.ms=0, acks=1). Runs alternate off/on; each reports records/s and the broker's CPU
   seconds per 1,000 Produce requests (from /proc/<pid>/stat), medians judged. The on runs also
   scrape /metrics once a second, as Prometheus would (more often than its usual 15 s).
3. One scrape's time with the broker hosting many partitions.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import threading
import time
import timeit
import urllib.request
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import machine_info, median, say, table  # noqa: E402

from logbroker.testing import BrokerProcess  # noqa: E402

METRICS_LINE = re.compile(r"Metrics endpoint listening on (http://[^/\s]+)/metrics")
VALUE = b"v" * 100
PRODUCER = {"linger.ms": 0, "batch.num.messages": 16, "acks": 1, "queue.buffering.max.messages": 200_000,
            "log.connection.close": False}


def hook_costs(number: int) -> list[tuple[str, float]]:
    import struct

    from prometheus_client import CollectorRegistry, Counter

    from logbroker.replication.replica_manager import FetchResult, ProduceResult
    from logbroker.server.metrics import BrokerMetrics, TimedHandler
    from logbroker.storage.values import FileRegion
    from logbroker.types import TopicPartition

    metrics = BrokerMetrics()
    frame = memoryview(struct.pack(">hhi", 0, 9, 1) + b"\0" * 64)
    handler = lambda frame, connection: None  # noqa: E731
    wrapped = TimedHandler(handler, metrics)
    tp = TopicPartition("bench", 0)
    entries = {tp: bytearray(1200)}
    produced = {tp: ProduceResult(None, 100, 115)}
    fetched = {tp: FetchResult(None, 10, 10, 0, FileRegion(0, 0, 16384))}
    off = SimpleNamespace(metrics=None)

    def off_test():
        if off.metrics is not None:
            raise AssertionError

    counter = Counter("bench_total", "x", ["topic"], registry=CollectorRegistry()).labels("bench")
    cases = [
        ("request wrapper (TimedHandler), per request", lambda: wrapped(frame, None)),
        ("  the bare handler it wraps", lambda: handler(frame, None)),
        ("on_produce, one partition", lambda: metrics.on_produce(entries, produced)),
        ("on_fetch, one partition", lambda: metrics.on_fetch(-1, fetched)),
        ("hook with metrics off (`is not None` test)", off_test),
        ("prometheus-client Counter.inc(), cached child", counter.inc),
        ("empty lambda (the timing loop's own cost)", lambda: None),
    ]
    return [(name, min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6) for name, fn in cases]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def scrape(base: str) -> bytes:
    with urllib.request.urlopen(base + "/metrics", timeout=30) as response:
        return response.read()


def produce_requests(text: bytes) -> float:
    return sum(float(m.group(1)) for m in re.finditer(
        rb'^kafka_network_requestmetrics_requests_total\{request="Produce",version="\d+"\} (\S+)$', text, re.M))


def produce_run(root: Path, *, metrics_on: bool, records: int) -> dict:
    from confluent_kafka import Producer

    overrides = {"metrics.port": "0"} if metrics_on else {}
    with BrokerProcess(root, overrides=overrides) as broker:
        base = METRICS_LINE.search(broker.new_log_text()).group(1) if metrics_on else None
        producer = Producer({"bootstrap.servers": broker.bootstrap, **PRODUCER})
        producer.produce("bench", VALUE)  # create the topic, connect: untimed
        producer.flush(30)
        stop = threading.Event()
        scrapes = []

        def scraper():
            while not stop.wait(1.0):
                started = time.perf_counter()
                scrape(base)
                scrapes.append(time.perf_counter() - started)

        thread = threading.Thread(target=scraper, daemon=True)
        if metrics_on:
            requests_before = produce_requests(scrape(base))
            thread.start()
        cpu_before, started = cpu_seconds(broker.process.pid), time.perf_counter()
        for _ in range(records):
            while True:
                try:
                    producer.produce("bench", VALUE)
                    break
                except BufferError:
                    producer.poll(0.001)
        producer.flush(120)
        elapsed, cpu = time.perf_counter() - started, cpu_seconds(broker.process.pid) - cpu_before
        result = {"seconds": elapsed, "records_per_s": records / elapsed, "broker_cpu_s": cpu}
        if metrics_on:
            stop.set()
            thread.join()
            result["requests"] = produce_requests(scrape(base)) - requests_before
            result["scrapes"] = len(scrapes)
        broker.stop()
    return result


def scrape_time(root: Path, partitions: int) -> tuple[float, int]:
    from confluent_kafka.admin import AdminClient, NewTopic

    with BrokerProcess(root, overrides={"metrics.port": "0"}) as broker:
        base = METRICS_LINE.search(broker.new_log_text()).group(1)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("wide", partitions, 1)])["wide"].result(60)
        scrape(base)
        times, size = [], 0
        for _ in range(5):
            started = time.perf_counter()
            size = len(scrape(base))
            times.append(time.perf_counter() - started)
        broker.stop()
    return median(times), size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer records and runs")
    args = parser.parse_args()
    records = 100_000 if args.quick else 300_000
    runs = 2 if args.quick else 3
    tmp = Path(tempfile.mkdtemp(prefix="bench-metrics-"))
    machine = machine_info(tmp)
    print(f"Machine: {machine.date_utc} UTC; nproc {machine.nproc}; {machine.cpu_model}; "
          f"{machine.ram_gib:.1f} GiB; kernel {machine.kernel}; {machine.python}; "
          f"data dir {machine.data_dir} ({machine.filesystem})\n")

    say("hooks in-process …")
    print("### The hooks alone (per call, best of 5)\n")
    print(table(["what", "µs per call"], [(name, f"{us:.3f}") for name, us in hook_costs(200_000)]))

    say("produce runs …")
    results = {False: [], True: []}
    for i in range(runs):
        for on in (False, True):
            r = produce_run(tmp / f"run-{i}-{int(on)}", metrics_on=on, records=records)
            say(f"  metrics {'on ' if on else 'off'}: {r['records_per_s']:,.0f} records/s, "
                f"broker CPU {r['broker_cpu_s']:.2f} s" + (f", {r['requests']:.0f} requests" if on else ""))
            results[on].append(r)
    requests = median([r["requests"] for r in results[True]])
    rows = []
    for on in (False, True):
        rs = results[on]
        rows.append(("on" if on else "off", f"{median([r['records_per_s'] for r in rs]):,.0f}",
                     f"{median([r['broker_cpu_s'] for r in rs]):.2f}",
                     f"{median([r['broker_cpu_s'] for r in rs]) / requests * 1e6:.1f}",
                     ", ".join(f"{r['seconds']:.2f}" for r in rs)))
    off_rate = median([r["records_per_s"] for r in results[False]])
    on_rate = median([r["records_per_s"] for r in results[True]])
    off_cpu = median([r["broker_cpu_s"] for r in results[False]])
    on_cpu = median([r["broker_cpu_s"] for r in results[True]])
    print(f"\n### Produce, {records:,} records of {len(VALUE)} B, {PRODUCER}\n")
    print(f"Produce requests per run (counted by the on runs): {requests:,.0f}; "
          f"the on runs scraped /metrics once a second.\n")
    print(table(["metrics", "records/s (median)", "broker CPU s (median)",
                 "broker CPU µs per request", "seconds per run"], rows))
    print(f"\nThroughput on/off: {on_rate / off_rate:.1%}; broker CPU on/off: {on_cpu / off_cpu:.1%} "
          f"({(on_cpu - off_cpu) / requests * 1e6:+.2f} µs per request).")

    say("scrape time …")
    print("\n### One scrape\n")
    rows = []
    for partitions in ((100,) if args.quick else (100, 1000)):
        seconds, size = scrape_time(tmp / f"scrape-{partitions}", partitions)
        rows.append((partitions, f"{seconds * 1000:.1f}", f"{size:,}"))
    print(table(["partitions hosted", "ms per scrape (median of 5)", "bytes"], rows))


if __name__ == "__main__":
    main()
