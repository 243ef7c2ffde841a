"""What the first use of a lazily loaded part costs a running broker: the first
request of each common API (its handler module is imported then: server/apis/__init__.py), and
the first use of KIP-848 consumer groups and KIP-932 share groups (their modules, their managers,
the share stack). Timed in a broker process of its own, after Broker.start, with bytecode caches
allowed (see bench_start.py) and the first run of each source tree discarded; in CPU time of the
process (time.process_time), which a busy machine inflates less than the wall clock, and which
on an idle one is the latency the request pays (the work is imports and class building).

    .venv/bin/python bench/bench_first_use.py [--runs 5] [--src /path/to/src]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import machine_info, median, say, table  # noqa: E402

COMMON_APIS = ("API_VERSIONS", "METADATA", "PRODUCE", "FETCH", "LIST_OFFSETS", "FIND_COORDINATOR", "JOIN_GROUP",
               "SYNC_GROUP", "HEARTBEAT", "LEAVE_GROUP", "OFFSET_COMMIT", "OFFSET_FETCH", "INIT_PRODUCER_ID")


def child(data_dir: str) -> None:
    """Runs in the broker's process: prints the timings as JSON."""
    import asyncio
    import time

    sys.modules.setdefault("hypothesis", None)  # as `logbroker serve` does (cli/run_broker.py)
    from logbroker.protocol.apis import ApiKey
    from logbroker.server.apis import REGISTRY
    from logbroker.server.broker import Broker
    from logbroker.server.config import KafkaConfig

    def timed(fn) -> float:
        start = time.process_time()
        fn()
        return (time.process_time() - start) * 1000

    async def run() -> dict:
        broker = Broker(KafkaConfig.from_props({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": data_dir}))
        await broker.start()
        result = {name: timed(lambda: REGISTRY[ApiKey[name]]) for name in COMMON_APIS}
        result["consumer groups"] = timed(lambda: (REGISTRY[ApiKey.CONSUMER_GROUP_HEARTBEAT],
                                                   broker.group_coordinator.consumer))
        result["share groups"] = timed(lambda: (REGISTRY[ApiKey.SHARE_GROUP_HEARTBEAT], REGISTRY[ApiKey.SHARE_FETCH],
                                                broker.group_coordinator.share, broker.share_groups()))
        await broker.shutdown()
        return result

    print(json.dumps(asyncio.run(run())))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--src", action="append", default=[], help="logbroker source tree (repeatable)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child)
        return 0
    srcs = args.src or [None]
    with tempfile.TemporaryDirectory(prefix="bench-first-use-") as tmp:
        say("## First use of lazily loaded parts")
        for line in machine_info(tmp).lines():
            say(line)
        say(f"- load average: {os.getloadavg()}")
        runs: dict = {src: [] for src in srcs}
        for i in range(args.runs + 1):
            for src in srcs:
                env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
                if src:
                    env["PYTHONPATH"] = src
                data = Path(tmp) / f"{i}-{abs(hash(src))}"
                out = subprocess.run([sys.executable, __file__, "--child", str(data)], env=env, check=True,
                                     capture_output=True, text=True).stdout
                if i:  # the first run writes the bytecode caches
                    runs[src].append(json.loads(out.splitlines()[-1]))
        for src in srcs:
            rs = runs[src]
            say(f"### {src or '(PYTHONPATH as given)'}: median CPU ms of {len(rs)} runs")
            say(table(["first use of", "ms"], [[name, f"{median([r[name] for r in rs]):.1f}"] for name in rs[0]]))
        say(f"- load average after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
