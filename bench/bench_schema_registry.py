"""Schema registry benchmark: latency of `GET /schemas/ids/{id}` and of registering, each at a
steady rate on one keep-alive connection, and the start-up replay of a `_schemas` topic holding
10,000 schemas.

    .venv/bin/python bench/bench_schema_registry.py                 # ~1-2 min
    .venv/bin/python bench/bench_schema_registry.py --schemas 2000  # quicker

A broker (`logbroker serve`, uvloop) with `schema.registry.listeners`; requests from this process
with http.client, paced to `--rate` per second (a request that runs late is sent at once, not
dropped: latencies are from its own send). Registration: each a new Avro record schema under one
of 100 subjects, compatibility NONE. Replay: after a SIGTERM, the time from the broker's start to
"Schema registry serving" minus the time to its Kafka listener's start line. Prints Markdown for
docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import http.client
import json
import re
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).parent))
from common import machine_info, percentile, say, table  # noqa: E402

from logbroker.testing import SCHEMA_REGISTRY_OVERRIDES, BrokerProcess  # noqa: E402

HEADERS = {"Content-Type": "application/vnd.schemaregistry.v1+json"}
STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]")


def schema(n: int) -> str:
    return json.dumps({"type": "record", "name": f"R{n}", "namespace": "bench",
                       "fields": [{"name": "id", "type": "long"}, {"name": f"f{n}", "type": "string"}]})


def paced(connection: http.client.HTTPConnection, requests, rate: float) -> list[float]:
    """Send (method, path, body) at `rate` per second; the latency of each, in seconds."""
    latencies = []
    interval = 1.0 / rate
    start = time.perf_counter()
    for i, (method, path, body) in enumerate(requests):
        delay = start + i * interval - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        sent = time.perf_counter()
        connection.request(method, path, body=body, headers=HEADERS)
        response = connection.getresponse()
        response.read()
        latencies.append(time.perf_counter() - sent)
        assert response.status == 200, (response.status, path)
    return latencies


def row(name: str, rate: float, latencies: list[float]) -> list[object]:
    ordered = sorted(latencies)
    return [name, f"{rate:g}/s", len(ordered), f"{percentile(ordered, 50) * 1000:.2f}",
            f"{percentile(ordered, 99) * 1000:.2f}", f"{ordered[-1] * 1000:.2f}"]


def log_time(text: str, marker: str) -> datetime:
    for line in text.splitlines():
        if marker in line:
            return datetime.strptime(STAMP.match(line).group(1), "%Y-%m-%d %H:%M:%S,%f")
    raise AssertionError(f"no {marker!r} in the broker's log")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--schemas", type=int, default=10_000, help="schemas registered before the replay")
    parser.add_argument("--rate", type=float, default=200.0, help="requests per second of each latency run")
    parser.add_argument("--requests", type=int, default=3000, help="requests of each latency run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-registry-") as tmp:
        say(machine_info(tmp))
        broker = BrokerProcess(Path(tmp), overrides=SCHEMA_REGISTRY_OVERRIDES).start()
        try:
            url = urlsplit(broker.schema_registry_url())
            connection = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
            paced(connection, [("PUT", "/config", json.dumps({"compatibility": "NONE"}))], 1)
            registering = [("POST", f"/subjects/s{n % 100}/versions", json.dumps({"schema": schema(n)}))
                           for n in range(args.schemas)]
            register_rate = min(args.rate, 100.0)
            register_latencies = paced(connection, registering[:args.requests], register_rate)
            t = time.perf_counter()
            paced(connection, registering[args.requests:], 1e9)  # the rest as fast as it goes
            bulk_rate = max(0, args.schemas - args.requests) / (time.perf_counter() - t)
            reads = [("GET", f"/schemas/ids/{1 + n % args.schemas}", None) for n in range(args.requests)]
            read_latencies = paced(connection, reads, args.rate)
            connection.close()
            broker.stop()
            broker.start()
            broker.schema_registry_url(timeout_s=300)
            text = broker.new_log_text()
            replay_s = (log_time(text, "Schema registry serving") - log_time(text, "started in")).total_seconds()
        finally:
            broker.kill()
    print(table(["request", "rate", "requests", "p50 ms", "p99 ms", "max ms"],
                [row("GET /schemas/ids/{id}", args.rate, read_latencies),
                 row("POST /subjects/{s}/versions (new schema)", register_rate, register_latencies)]))
    print(f"\nRegistering back to back: {bulk_rate:.0f} schemas/s. Start-up replay of {args.schemas:,} "
          f"schemas: {replay_s:.2f} s from the Kafka listener's start to the registry serving.")


if __name__ == "__main__":
    main()
