"""Broker CPU-s per GB produced, source trees side by side: bench_broker's produce
cases (confluent-kafka in this process, linger.ms=5, 1 KiB, acks=1 and acks=all, one and three
partitions) against one broker per `--src`, alternating, without bench_broker's waits for an idle
machine — for A/B comparisons on a shared machine, where both sides take the same noise. The
goals themselves are judged by bench_broker.py beside its ceilings.

Each run's CPU is also given as user and system time: on this VM the host's cost of the memory
a page-cache write takes lands in system time (docs/benchmarks.md, "Method"
on this VM"), so the user column is the steadier reading of the broker's own work.

`--kcat N` adds the C-client case: N records of 100 B produced by kcat (librdkafka's own
batching, linger.ms=5) to one partition.

`--producer KEY=VALUE` (repeatable) sets a client setting for the 1 KiB cases, e.g.
`--producer batch.size=1000000` for librdkafka's own default instead of the benchmarks' 65536
(bench_ceilings.PRODUCER_DEFAULTS): 1 MB batches instead of 64 KiB ones, a sixteenth of the
requests.

`--fresh` gives every run a broker of its own on an empty data directory, removed (and synced)
after the run, with a second of rest. On this VM the page-cache writes of a run that follows
several GB of kept logs go into memory returned to the host and cost ~8x the kernel CPU (docs/
benchmarks.md, "Method"): by the third round of the default mode
most runs measure that. A fresh run writes into the memory the previous one freed, as a broker
whose old segments retention deletes does, and the rounds agree (bench_roll_latency.py removes its
cases the same way).

    .venv/bin/python bench/bench_cpu_per_gb.py --src /path/a/src --src /path/b/src [--records 200000]
        [--kcat 2000000] [--producer batch.size=1000000] [--fresh]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_broker import QUICK, Bench  # noqa: E402
from common import machine_info, median, remove_written, say, table  # noqa: E402

CASES = [(1024, 1, 1), (1024, 1, -1), (1024, 3, 1), (1024, 3, -1)]  # size, partitions, acks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--src", action="append", required=True, help="logbroker source tree (repeatable)")
    parser.add_argument("--records", type=int, default=200_000, help="records per run")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--kcat", type=int, default=0, help="records of 100 B from kcat (0: no kcat case)")
    parser.add_argument("--fresh", action="store_true",
                        help="a broker and an empty data dir for every run, removed after it (see above)")
    parser.add_argument("--producer", action="append", default=[], metavar="KEY=VALUE",
                        help="a confluent-kafka setting for the 1 KiB cases (repeatable)")
    args = parser.parse_args(argv)
    producer_config = dict(setting.split("=", 1) for setting in args.producer)
    with tempfile.TemporaryDirectory(prefix="bench-cpu-per-gb-") as tmp, contextlib.ExitStack() as stops:
        root = Path(tmp)
        say("## Broker CPU per GB produced, A/B")
        for line in machine_info(root).lines():
            say(line)
        say(f"- load average: {os.getloadavg()}")
        if producer_config:
            say(f"- producer settings: {producer_config}")
        if args.fresh:
            say("- every run on a broker of its own, its data removed after it (--fresh)")
        benches = {}
        if not args.fresh:
            for i, src in enumerate(args.src):
                os.environ["PYTHONPATH"] = src
                benches[src] = Bench(root / f"b{i}", QUICK)
                benches[src].start()
                stops.callback(benches[src].broker.stop)  # also when a case raises

        def measure(src: str, case):
            """`case(bench)` on the tree's broker, or (--fresh) on one of its own, removed after."""
            if not args.fresh:
                return case(benches[src])
            os.environ["PYTHONPATH"] = src
            bench = Bench(root / "fresh", QUICK)
            bench.start()
            try:
                return case(bench)
            finally:
                bench.broker.stop()
                remove_written(root / "fresh")

        results: dict = collections.defaultdict(list)
        for rep in range(args.repeat):
            for size, partitions, acks in CASES:
                for i, src in enumerate(args.src):
                    r = measure(src, lambda bench: bench.produce_case(
                        size, partitions, acks, args.records, tag=f"r{rep}s{i}", prefault_first=False,
                        producer_config=producer_config))
                    results[(size, partitions, acks, src)].append(r)
            for i, src in enumerate(args.src):
                if args.kcat:
                    r = measure(src, lambda bench: bench.kcat_produce_case(100, args.kcat, tag=f"r{rep}s{i}"))
                    r["broker_us_per_request"] = float("nan")  # kcat reports no request count
                    results[(100, 1, "kcat", src)].append(r)
        rows = []
        cases = CASES + ([(100, 1, "kcat")] if args.kcat else [])
        for size, partitions, acks in cases:
            row = [f"{size} B" + (" (kcat)" if acks == "kcat" else ""), partitions,
                   "1" if acks == "kcat" else "all" if acks < 0 else acks]
            for src in args.src:
                runs = results[(size, partitions, acks, src)]
                row += [f"{median([r['broker_cpu_s_per_gb'] for r in runs]):.2f}",
                        " / ".join(f"{r['broker_cpu_s_per_gb']:.2f}" for r in runs),
                        " / ".join(f"{r['broker_user_s_per_gb']:.2f}" for r in runs),
                        " / ".join(f"{r['broker_sys_s_per_gb']:.2f}" for r in runs),
                        f"{median([r['msgs_s'] for r in runs]):,.0f}",
                        f"{median([r['broker_us_per_request'] for r in runs]):.0f}"]
            rows.append(row)
        headers = ["record", "partitions", "acks"]
        for src in args.src:
            headers += [f"CPU-s/GB ({src})", "each run", "user", "sys", "msgs/s", "µs/request"]
        say(table(headers, rows))
        say(f"- load average after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
