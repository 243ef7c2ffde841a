"""Web console benchmark: how long `logbroker console` takes to answer its heaviest
pages, against a real `logbroker serve` subprocess, over HTTP (the time to the last byte of the
HTML, as a browser's navigation would wait for it; no rendering).

    .venv/bin/python bench/bench_console.py       # 1,000 topics, a 1 GB topic, 200 groups, ~2 min
    .venv/bin/python bench/bench_console.py --topics 200 --gb 0.25   # a scaled-down run

Goal: the topic list with 1,000 topics, and the message browser on a 1 GB topic, each
answer in < 1 s.

1. Create `--topics` topics of 1 partition each (plus the big one), commit offsets of `--groups`
   groups (10 partitions each, no members), and produce `--gb` GB of
   1 KiB JSON records (acks=1, linger.ms=20) into the big topic's 4 partitions; note the time
   halfway, for the by-timestamp read.
2. Start the console (sampling end offsets every 5 s, as by default, so the sampler's ListOffsets
   over every partition runs during the measurements) and request each page `--runs` times
   (after one untimed warm-up): median and max in ms.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from common import machine_info, median, say, table  # noqa: E402

from logbroker.testing import TEST_OVERRIDES, BrokerProcess  # noqa: E402

GOAL_MS = 1000.0
BIG = "big"
BIG_PARTITIONS = 4
RECORD_BYTES = 1024


def create_topics(bootstrap: str, count: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = [f"topic-{i:05d}" for i in range(count)]
    for at in range(0, count, 100):
        futures = admin.create_topics([NewTopic(n, 1, 1) for n in names[at:at + 100]],
                                      operation_timeout=60)
        for future in futures.values():
            future.result(120)
    admin.create_topics([NewTopic(BIG, BIG_PARTITIONS, 1)])[BIG].result(60)


def produce_big(bootstrap: str, total_bytes: int) -> tuple[int, int, float]:
    """(records, middle timestamp ms, seconds) of producing `total_bytes` of 1 KiB records."""
    import confluent_kafka
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "1",
                                         "linger.ms": 20, "batch.size": 1 << 20,
                                         "queue.buffering.max.kbytes": 1 << 20})
    count = total_bytes // RECORD_BYTES
    padding = "x" * RECORD_BYTES
    middle_ms = 0
    start = time.monotonic()
    for i in range(count):
        value = json.dumps({"order": i, "item": "book", "note": ""})
        value = value[:-2] + padding[:RECORD_BYTES - len(value)] + '"}'
        while True:
            try:
                producer.produce(BIG, value.encode(), key=str(i).encode())
                break
            except BufferError:
                producer.poll(0.05)
        if i == count // 2:
            middle_ms = int(time.time() * 1000)
        if i % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(300) == 0
    return count, middle_ms, time.monotonic() - start


def create_groups(bootstrap: str, count: int) -> None:
    """`count` groups, each with offsets committed on 10 of the small topics (no members)."""
    import confluent_kafka
    for g in range(count):
        consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap,
                                             "group.id": f"group-{g:04d}",
                                             "enable.auto.commit": False})
        consumer.commit(offsets=[confluent_kafka.TopicPartition(f"topic-{t:05d}", 0, 0)
                                 for t in range(g % 50, g % 50 + 10)], asynchronous=False)
        consumer.close()


def timed_get(url: str) -> tuple[float, int, bytes]:
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as response:
        body = response.read()
        status = response.status
    return (time.perf_counter() - start) * 1000, status, body


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--gb", type=float, default=1.0, help="GB (10^9 bytes) in the big topic")
    parser.add_argument("--groups", type=int, default=200)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-console-") as tmp:
        machine = machine_info(tmp)
        broker = BrokerProcess(Path(tmp), overrides={**TEST_OVERRIDES,
                                                      "log.segment.bytes": str(256 << 20)})
        broker.start()
        try:
            say(f"creating {args.topics} topics")
            start = time.monotonic()
            create_topics(broker.bootstrap, args.topics)
            create_s = time.monotonic() - start
            say(f"committing offsets of {args.groups} groups")
            create_groups(broker.bootstrap, args.groups)
            say(f"producing {args.gb:g} GB into '{BIG}'")
            records, middle_ms, produce_s = produce_big(broker.bootstrap, int(args.gb * 1e9))
            say(f"{records:,} records in {produce_s:.1f} s")
            rows = measure(broker.bootstrap, args.runs, records, middle_ms, args.topics,
                           args.groups)
        finally:
            broker.stop()

    print("## Web console: `bench/bench_console.py`\n")
    print(f"Command: `.venv/bin/python bench/bench_console.py --topics {args.topics} "
          f"--gb {args.gb:g} --groups {args.groups} --runs {args.runs}`\n")
    print("Machine:")
    print("\n".join(machine.lines()))
    print(f"\nSetup: {args.topics:,} topics created in {create_s:.1f} s; '{BIG}' holds "
          f"{records:,} records of {RECORD_BYTES} B in {BIG_PARTITIONS} partitions "
          f"({records * RECORD_BYTES / 1e9:.2f} GB of values), produced in {produce_s:.1f} s.\n")
    print(table(["request", "what it does", "median ms", "max ms", "goal", "verdict"], rows))


def measure(bootstrap: str, runs: int, records: int, middle_ms: int, topics: int,
            groups: int) -> list:
    console = subprocess.Popen([sys.executable, "-m", "logbroker.cli", "console",
                                "--bootstrap-server", bootstrap, "--port", "0"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        line = console.stdout.readline()
        match = re.search(r"(http://\S+)", line)
        if match is None:
            raise RuntimeError(f"console did not start: {line}")
        url = match.group(1)
        time.sleep(6)  # let the sampler take its first samples of every partition
        middle = urllib.parse.quote(time.strftime("%Y-%m-%dT%H:%M:%S",
                                                  time.gmtime(middle_ms / 1000)))
        per_partition = records // BIG_PARTITIONS
        cases = [
            ("/topics", f"topic list, first page of {topics:,} (metadata + offsets of 50)", True),
            ("/topics?page=10", "topic list, page 10", True),
            ("/topics?q=topic-009", "topic search (10 matches)", True),
            ("/", f"overview ({topics:,} topics, partition health)", False),
            (f"/topics/{BIG}", "topic page of the 1 GB topic", False),
            (f"/topics/{BIG}/messages?limit=20", "browser: newest 20, all partitions", True),
            (f"/topics/{BIG}/messages?limit=100&partition=0",
             "browser: newest 100 of partition 0", True),
            (f"/topics/{BIG}/messages?limit=100&partition=0&start=offset"
             f"&offset={per_partition // 2}", "browser: 100 from the middle offset", True),
            (f"/topics/{BIG}/messages?limit=100&start=timestamp&timestamp={middle}",
             "browser: 100 from the middle timestamp", True),
            (f"/topics/{BIG}/messages?limit=100&start=oldest", "browser: oldest 100", True),
            (f"/topics/{BIG}/messages?limit=20&filter=no-record-has-this",
             "browser: filter matching nothing (scans 5,000 per partition)", False),
            ("/groups", f"group list, first page of {groups:,} (members, offsets, lag of 50)",
             False),
            ("/group?id=group-0007", "one group: members, offsets, lag", False),
        ]
        rows = []
        for path, what, goal in cases:
            say(f"GET {path}")
            timed_get(url + path)  # warm-up
            times = []
            for _ in range(runs):
                elapsed, status, _ = timed_get(url + path)
                assert status == 200, (path, status)
                times.append(elapsed)
            verdict = ("met" if median(times) < GOAL_MS else "MISSED") if goal else "-"
            rows.append([f"`GET {urllib.parse.unquote(path)}`", what, f"{median(times):.0f}",
                         f"{max(times):.0f}", "< 1000 ms" if goal else "-", verdict])
        return rows
    finally:
        console.terminate()
        console.wait(30)


if __name__ == "__main__":
    main()
