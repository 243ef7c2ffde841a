"""Broker start and idle memory: spawn → first accepted connection, the broker's CPU
at that moment (utime+stime: what a loaded machine cannot inflate), and VmRSS 1 s later.

Bytecode caches are allowed (PYTHONDONTWRITEBYTECODE is removed from the broker's environment)
and one untimed start per source tree writes them first: an installed broker starts from .pyc
files, and compiling every module is ~0.2-0.5 s that a user never pays twice.

    .venv/bin/python bench/bench_start.py [--runs 7] [--src /path/to/src ...]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_broker import proc_cpu_s, proc_mem_mib  # noqa: E402
from bench_ceilings import free_port, wait_for_connect  # noqa: E402
from common import machine_info, median, say, table  # noqa: E402


def one_start(base: Path, src: str | None) -> dict:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if src:
        env["PYTHONPATH"] = src
    cmd = [sys.executable, "-m", "logbroker.cli", "serve", "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
           "--override", f"log.dirs={base / 'data'}"]
    with open(base / "broker.log", "wb") as log:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
    try:
        connect_ms = (wait_for_connect(port, proc) - start) * 1000
        cpu_ms = proc_cpu_s(proc.pid) * 1000
        time.sleep(1.0)
        mem = proc_mem_mib(proc.pid)
    finally:
        proc.terminate()
        proc.wait(30)
    return {"connect_ms": connect_ms, "cpu_ms": cpu_ms, **mem}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--src", action="append", default=[], help="logbroker source tree (repeatable)")
    args = parser.parse_args(argv)
    srcs = args.src or [None]
    with tempfile.TemporaryDirectory(prefix="bench-start-") as tmp:
        root = Path(tmp)
        say("## Start and idle memory")
        for line in machine_info(root).lines():
            say(line)
        say(f"- load average: {os.getloadavg()}")
        runs: dict = {src: [] for src in srcs}
        for i in range(args.runs + 1):
            for src in srcs:
                base = root / f"{i}-{len(runs[src])}-{abs(hash(src))}"
                base.mkdir()
                r = one_start(base, src)
                shutil.rmtree(base, ignore_errors=True)
                if i:  # the first start writes the bytecode caches
                    runs[src].append(r)
        rows = []
        for src in srcs:
            rs = runs[src]
            rows.append([src or "(PYTHONPATH as given)",
                         f"{median([r['connect_ms'] for r in rs]):.0f}",
                         ", ".join(f"{r['connect_ms']:.0f}" for r in rs),
                         f"{median([r['cpu_ms'] for r in rs]):.0f}",
                         f"{median([r['VmRSS'] for r in rs]):.1f}",
                         f"{median([r['RssAnon'] for r in rs]):.1f}",
                         f"{median([r['RssFile'] for r in rs]):.1f}"])
        say(table(["source", "spawn → accepting, ms (median)", "each run", "broker CPU at accept, ms",
                   "idle VmRSS MiB", "RssAnon", "RssFile"], rows))
        say(f"- load average after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
