"""Produce latency across segment rolls ("p99 ≤ 5 ms at half the maximum rate, across
segment rolls, at 1 KiB").

Two parts, each run against one or more source trees (`--src`, interleaved so that whatever else
the machine does is shared between them):

1. `probe` — in-process, no client and no network: `Log.append_as_leader` of 64 KiB batches (63
   records of ~1 KiB, what librdkafka sends at linger.ms=5) paced at `--probe-mb-s`, into
   segments of `--segment-bytes`; when the log says a flush is due (a rolled segment), it runs
   `flush_if_needed` in a worker thread, as ReplicaManager does after an append (and, in trees that
   have it, `start_writeback` when `writeback_due`); between appends it sleeps, releasing the GIL
   as the broker's event loop does while it waits for requests. Every append
   is timed; the report gives p50/p99/p99.9/max of the appends, the roll's own append (which
   trims the old segment and creates the new one), and the appends that ran while the rolled
   segment's fsync did — the broker's own stalls, without client or scheduling noise.
2. `broker` — a real `logbroker serve` (one per tree) and confluent-kafka producing 1 KiB records
   (acks=1 and acks=all, linger.ms=5, batch.size=65536, every 8th record timed from produce() to
   its delivery callback, as bench_broker.py's latency rows) at `--rate` records/s (default: half
   of bench_broker's quiet-machine max, 325,200/s) for long enough that at least `--rolls`
   segments of `--segment-bytes` (default 1 GiB, the real default) fill inside the measured window
   (after `--warmup`, 2 s). Every 20 ms a sampler records Dirty/Writeback, the broker's, the
   client's and the machine's idle CPU; a case in which other processes took more than 60% of a
   core for 0.5 s is redone (`--attempts`). Each case is followed by removing its data, a sync
   and 1 s of rest (`--prefault`: and preceded by an untimed dd of its size, common.prefault,
   which on this VM makes the tail it measures; off by default). `--attach` runs a
   command beside each case (perf, strace) with the broker's pid.

    PYTHONPATH=$PWD/src .venv/bin/python bench/bench_roll_latency.py probe --src /work/main/src --src $PWD/src
    PYTHONPATH=$PWD/src .venv/bin/python bench/bench_roll_latency.py broker --repeat 3 --src A --src B

A tree is `PATH[::KEY=VALUE,…]`; the KEY=VALUEs are broker config overrides (`broker`; but
`segment.bytes`, the topic's, e.g. 2000000000 for a window without a roll) or topic configs
(`probe`), e.g. `$PWD/src::log.preallocate=true` / `$PWD/src::preallocate=true`. Every data directory is
removed after its case (a 1 GiB case writes ~1.7 GB), also on SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_ceilings import paced_produce, wait_idle  # noqa: E402
from common import GiB, machine_info, median, percentile, prefault, remove_written, say, table  # noqa: E402

HERE = Path(__file__).resolve()
# Half of bench_broker's 1 KiB, 1 partition, acks=1 max on the quiet machine (650,317/s, 26 Nov 2026).
DEFAULT_RATE = 325_200
BATCH_RECORDS = 63  # librdkafka's 64 KiB batch of 1 KiB records
BATCH_BYTES = 65_536 - 1024 + 512  # ~ what one of those batches is on the wire
LATENCY_SAMPLE_EVERY = 8
RECORD_BYTES = 1085  # a 1 KiB record's share of a 63-record batch in the log
DISTURBED_MAX_PCT = 60.0  # CPU (% of a core) used by others in some 0.5 s above which a run is redone


def split_tree(tree: str) -> tuple[str, dict[str, str]]:
    path, _, rest = tree.partition("::")
    overrides = dict(kv.split("=", 1) for kv in rest.split(",") if kv)
    return path, overrides


def stats_ms(values: list[float]) -> dict:
    v = sorted(values)
    if not v:
        return {"n": 0}
    return {"n": len(v), "p50": percentile(v, 50), "p99": percentile(v, 99), "p999": percentile(v, 99.9),
            "max": v[-1]}


# --- 1. in-process probe ----------------------------------------------------------------------

def probe_child(data_dir: Path, segment_bytes: int, mb_s: float, seconds: float, overrides: dict) -> dict:
    """Runs inside a subprocess whose PYTHONPATH is the tree under test."""
    import concurrent.futures
    import threading

    from logbroker.clock import SystemClock
    from logbroker.records.builder import build_batch
    from logbroker.storage.log import Log
    from logbroker.storage.log_config import LogConfig

    config = LogConfig.defaults().with_overrides({"segment.bytes": segment_bytes, **overrides})
    log_ = Log.open(data_dir / "probe-0", config, clock=SystemClock())
    now_ms = int(time.time() * 1000)
    batches = [build_batch([(None, os.urandom(1000)) for _ in range(BATCH_RECORDS)], now_ms=now_ms)
               for _ in range(4)]
    size = len(batches[0])
    executor = concurrent.futures.ThreadPoolExecutor(1)
    flushing = threading.Event()
    flushes: list[tuple[float, float]] = []
    clock = time.perf_counter

    def flush(now: int) -> None:
        start, cpu = clock(), time.thread_time()
        flushing.set()
        try:
            log_.flush_if_needed(now)
        finally:
            flushing.clear()
            flushes.append((start, clock(), time.thread_time() - cpu))

    pending = None
    writeback_due = getattr(log_, "writeback_due", None)  # trees from before the writeback have none
    per_s = mb_s * 1e6 / size
    count = int(per_s * seconds)
    times: list[tuple[float, float, bool, bool]] = []  # (start, duration, rolled, during fsync)
    start = clock()
    segments = 1
    for i in range(count):
        wait = start + i / per_s - clock()
        if wait > 0:  # sleeping, as an event loop waits in epoll: the GIL is free meanwhile
            time.sleep(wait)
        during = flushing.is_set()
        t0 = clock()
        log_.append_as_leader(bytearray(batches[i & 3]), leader_epoch=0)
        t1 = clock()
        n = len(log_.segments)
        rolled = n != segments
        segments = n
        times.append((t0 - start, t1 - t0, rolled, during))
        if pending is None or pending.done():  # as ReplicaManager.append_records_now
            if log_.needs_flush(int(time.time() * 1000)):
                pending = executor.submit(flush, int(time.time() * 1000))
            elif writeback_due is not None and writeback_due():
                pending = executor.submit(log_.start_writeback)
    if pending is not None:
        pending.result()
    executor.shutdown()
    end = clock()
    cpu = os.times()
    log_.close_handles()
    every = [d * 1000 for _, d, _, _ in times]
    rolls = [d * 1000 for _, d, r, _ in times if r]
    during = [d * 1000 for _, d, r, f in times if f and not r]
    quiet = [d * 1000 for _, d, r, f in times if not f and not r]
    slow = [(round(t, 3), round(d * 1000, 2), r, f) for t, d, r, f in times if d > 0.002]
    return {"appends": stats_ms(every), "roll_appends": rolls, "during_fsync": stats_ms(during),
            "quiet": stats_ms(quiet), "fsyncs_s": [(round(a - start, 3), round(b - a, 3), round(c, 3)) for a, b, c in flushes],
            "process_cpu_s": round(cpu.user + cpu.system, 2),
            "slow_appends": slow[:60], "achieved_mb_s": count * size / (end - start) / 1e6,
            "segments": segments}


def run_probe(tree: str, root: Path, args) -> dict:
    path, overrides = split_tree(tree)
    data = Path(tempfile.mkdtemp(prefix="probe-", dir=root))
    try:
        env = {**os.environ, "PYTHONPATH": f"{path}:{HERE.parent}"}
        cmd = [sys.executable, str(HERE), "_probe_child", str(data), str(args.segment_bytes), str(args.probe_mb_s),
               str(args.probe_seconds), json.dumps(overrides)]
        out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
        return json.loads(out.strip().splitlines()[-1])
    finally:
        shutil.rmtree(data, ignore_errors=True)


# --- 2. a real broker -------------------------------------------------------------------------

def broker_case(tree: str, root: Path, acks: int, args, tag: str) -> dict:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    path, overrides = split_tree(tree)
    segment_bytes = int(overrides.pop("segment.bytes", args.segment_bytes))  # a topic config
    os.environ["PYTHONPATH"] = path
    from logbroker.testing import BrokerProcess

    canned = overrides.pop("canned", None) is not None  # not a broker config: the floor (loop_stalls.py)
    broker = BrokerProcess(root / f"broker-{tag}", overrides=overrides)
    stalls_path = root / f"stalls-{tag}.json"
    if args.stalls or canned:  # the broker, started through loop_stalls.py
        command = broker.command()
        assert command[1:4] == ["-m", "logbroker.cli", "serve"], command
        extra = (["--canned", "lat"] if canned else []) + (["--stacks"] if args.stacks else [])
        broker.command = lambda: [command[0], str(HERE.parent / "loop_stalls.py"), str(stalls_path), *extra,
                                  "--", *command[3:]]
    broker.start()
    try:
        quiet = {"log_level": 0, "bootstrap.servers": broker.bootstrap}
        admin = AdminClient(quiet)
        topic = "lat"
        config = {"segment.bytes": str(segment_bytes)}
        for f in admin.create_topics([NewTopic(topic, 1, 1, config=config)]).values():
            f.result(30)
        latencies: list[tuple[float, float]] = []
        failed: list = []
        clock = time.perf_counter
        producer = Producer({**quiet, "acks": acks, "linger.ms": 5, "batch.size": 65536})
        value = os.urandom(1024)
        producer.produce(topic, value)
        producer.flush(30)
        rate = args.rate
        warmup = args.warmup
        # long enough for `rolls` segments to fill inside the measured window
        seconds = args.seconds or (args.rolls * args.segment_bytes / (rate * RECORD_BYTES) + 1.0)  # same for every tree
        if args.prefault:  # see common.prefault: this VM's free memory, made resident again
            prefault(root, int(rate * (warmup + seconds) * RECORD_BYTES))
        start = clock()
        record_from, end = start + warmup, start + warmup + seconds

        def delivered(sent_at: float, err, msg) -> None:
            if err is not None:
                failed.append(err)
            elif sent_at >= record_from:
                now = clock()
                latencies.append((now - start, now - sent_at))

        sampler = Sampler(broker.data_dir / f"{topic}-0", broker.process.pid, start)
        attached = (subprocess.Popen(args.attach.format(pid=broker.process.pid, tag=tag), shell=True,
                                     start_new_session=True) if args.attach else None)
        sent, queue_full = paced_produce(producer, topic, value, rate=rate, start=start, end=end,
                                         on_delivery_for=lambda t: partial(delivered, t),
                                         sample_every=LATENCY_SAMPLE_EVERY)
        producer.flush(60)
        sampler.stop()
        rest_avg, rest_max = sampler.rest_pct()
        if attached is not None:
            os.killpg(attached.pid, signal.SIGINT)
            attached.wait(30)
        achieved = sent / (end - start)
        del producer
        if failed:
            raise RuntimeError(f"{len(failed)} failed deliveries: {failed[0]}")
        segments = len(list(broker.data_dir.glob(f"{topic}-0/*.log")))
        ms = [lat * 1000 for _, lat in latencies]
        worst = sorted(latencies, key=lambda x: -x[1])[:10]
        buckets: dict[int, float] = {}  # the worst latency per 50 ms of delivery time
        for t, lat in latencies:
            b = int(t * 20)
            buckets[b] = max(buckets.get(b, 0.0), lat * 1000)
        near, away = roll_split(latencies, sampler.rolls_at)
        result = {"tree": tree, "acks": acks, "rate": rate, "near_roll_max": near, "elsewhere_max": away, "achieved": achieved, "seconds": seconds,
                "queue_full": queue_full, "segments": segments, **stats_ms(ms),
                "rest_pct": rest_avg, "rest_max_pct": rest_max,
                "worst": [(round(t, 2), round(lat * 1000, 1)) for t, lat in worst],
                "timeline": sorted((b / 20, round(x, 1)) for b, x in buckets.items()), "rolls_at": sampler.rolls_at,
                  "cpu_wait_pct": sampler.cpu_wait_pct(), "steal_ms": sampler.steal_ms(), "samples": sampler.samples}
    finally:
        broker.stop()
        remove_written(broker.base_dir)
    if stalls_path.exists():
        from loop_stalls import summarize

        result["stalls"] = summarize(str(stalls_path), start, sampler.rolls_at,
                                     [(t, lat) for t, lat in worst], window=(warmup, warmup + seconds))
        if args.keep_stalls:
            shutil.move(stalls_path, Path(args.keep_stalls) / f"stalls-{tag}-{int(time.time())}.json")
        else:
            stalls_path.unlink()
    return result


def roll_split(latencies: list[tuple[float, float]], rolls_at: list[float], after_s: float = 0.8) -> tuple[float, float]:
    """The worst latency (ms) of the records answered within `after_s` after a roll, and of the
    others."""
    near = away = 0.0
    for t, lat in latencies:
        if any(r <= t <= r + after_s for r in rolls_at):
            near = max(near, lat * 1000)
        else:
            away = max(away, lat * 1000)
    return near, away


class Sampler:
    """Every 20 ms, from `start`: the machine's Dirty and Writeback (MiB), the broker's CPU
    seconds, the machine's idle CPU seconds, this (the client's) process's CPU seconds, and when
    a new .log file appeared (a roll)."""

    def __init__(self, directory: Path, pid: int, start: float) -> None:
        import threading

        self.directory, self.pid, self.start = directory, pid, start
        self.samples: list[tuple] = []
        self.rolls_at: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        segments = 1
        while not self._stop.wait(0.02):
            t = round(time.perf_counter() - self.start, 3)
            mem = {}
            with open("/proc/meminfo") as f:
                for line in f:
                    k, v = line.split(":", 1)
                    if k in ("Dirty", "Writeback"):
                        mem[k] = int(v.split()[0]) // 1024
            with open(f"/proc/{self.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            with open("/proc/stat") as f:
                fields = f.readline().split()
            idle = int(fields[4]) / os.sysconf("SC_CLK_TCK")
            steal = int(fields[8]) / os.sysconf("SC_CLK_TCK")  # the host ran something else on our vCPUs
            n = sum(1 for _ in self.directory.glob("*.log"))
            if n > segments:
                self.rolls_at.append(t)
            segments = max(segments, n)
            me = os.times()
            self.samples.append((t, mem.get("Dirty"), mem.get("Writeback"), cpu, idle, me.user + me.system,
                                 run_queue_s(self.pid), run_queue_s(os.getpid()), steal))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def steal_ms(self) -> tuple[float, list[tuple[float, float]]]:
        """CPU time the host took from this VM's vCPUs (/proc/stat steal), in ms: over the run,
        and per 100 ms where it was more than 10 ms ((time, ms))."""
        s = self.samples
        if len(s) < 2:
            return 0.0, []
        spikes = [(a[0], round(1000 * (b[8] - a[8]), 1)) for a, b in zip(s, s[5:]) if b[8] - a[8] > 0.01]
        return round(1000 * (s[-1][8] - s[0][8]), 1), spikes[::5]

    def cpu_wait_pct(self) -> tuple[float, float]:
        """How long the broker's and the client's threads were runnable but waiting for a CPU
        (schedstat run_delay, summed over threads), as % of the run's wall time."""
        s = self.samples
        if len(s) < 2:
            return 0.0, 0.0
        dt = s[-1][0] - s[0][0]
        return round(100 * (s[-1][6] - s[0][6]) / dt, 1), round(100 * (s[-1][7] - s[0][7]) / dt, 1)

    def rest_pct(self, window_s: float = 0.5) -> tuple[float, float]:
        """The CPU (% of one core) that neither the broker nor the client used, nor was idle:
        over the whole run, and the most in any `window_s` — other processes, and kernel threads
        (writeback, I/O completion) that work for the broker."""
        s = self.samples
        step = max(1, int(window_s / 0.02))
        cores = os.cpu_count() or 1

        def rest(a, b) -> float:
            dt = b[0] - a[0]
            return 100 * (cores * dt - (b[4] - a[4]) - (b[3] - a[3]) - (b[5] - a[5])) / dt

        if len(s) <= step:
            return 0.0, 0.0
        return rest(s[0], s[-1]), max(rest(a, b) for a, b in zip(s, s[step:]))


def run_queue_s(pid: int) -> float:
    """Seconds the threads of `pid` have spent runnable, waiting for a CPU (schedstat's
    run_delay; threads that ended are not counted)."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[1])
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total / 1e9


def loadavg() -> str:
    return " ".join(open("/proc/loadavg").read().split()[:3])


def main(argv: list[str] | None = None) -> int:
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "_probe_child":
        data, seg, mb_s, seconds, overrides = sys.argv[2:7]
        print(json.dumps(probe_child(Path(data), int(seg), float(mb_s), float(seconds), json.loads(overrides))))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("part", choices=("probe", "broker"))
    parser.add_argument("--src", action="append", default=[], help="PATH[::KEY=VALUE,…], repeatable")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--segment-bytes", type=int, default=GiB)
    parser.add_argument("--acks", default="1,-1")
    parser.add_argument("--rate", type=float, default=DEFAULT_RATE)
    parser.add_argument("--rolls", type=int, default=1)
    parser.add_argument("--attempts", type=int, default=3, help="tries of a case disturbed by other processes")
    parser.add_argument("--seconds", type=float, default=0.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--probe-mb-s", type=float, default=290.0)
    parser.add_argument("--probe-seconds", type=float, default=8.0)
    parser.add_argument("--root", default=None, help="where the data directories go (default: a temp dir under /tmp)")
    # Off by default: freeing the dd's GBs right before a case makes this VM report them to the
    # host ~2 s later (free page reporting), in the middle of the measured window, where the
    # broker's new page-cache pages then fault back in: 100-250 ms stalls and host steal that a
    # steadily running broker never sees (docs/benchmarks.md, "Method").
    parser.add_argument("--prefault", action="store_true",
                        help="an untimed dd write before each broker case (common.prefault)")
    parser.add_argument("--json", default=None)
    parser.add_argument("--wait-idle-s", type=float, default=300.0,
                        help="how long to wait for an idle machine before the runs and a redone case")
    parser.add_argument("--stalls", action="store_true",
                        help="start each broker through loop_stalls.py and report its event loop's stalls")
    parser.add_argument("--keep-stalls", default=None, metavar="DIR", help="keep loop_stalls.py's recordings there")
    parser.add_argument("--stacks", action="store_true", help="with --stalls: the loop's stack in stalls > 3 ms")
    parser.add_argument("--attach", default=None,
                        help="a shell command run beside each broker case ({pid}: the broker's, {tag}: the case), "
                             "e.g. 'perf trace --duration 5 -p {pid} -o /tmp/t-{tag}.txt'; SIGINTed at the end")
    args = parser.parse_args(argv)
    trees = args.src or [str(HERE.parent.parent / "src")]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the finally blocks remove the data
    root = Path(tempfile.mkdtemp(prefix="bench-roll-", dir=args.root))
    for line in machine_info(root).lines():
        say(line)
    say(f"load average at start: {loadavg()}")
    results = []
    try:
        wait_idle(args.wait_idle_s)
        for rep in range(args.repeat):
            for i, tree in enumerate(trees):
                if args.part == "probe":
                    r = run_probe(tree, root, args)
                    r["tree"] = tree
                    r["load"] = loadavg()
                    say(f"[{rep}] {tree}: appends {fmt(r['appends'])}; during fsync {fmt(r['during_fsync'])}; "
                        f"rolls {[round(x, 1) for x in r['roll_appends']]} ms; fsyncs {r['fsyncs_s']}; "
                        f"{r['achieved_mb_s']:.0f} MB/s; process CPU {r['process_cpu_s']} s; load {r['load']}")
                    results.append(r)
                else:
                    for acks in (int(a) for a in args.acks.split(",")):
                        for attempt in range(args.attempts):
                            r = broker_case(tree, root, acks, args, f"{rep}-{i}-{acks}")
                            r["load"], r["attempt"] = loadavg(), attempt
                            if r["rest_max_pct"] <= DISTURBED_MAX_PCT:
                                break
                            say(f"  disturbed: {r['rest_max_pct']:.0f}% of a core used by others in 0.5 s "
                                f"(p99 {r['p99']:.1f} ms); again")
                            wait_idle(min(120, args.wait_idle_s))
                        r["disturbed"] = r["rest_max_pct"] > DISTURBED_MAX_PCT
                        say(f"[{rep}] {tree} acks={acks}: {fmt(r)}, {r['segments']} segments, "
                            f"{r['achieved']:,.0f}/s, queue-full {r['queue_full']}, rest {r['rest_pct']:.0f}% "
                            f"(max {r['rest_max_pct']:.0f}%), rolls at {r['rolls_at']} s, "
                            f"worst {r['worst'][:3]}, CPU waits broker/client {r['cpu_wait_pct']} %, "
                            f"steal {r['steal_ms'][0]} ms {r['steal_ms'][1][:8]}, load {r['load']}")
                        if "stalls" in r:
                            say_stalls(r["stalls"])
                        results.append(r)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    summary(results, args.part)
    return 0


def say_stalls(st: dict) -> None:
    for key in ("stalls_near_roll", "stalls_elsewhere"):
        say(f"    {key}: {st[key]}")
    say(f"    gc (gen: n, total ms, max ms): {st['gc']}")
    say(f"    slow calls (n ≥ 1 ms, max ms, max CPU ms, n ≥ 2 ms): {st['slow_calls']}")
    for row in st["top_stalls"][:5]:
        say(f"    stall at {row[0]} s: {row[1]} ms (on CPU {row[2]}, waiting {row[3]}, off CPU {row[4]}) {row[5]}")
    say(f"    worst latencies (at s, ms, of which loop stalls ms): {st['worst_latencies'][:6]}")
    for t, overdue, frames in st["stacks"][:6]:
        say(f"    stack at {t} s, {overdue} ms overdue: {' < '.join(frames[:6])}")


def fmt(s: dict) -> str:
    if not s.get("n"):
        return "-"
    return f"p50 {s['p50']:.2f} p99 {s['p99']:.2f} p99.9 {s['p999']:.2f} max {s['max']:.1f} ms (n={s['n']})"


def summary(results: list[dict], part: str) -> None:
    rows = []
    if part == "probe":
        for tree in dict.fromkeys(r["tree"] for r in results):
            runs = [r for r in results if r["tree"] == tree]
            rows.append([tree, " / ".join(f"{r['appends']['p99']:.2f}" for r in runs),
                         " / ".join(f"{r['appends']['max']:.1f}" for r in runs),
                         " / ".join(f"{r['during_fsync'].get('p99', 0):.2f}" for r in runs),
                         " / ".join(f"{max(r['roll_appends'] or [0]):.1f}" for r in runs)])
        print(table(["tree", "append p99 ms", "append max ms", "p99 during fsync", "roll append ms"], rows))
    else:
        for key in dict.fromkeys((r["tree"], r["acks"]) for r in results):
            runs = [r for r in results if (r["tree"], r["acks"]) == key]
            rows.append([key[0], "all" if key[1] == -1 else key[1], f"{median([r['p99'] for r in runs]):.1f}",
                         " / ".join(f"{r['p99']:.1f}" for r in runs), " / ".join(f"{r['p999']:.1f}" for r in runs),
                         " / ".join(f"{r['near_roll_max']:.0f}" for r in runs),
                         " / ".join(f"{r['elsewhere_max']:.0f}" for r in runs),
                         " / ".join(f"{r['rest_max_pct']:.0f}" for r in runs)])
        print(table(["tree", "acks", "p99 ms (median)", "p99 each", "p99.9 each", "max ≤ 0.8 s after the roll",
                     "max elsewhere", "others' CPU, max in 0.5 s (%)"], rows))
        rows = []
        for key in dict.fromkeys((r["tree"], r["acks"]) for r in results):
            runs = [r for r in results if (r["tree"], r["acks"]) == key]
            row = [key[0], "all" if key[1] == -1 else key[1], f"{median([r['p50'] for r in runs]):.2f}",
                   f"{median([r['p99'] for r in runs]):.1f}", f"{median([r['p999'] for r in runs]):.1f}",
                   f"{median([r['max'] for r in runs]):.1f}",
                   " / ".join(f"{r['cpu_wait_pct'][0]:.0f}, {r['cpu_wait_pct'][1]:.0f}" for r in runs)]
            stalled = [r["stalls"] for r in runs if "stalls" in r]
            if stalled:
                def total(st, field):
                    return st["stalls_near_roll"][field] + st["stalls_elsewhere"][field]
                row += [" / ".join(f"{total(st, 'n')}: {total(st, 'ms'):.0f}" for st in stalled),
                        " / ".join(f"{total(st, 'on_cpu_ms'):.0f} / {total(st, 'waiting_ms'):.0f} / "
                                   f"{total(st, 'off_cpu_ms'):.0f}" for st in stalled)]
            else:
                row += ["", ""]
            rows.append(row)
        print(table(["tree", "acks", "p50 ms (median)", "p99", "p99.9", "max", "run-queue wait broker, client (% of wall) each",
                     "loop stalls > 2 ms each (n: ms)", "stall ms on CPU / waiting for a CPU / off CPU"], rows))


if __name__ == "__main__":
    sys.exit(main())
