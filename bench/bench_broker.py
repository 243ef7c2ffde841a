"""Broker benchmark: a real `logbroker serve` subprocess driven by confluent-kafka,
in one run beside the machine's ceilings (bench_ceilings.py).

    .venv/bin/python bench/bench_broker.py              # ~1 GB per 1 KiB case, ~4 minutes
    .venv/bin/python bench/bench_broker.py --quick      # a quarter of the volume, ~1.5 minutes
    .venv/bin/python bench/bench_broker.py --profile    # adds py-spy profiles of the broker
    .venv/bin/python bench/bench_broker.py --wait-idle 900   # first wait for an idle machine

The machine is shared (2 cores): each run measures the CPU other processes used meanwhile, and a
run during which they used more than 25% of a core is repeated after waiting for the machine to
go idle (up to 4 tries); the report shows it as "rest of machine".

Client settings: acks=1, linger.ms=5, batch.size=65536 unless stated; records have no
key. Consumer groups are not used: the consumer assign()s partitions at OFFSET_BEGINNING.

1. Produce 100 B and 1 KiB records, acks=1 and acks=-1, to 1 and to 3 partitions (3 runs per
   case, interleaved, a fresh topic each; medians): records/s and payload MB/s, from the first
   produce() to the end of flush(); the broker's CPU seconds (utime+stime from /proc/<pid>/stat)
   per GB appended to the log and per Produce request (the client's request count from
   librdkafka's statistics); the broker's peak VmRSS and RssAnon (sampled every 50 ms).
2. Consume the 1-partition acks=1 topics back, with the Python consumer (fetch.max.bytes 64 MiB,
   max.partition.fetch.bytes 16 MiB) and with kcat (librdkafka's C consumer): records/s, MB/s and
   the broker's CPU seconds per GB fetched.
3. Produce latency (delivery callback time - produce() time, every 8th record) of 1 KiB records
   at a fixed rate of half the max measured in 1 for the same acks (the goal), and at 1/8 (also
   with linger.ms=0); at 1/4 with the default segment.bytes and with 256 MiB segments, which
   roll inside the window: p50/p99/p99.9 after a warm-up. On a broker of its own, started on an
   empty data directory once the data of 1 and 2 is removed (the report says why).
4. Broker memory: VmRSS and RssAnon idle 1 s after start, peak under load, VmHWM after the
   produce and consume runs.
5. Start: spawn -> first accepted TCP connection (median of 5, fresh data dir each), the broker's
   own "started in N ms" line, and SIGTERM -> exit; the same with `hypothesis` (a test extra
   that kio imports when present) made unimportable, as an install without it would start.
6. Ceilings, same run: the client alone against librdkafka's mock cluster, loopback TCP (send,
   sendfile, read+send), dd to the broker's filesystem, a bare asyncio server's start.

"GB" is 10^9 bytes. MB/s counts record values (as Kafka's perf tools do); CPU-s per GB counts
the bytes of the log (batch and record headers included), which is what sendfile moves.
--profile attaches py-spy (`pip install py-spy` into the venv; not a project dependency) to the
broker during a 1 KiB produce with acks=1 and with acks=-1 and a 1 KiB consume, and runs the
broker once under `python -X importtime`; it prints the top functions by own and by total time.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_ceilings import (  # noqa: E402
    CONSUMER_SETTINGS,
    DISTURBED_PCT,
    GB,
    MB,
    QUIET,
    MachineCpu,
    RequestCounter,
    ceiling_tables,
    consume_loop,
    cpu_seconds_self,
    free_port,
    make_producer,
    measure_all,
    paced_produce,
    produce_loop,
    rest,
    undisturbed,
    wait_for_connect,
    wait_idle,
)
from common import (  # noqa: E402
    GiB,
    MiB,
    is_tmpfs,
    machine_info,
    median,
    percentile,
    prefault,
    remove_written,
    say,
    table,
    write_json,
)

from logbroker.testing import BrokerProcess  # noqa: E402

GOAL_PRODUCE_1K_MSGS = 370_000
GOAL_ACKS_ALL_WITHIN = 0.10
GOAL_P99_MS = 5.0
GOAL_START_MS = 250.0
GOAL_IDLE_RSS_MIB = 40.0
GOAL_ANON_LOAD_MIB = 200.0
ROLL_SEGMENT_BYTES = 256 * MiB
LATENCY_SAMPLE_EVERY = 8  # one record in 8 carries a delivery callback: the client stays light
RECORD_OVERHEAD = 12  # bytes per record in the log beyond the value, about (no key, no headers)
STARTED_MS = re.compile(r"started in (\d+) ms")
CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True, slots=True)
class Sizes:
    produce_counts: dict  # record size -> records per produce case, over all its runs
    reps: int  # runs per case, interleaved; results are medians
    latency_s: float
    latency_warmup_s: float
    start_runs: int
    ceiling_bytes: int


FULL = Sizes({1024: 999_999, 100: 1_999_998}, reps=3, latency_s=5.0, latency_warmup_s=1.0, start_runs=5,
             ceiling_bytes=GiB)
QUICK = Sizes({1024: 250_000, 100: 500_000}, reps=2, latency_s=2.0, latency_warmup_s=0.5, start_runs=3,
              ceiling_bytes=256 * MiB)


# --- /proc ------------------------------------------------------------------------------------

def proc_user_sys_s(pid: int) -> tuple[float, float]:
    """(utime, stime) of a process, seconds. Apart, because on this VM the host's cost of the
    memory a page-cache write takes lands in stime (docs/benchmarks.md, "Method"): utime is the broker's own work, steadier from run to run."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK


def proc_cpu_s(pid: int) -> float:
    """utime + stime of a process, seconds."""
    return sum(proc_user_sys_s(pid))


def user_sys_per_gb(before: tuple[float, float], after: tuple[float, float], nbytes: int) -> dict:
    """The broker's utime and stime per GB appended between two proc_user_sys_s readings."""
    return {"broker_user_s_per_gb": (after[0] - before[0]) / (nbytes / GB),
            "broker_sys_s_per_gb": (after[1] - before[1]) / (nbytes / GB)}


def proc_mem_mib(pid: int) -> dict[str, float]:
    """VmRSS, RssAnon, RssFile, VmHWM of a process, MiB."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile", "VmHWM"):
                out[key] = int(rest.split()[0]) / 1024
    return out


class MemSampler:
    """Peak VmRSS and RssAnon of a process, sampled every `interval_s` in a thread."""

    def __init__(self, pid: int, interval_s: float = 0.05) -> None:
        self.pid, self.interval_s = pid, interval_s
        self.peak = {"VmRSS": 0.0, "RssAnon": 0.0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            mem = proc_mem_mib(self.pid)
            for key in self.peak:
                self.peak[key] = max(self.peak[key], mem[key])
            self._stop.wait(self.interval_s)

    def __enter__(self) -> MemSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        mem = proc_mem_mib(self.pid)
        for key in self.peak:
            self.peak[key] = max(self.peak[key], mem[key])


def log_bytes(data_dir: Path, topic: str) -> int:
    return sum(p.stat().st_size for p in data_dir.glob(f"{topic}-*/*.log"))


# --- the broker -------------------------------------------------------------------------------

class Bench:
    def __init__(self, root: Path, sizes: Sizes) -> None:
        self.root = root
        self.sizes = sizes
        self.broker = BrokerProcess(root / "broker")
        self.pid = 0
        self.admin = None
        self.watermarks = None
        self.topics: list[str] = []  # a consumer used only for get_watermark_offsets

    def start(self) -> dict:
        from confluent_kafka import Consumer
        from confluent_kafka.admin import AdminClient

        self.broker.start()
        self.pid = self.broker.process.pid
        time.sleep(1.0)
        idle = proc_mem_mib(self.pid)
        self.admin = AdminClient({**QUIET, "bootstrap.servers": self.broker.bootstrap})
        self.watermarks = Consumer({**QUIET, "bootstrap.servers": self.broker.bootstrap, "group.id": "bench"})
        return idle

    def create_topic(self, name: str, partitions: int, config: dict | None = None) -> None:
        from confluent_kafka.admin import NewTopic

        for future in self.admin.create_topics([NewTopic(name, partitions, 1, config=config or {})]).values():
            future.result(30)
        self.topics.append(name)

    def segment_count(self, topic: str) -> int:
        return len(list(self.broker.data_dir.glob(f"{topic}-*/*.log")))

    def end_offsets(self, topic: str, partitions: int) -> int:
        from confluent_kafka import TopicPartition

        return sum(self.watermarks.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                   for p in range(partitions))

    # -- 1. produce -------------------------------------------------------------------------
    def produce_case(self, size: int, partitions: int, acks: int, count: int, *, tag: str = "",
                     prefault_first: bool = True, spy: PySpy | None = None,
                     producer_config: dict | None = None) -> dict:
        """`producer_config` overrides the client's settings (PRODUCER_DEFAULTS and the rest)."""
        topic = f"{tag}p{partitions}-{size}b-acks{'all' if acks == -1 else acks}"
        self.create_topic(topic, partitions)
        requests = RequestCounter()
        producer, errors = make_producer({"bootstrap.servers": self.broker.bootstrap, "acks": acks,
                                          **requests.config(), **(producer_config or {})})
        value = os.urandom(size)
        producer.produce(topic, value)  # connect and learn the leader, untimed
        producer.flush(30)
        bytes0 = log_bytes(self.broker.data_dir, topic)
        tx0 = requests.read(producer)
        with spy or contextlib.nullcontext():
            if prefault_first:  # see common.prefault: the log's new page-cache pages, faulted in
                prefault(self.root, count * (size + RECORD_OVERHEAD))
            if spy:
                spy.mark()
            split0 = proc_user_sys_s(self.pid)
            with MachineCpu() as machine, MemSampler(self.pid) as mem:
                wall, client_cpu = produce_loop(producer, topic, value, count)
            split1 = proc_user_sys_s(self.pid)
            broker_cpu = sum(split1) - sum(split0)
        n_requests = requests.read(producer) - tx0
        del producer
        if errors:
            raise RuntimeError(f"{topic}: {len(errors)} failed deliveries, first: {errors[0]}")
        end = self.end_offsets(topic, partitions)
        if end != count + 1:
            raise RuntimeError(f"{topic}: end offsets sum to {end}, expected {count + 1}")
        nbytes = log_bytes(self.broker.data_dir, topic) - bytes0
        return {"topic": topic, "size": size, "partitions": partitions, "acks": acks, "count": count,
                "prefault": prefault_first, "wall_s": wall, "msgs_s": count / wall, "mb_s": count * size / wall / MB,
                "log_bytes": nbytes, "broker_cpu_s": broker_cpu, "requests": n_requests,
                "records_per_request": count / max(1, n_requests),
                "broker_us_per_request": broker_cpu / max(1, n_requests) * 1e6,
                "broker_cpu_s_per_gb": broker_cpu / (nbytes / GB), "broker_cpu_pct": 100 * broker_cpu / wall,
                "client_cpu_pct": 100 * client_cpu / wall,
                "rest_cpu_pct": machine.busy_pct - 100 * (broker_cpu + client_cpu) / wall,
                "peak_rss_mib": mem.peak["VmRSS"],
                "peak_anon_mib": mem.peak["RssAnon"], **user_sys_per_gb(split0, split1, nbytes)}

    def kcat_produce_case(self, size: int, count: int, *, tag: str = "") -> dict:
        """`count` records of `size` bytes produced by kcat (librdkafka's C producer, its default
        batching) to a one-partition topic: the broker's CPU per GB when the client costs next to
        nothing. The records are lines of a file written first (untimed)."""
        topic = f"{tag}kcat-{size}b"
        self.create_topic(topic, 1)
        lines = self.root / f"{topic}.lines"
        alphabet = bytes(range(0x21, 0x7F))
        with open(lines, "wb") as f:
            block = bytes(alphabet[b % len(alphabet)] for b in os.urandom(size - 1)) + b"\n"
            for _ in range(count):
                f.write(block)
        bytes0 = log_bytes(self.broker.data_dir, topic)
        split0 = proc_user_sys_s(self.pid)
        start = time.perf_counter()
        subprocess.run(["kcat", "-P", "-q", "-b", self.broker.bootstrap, "-t", topic, "-p", "0",
                        "-X", "linger.ms=5", "-l", str(lines)], check=True, timeout=600)
        wall = time.perf_counter() - start
        split1 = proc_user_sys_s(self.pid)
        broker_cpu = sum(split1) - sum(split0)
        lines.unlink()
        end = self.end_offsets(topic, 1)
        if end != count:
            raise RuntimeError(f"{topic}: end offset {end}, expected {count}")
        nbytes = log_bytes(self.broker.data_dir, topic) - bytes0
        return {"topic": topic, "size": size, "count": count, "wall_s": wall, "msgs_s": count / wall,
                "log_bytes": nbytes, "broker_cpu_s": broker_cpu,
                "broker_cpu_s_per_gb": broker_cpu / (nbytes / GB), "broker_cpu_pct": 100 * broker_cpu / wall,
                **user_sys_per_gb(split0, split1, nbytes)}

    # -- 2. consume -------------------------------------------------------------------------
    def consume_case(self, topic: str, size: int, count: int, client: str, *, spy: PySpy | None = None) -> dict:
        nbytes = log_bytes(self.broker.data_dir, topic)
        with spy or contextlib.nullcontext():
            if spy:
                spy.mark()
            cpu0 = proc_cpu_s(self.pid)
            with MachineCpu() as machine:
                if client == "python":
                    wall, client_cpu, payload = consume_loop(self.broker.bootstrap, [(topic, 0)], count)
                else:
                    wall, client_cpu, payload = self.kcat_consume(topic, count, size)
            broker_cpu = proc_cpu_s(self.pid) - cpu0
        return {"topic": topic, "client": client, "size": size, "count": count, "wall_s": wall,
                "msgs_s": count / wall, "mb_s": payload / wall / MB, "log_bytes": nbytes,
                "broker_cpu_s": broker_cpu, "broker_cpu_s_per_gb": broker_cpu / (nbytes / GB),
                "broker_cpu_pct": 100 * broker_cpu / wall, "client_cpu_pct": 100 * client_cpu / wall,
                "rest_cpu_pct": machine.busy_pct - 100 * (broker_cpu + client_cpu) / wall}

    def kcat_consume(self, topic: str, count: int, size: int) -> tuple[float, float, int]:
        """kcat -C from the beginning until `count` records; wall from spawn to exit."""
        cmd = ["kcat", "-C", "-q", "-b", self.broker.bootstrap, "-t", topic, "-p", "0", "-o", "beginning",
               "-c", str(count), "-f", "%o\n"]
        for key in ("fetch.max.bytes", "max.partition.fetch.bytes", "receive.message.max.bytes",
                    "queued.min.messages", "queued.max.messages.kbytes"):
            cmd += ["-X", f"{key}={CONSUMER_SETTINGS[key]}"]
        before = os.times()
        start = time.perf_counter()
        out = subprocess.run(cmd, capture_output=True, check=True, timeout=300).stdout
        wall = time.perf_counter() - start
        after = os.times()
        lines = out.count(b"\n")
        if lines != count:
            raise RuntimeError(f"kcat printed {lines} records, expected {count}")
        child_cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
        return wall, child_cpu, count * size

    # -- 3. latency -------------------------------------------------------------------------
    def latency_case(self, acks: int, rate: float, linger_ms: int, size: int = 1024, tag: str = "",
                     topic_config: dict | None = None) -> dict:
        topic = f"{tag}lat-{size}b-acks{'all' if acks == -1 else acks}-linger{linger_ms}"
        self.create_topic(topic, 1, topic_config)
        latencies: list[float] = []
        rd_latencies: list[float] = []
        requests = RequestCounter()
        failed: list = []
        clock = time.perf_counter

        def delivered(sent_at: float, record: bool, err, msg) -> None:
            if err is not None:
                failed.append(err)
            elif record:
                latencies.append(clock() - sent_at)
                rd_latencies.append(msg.latency())

        from confluent_kafka import Producer

        producer = Producer({**QUIET, "bootstrap.servers": self.broker.bootstrap, "acks": acks,
                             "linger.ms": linger_ms, "batch.size": 65536, **requests.config()})
        value = os.urandom(size)
        producer.produce(topic, value)
        producer.flush(30)
        tx0 = requests.read(producer)
        warmup, duration = self.sizes.latency_warmup_s, self.sizes.latency_s
        # No prefault here (unlike the throughput cases): the GBs it frees are reported to the
        # host ~2 s later, inside the window, and the latencies would be that (bench_roll_latency).
        machine = MachineCpu().__enter__()
        cpu0, client_cpu0 = proc_cpu_s(self.pid), cpu_seconds_self()
        start = clock()
        record_from, end = start + warmup, start + warmup + duration
        sent, queue_full = paced_produce(producer, topic, value, rate=rate, start=start, end=end,
                                         on_delivery_for=lambda t: partial(delivered, t, t >= record_from),
                                         sample_every=LATENCY_SAMPLE_EVERY)
        producer.flush(30)
        machine.__exit__()
        wall = clock() - start
        broker_cpu, client_cpu = proc_cpu_s(self.pid) - cpu0, cpu_seconds_self() - client_cpu0
        n_requests = requests.read(producer) - tx0
        busy_others = 100 * (broker_cpu + client_cpu) / wall
        achieved = sent / (end - start)
        del producer
        if failed:
            raise RuntimeError(f"{topic}: {len(failed)} failed deliveries: {failed[0]}")
        lat = sorted(x * 1000 for x in latencies)
        rd = sorted(x * 1000 for x in rd_latencies)
        return {"topic": topic, "acks": acks, "linger_ms": linger_ms, "target_rate": rate, "achieved_rate": achieved,
                "queue_full_waits": queue_full, "rest_cpu_pct": machine.busy_pct - busy_others,
                "broker_cpu_pct": 100 * broker_cpu / wall, "client_cpu_pct": 100 * client_cpu / wall,
                "requests": n_requests, "records_per_request": sent / max(1, n_requests),
                "broker_us_per_request": broker_cpu / max(1, n_requests) * 1e6,
                "rd_p50_ms": percentile(rd, 50), "rd_p99_ms": percentile(rd, 99), "rd_p999_ms": percentile(rd, 99.9),
                "count": len(lat), "p50_ms": percentile(lat, 50), "p99_ms": percentile(lat, 99),
                "p999_ms": percentile(lat, 99.9), "max_ms": lat[-1], "mean_ms": sum(lat) / len(lat)}

    def stop(self) -> dict:
        start = time.perf_counter()
        code = self.broker.stop()
        return {"exit_code": code, "stop_ms": (time.perf_counter() - start) * 1000}


# --- 5. start ---------------------------------------------------------------------------------

# kio imports hypothesis whenever it is installed (to register strategies); it is a test extra
# of this project, so a production install does not pay for it. This runs the same CLI with the
# import blocked, as such an install would start.
WITHOUT_HYPOTHESIS = ("import sys, runpy; sys.modules['hypothesis'] = None; "
                      "runpy.run_module('logbroker.cli', run_name='__main__', alter_sys=True)")


def start_times(root: Path, runs: int, *, block_hypothesis: bool = False) -> dict:
    """Spawn → first accepted connection, fresh data dir each time; the broker's own line;
    SIGTERM → exit."""
    connect_ms, own_ms, stop_ms = [], [], []
    machine = MachineCpu().__enter__()
    before = os.times()
    for i in range(runs):
        base = root / f"start-{i}"
        base.mkdir()
        port = free_port()
        broker = BrokerProcess(base, overrides={"listeners": f"PLAINTEXT://127.0.0.1:{port}"})
        cmd = broker.command()
        if block_hypothesis:
            assert cmd[1:3] == ["-m", "logbroker.cli"], cmd
            cmd[1:3] = ["-c", WITHOUT_HYPOTHESIS]
        with open(broker.log_path, "wb") as log:
            start = time.perf_counter()
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            connect_ms.append((wait_for_connect(port, proc) - start) * 1000)
            deadline = time.monotonic() + 10
            while not (match := STARTED_MS.search(broker.log_path.read_text())):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"no 'started in' line:\n{broker.log_path.read_text()}")
                time.sleep(0.01)
            own_ms.append(float(match.group(1)))
            if i == runs - 1:
                time.sleep(1.0)
                idle_mem = proc_mem_mib(proc.pid)
            t = time.perf_counter()
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
            stop_ms.append((time.perf_counter() - t) * 1000)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        shutil.rmtree(base, ignore_errors=True)
    machine.__exit__()
    after = os.times()
    ours = sum(after[:4]) - sum(before[:4])  # this process and the brokers it waited for
    return {"rest_cpu_pct": machine.busy_pct - 100 * ours / (after.elapsed - before.elapsed),
            "idle_mem": idle_mem, "connect_ms": connect_ms, "connect_median_ms": median(connect_ms), "own_ms": own_ms,
            "own_median_ms": median(own_ms), "stop_ms": stop_ms, "stop_median_ms": median(stop_ms)}


# --- profiling (--profile) --------------------------------------------------------------------

WRAPPERS = ("_run_module_as_main ", "_run_code ", "<module> (logbroker/cli/", "serve (logbroker/cli/",
            "Command.", "Group.", "Context.", "run (asyncio/runners.py)", "Runner.run ",
            "BaseEventLoop.run_until_complete ", "BaseEventLoop.run_forever ", "BaseEventLoop._run_once ",
            "Handle._run ", "Thread._bootstrap", "Thread.run ")
FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^()]*?)(?::\d+)?\)$")


def _short(frame: str) -> str:
    m = FRAME.match(frame.strip())
    if not m:
        return frame.strip()
    path = m.group("file")
    marker = "site-packages/" if "site-packages/" in path else ("src/" if "/src/" in path else None)
    if marker:
        path = path.split(marker, 1)[1]
    elif "/lib/python" in path:
        path = "stdlib:" + path.split("/lib/python", 1)[1].split("/", 1)[1]
    return f"{m.group('func')} ({path})"


def parse_pyspy_raw(text: str, top: int = 14) -> dict:
    own: collections.Counter = collections.Counter()
    total: collections.Counter = collections.Counter()
    samples = 0
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = [_short(f) for f in stack.split(";") if f]
        frames = [f for f in frames if not f.startswith(("process ", "thread "))]
        if not frames:
            continue
        samples += n
        own[frames[-1]] += n
        for f in set(frames):
            total[f] += n
    # Frames on (nearly) every stack of the loop thread — runpy, click, asyncio.run, the loop —
    # say nothing.
    inner = [(f, n) for f, n in total.most_common() if n < 0.9 * samples and not f.startswith(WRAPPERS)]
    return {"samples": samples, "own": own.most_common(top), "total": inner[:top]}


class PySpy:
    """py-spy record --format raw on a pid, from __enter__ until __exit__ (SIGINT)."""

    def __init__(self, pid: int, out: Path, rate: int = 500) -> None:
        exe = Path(sys.executable).with_name("py-spy")
        self.cmd = [str(exe) if exe.exists() else "py-spy", "record", "--pid", str(pid), "--format", "raw",
                    "--output", str(out), "--rate", str(rate), "--nonblocking"]
        self.out = out
        self.rate = rate

    def __enter__(self) -> PySpy:
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(0.5)  # let it attach
        if self.proc.poll() is not None:
            raise RuntimeError(f"py-spy failed: {self.proc.stderr.read().decode()}")
        self.start = time.perf_counter()
        return self

    def mark(self) -> None:
        """The measured work starts now (the broker idles before it: no samples are taken)."""
        self.start = time.perf_counter()

    def __exit__(self, *exc) -> None:
        self.seconds = time.perf_counter() - self.start
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(60)

    def result(self, top: int = 14) -> dict:
        r = parse_pyspy_raw(self.out.read_text(), top)
        r["seconds"] = self.seconds
        r["active_pct"] = 100 * r["samples"] / (self.rate * self.seconds)
        return r


def import_times(root: Path, top: int = 20) -> dict:
    """Start the broker once under `python -X importtime`; the slowest top-level imports."""
    base = root / "importtime"
    base.mkdir()
    port = free_port()
    broker = BrokerProcess(base, overrides={"listeners": f"PLAINTEXT://127.0.0.1:{port}"})
    cmd = broker.command()
    cmd.insert(1, "-X")
    cmd.insert(2, "importtime")
    err_path = base / "stderr.txt"
    with open(err_path, "wb") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL)
    try:
        connect_ms = (wait_for_connect(port, proc) - start) * 1000
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    rows, total_us = [], 0
    for line in err_path.read_text().splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \| (\s*)(\S+)", line)
        if not m:
            continue
        depth = len(m.group(3)) // 2
        rows.append((int(m.group(2)), int(m.group(1)), depth, m.group(4)))
        if depth == 0:
            total_us += int(m.group(2))
    rows.sort(reverse=True)
    shutil.rmtree(base, ignore_errors=True)
    return {"connect_ms_under_importtime": connect_ms, "total_import_ms": total_us / 1000,
            "top": [(cum / 1000, own / 1000, depth, name) for cum, own, depth, name in rows[:top]]}


# --- the run ----------------------------------------------------------------------------------

def run(root: Path, sizes: Sizes, *, profile: bool, ceilings: bool) -> dict:
    results: dict = {"code": code_version()}
    with MachineCpu() as idle_machine:
        time.sleep(2.0)
    results["machine_busy_before_pct"] = idle_machine.busy_pct
    if idle_machine.busy_pct > 20:
        say(f"warning: the machine is already busy ({idle_machine.busy_pct:.0f}% of one core) — "
            "the numbers will be low; run on an idle machine")
    if ceilings:
        results["ceilings"] = measure_all(root, nbytes=sizes.ceiling_bytes, counts=sizes.produce_counts,
                                          start_runs=sizes.start_runs)
    say("start: spawn -> first accepted connection")
    results["start"] = undisturbed(lambda attempt: start_times(root, sizes.start_runs))
    results["start_without_hypothesis"] = undisturbed(
        lambda attempt: start_times(root, sizes.start_runs, block_hypothesis=True))

    bench = Bench(root, sizes)
    say("broker: start, idle memory")
    results["idle_mem"] = bench.start()
    try:
        produce = {}
        for rep in range(sizes.reps):
            for size in (1024, 100):
                count = sizes.produce_counts[size] // sizes.reps
                for partitions in (1, 3):
                    for acks in (1, -1):
                        say(f"produce {size} B x {count:,}, {partitions} partition(s), acks={acks} "
                            f"(run {rep + 1} of {sizes.reps})")
                        r = undisturbed(lambda attempt: bench.produce_case(
                            size, partitions, acks, count, tag=f"r{rep}a{attempt}-"))
                        produce.setdefault((size, partitions, acks), []).append(r)
                        say(f"  {r['msgs_s']:,.0f} msgs/s, {r['mb_s']:,.1f} MB/s, broker CPU {r['broker_cpu_pct']:.0f}%, "
                            f"client {r['client_cpu_pct']:.0f}%, rest of the machine {r['rest_cpu_pct']:.0f}%")
        results["produce"] = [summarize(runs) for runs in produce.values()]
        count = sizes.produce_counts[1024] // sizes.reps
        say(f"produce 1024 B x {count:,}, 1 partition, acks=1, without the prefault")
        results["produce_no_prefault"] = summarize([undisturbed(lambda attempt: bench.produce_case(
            1024, 1, 1, count, tag=f"noprefault{attempt}-", prefault_first=False))])
        consume = []
        for size in (1024, 100):
            count = sizes.produce_counts[size] // sizes.reps + 1
            for client in ("python", "kcat"):
                runs = []
                for rep in range(sizes.reps):
                    say(f"consume {size} B x {count:,} with {client} (run {rep + 1} of {sizes.reps})")
                    topic = produce[(size, 1, 1)][rep]["topic"]
                    runs.append(undisturbed(lambda attempt: bench.consume_case(topic, size, count, client)))
                    say(f"  {runs[-1]['msgs_s']:,.0f} msgs/s, {runs[-1]['mb_s']:,.1f} MB/s, "
                        f"broker CPU {runs[-1]['broker_cpu_pct']:.0f}%")
                consume.append(summarize(runs))
        results["consume"] = consume
        time.sleep(1.0)
        results["after_mem"] = proc_mem_mib(bench.pid)
        # The latency rows run on a broker of their own whose data directory starts empty, after
        # the GBs written above are removed and synced: kept, they leave the page cache only
        # memory this VM has returned to the host, whose writes cost ~8x the kernel CPU, and a
        # half-load window then measures that (docs/benchmarks.md, "Method"
        # on this VM"). bench_roll_latency.py removes its cases the same way.
        bench.stop()
        remove_written(bench.broker.data_dir)
        bench = Bench(root / "latency", sizes)
        bench.start()
        latency = []
        for fraction, linger in ((2, 5), (8, 5), (8, 0)):
            for acks in (1, -1):
                rate = round(median([r["msgs_s"] for r in produce[(1024, 1, acks)]]) / fraction, -2)
                say(f"latency 1 KiB acks={acks} linger.ms={linger} at {rate:,.0f} msgs/s (1/{fraction} of the max)")
                r = undisturbed(lambda attempt: bench.latency_case(acks, rate, linger,
                                                                   tag=f"f{fraction}a{attempt}-"))
                r["load"] = "half" if fraction == 2 else f"1/{fraction}"
                r["segments"] = bench.segment_count(r["topic"])
                latency.append(r)
                say(f"  p50 {r['p50_ms']:.2f} ms, p99 {r['p99_ms']:.2f} ms")
        # Segment rolls: at a quarter of the max, the default 1 GiB segment does not fill in the
        # window; with segment.bytes 256 MiB it rolls a few times.
        rate = round(median([r["msgs_s"] for r in produce[(1024, 1, 1)]]) / 4, -2)
        for segment_bytes in (None, ROLL_SEGMENT_BYTES):
            label = "1/4, 256 MiB segments" if segment_bytes else "1/4"
            say(f"latency 1 KiB acks=1 linger.ms=5 at {rate:,.0f} msgs/s ({label})")
            config = {"segment.bytes": str(segment_bytes)} if segment_bytes else None
            r = undisturbed(lambda attempt: bench.latency_case(1, rate, 5, tag=f"q{bool(segment_bytes):d}a{attempt}-",
                                                               topic_config=config))
            r["load"] = label
            r["segments"] = bench.segment_count(r["topic"])
            latency.append(r)
            say(f"  p50 {r['p50_ms']:.2f} ms, p99 {r['p99_ms']:.2f} ms, {r['segments']} segment(s)")
        results["latency"] = latency
        if profile:
            results["profile"] = profile_broker(bench, sizes)
    finally:
        results["stop"] = bench.stop()
    if profile:
        say("profile: import times")
        results["import_times"] = import_times(root)
    return results


def code_version() -> str:
    """The commit of the working tree and how many of its files differ from it."""
    repo = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=repo, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "src"], cwd=repo, capture_output=True,
                               text=True, check=True).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    return f"commit {head}" + (f" plus {len(dirty)} uncommitted file(s) under src/" if dirty else "")


def summarize(runs: list[dict]) -> dict:
    """Medians over repeated runs of one case; peaks are maxima; each run's msgs/s kept."""
    out = dict(runs[0])
    for key in ("wall_s", "msgs_s", "mb_s", "broker_cpu_s_per_gb", "broker_cpu_pct", "client_cpu_pct",
                "records_per_request", "broker_us_per_request"):
        if key not in runs[0]:
            continue
        out[key] = median([r[key] for r in runs])
    for key in ("peak_rss_mib", "peak_anon_mib"):
        if key in runs[0]:
            out[key] = max(r[key] for r in runs)
    for key in ("count", "log_bytes", "broker_cpu_s"):
        out[key] = sum(r[key] for r in runs)
    out["runs"] = len(runs)
    out["retries"] = sum(r.get("attempts", 1) - 1 for r in runs)
    out["disturbed_runs"] = sum(1 for r in runs if r.get("disturbed"))
    out["runs_msgs_s"] = [r["msgs_s"] for r in runs]
    out["rest_cpu_pct"] = max(r["rest_cpu_pct"] for r in runs)
    out["disturbed"] = out["disturbed_runs"] > 0
    out["topics"] = [r["topic"] for r in runs]
    return out


def profile_broker(bench: Bench, sizes: Sizes) -> dict:
    """py-spy on the broker: a 1 KiB produce of the full case volume with acks=1 and with
    acks=-1 (one run each), and the consume of every 1 KiB topic of the runs above, per client."""
    out = {}
    count = sizes.produce_counts[1024]
    for acks in (1, -1):
        say(f"profile: produce 1 KiB x {count:,}, acks={acks}, under py-spy")
        spy = PySpy(bench.pid, bench.root / f"pyspy-acks{acks}.txt")
        r = bench.produce_case(1024, 1, acks, count, tag="profile-", spy=spy)
        out[f"produce 1 KiB, 1 partition, acks={acks}"] = {**spy.result(), "msgs_s": r["msgs_s"]}
    topics = [t for t in bench.topics if t.startswith("r") and t.endswith("-p1-1024b-acks1")]
    each = sizes.produce_counts[1024] // sizes.reps + 1
    for client in ("python", "kcat"):
        say(f"profile: consume 1 KiB ({len(topics)} topics) with {client} under py-spy")
        spy = PySpy(bench.pid, bench.root / f"pyspy-consume-{client}.txt")
        with spy:
            rates = [bench.consume_case(topic, 1024, each, client)["msgs_s"] for topic in topics]
        out[f"consume 1 KiB with {client}"] = {**spy.result(), "msgs_s": median(rates)}
    return out


# --- the report -------------------------------------------------------------------------------

def _ms(x: float) -> str:
    return f"{x:.2f} ms" if x < 10 else f"{x:.1f} ms"


def verdict(ok: bool) -> str:
    return "met" if ok else "**missed**"


def goals(results: dict) -> list[list[str]]:
    prod = {(r["size"], r["partitions"], r["acks"]): r for r in results["produce"]}
    best_1k = max((r for r in results["produce"] if r["size"] == 1024 and r["acks"] == 1),
                  key=lambda r: r["msgs_s"])
    client = {r["size"]: r for r in results.get("ceilings", {}).get("client", [])}
    rows = []
    ceiling = f"client alone {client[1024]['produce_msgs_s']:,.0f}/s; native broker 373,000/s" if client else "native broker 373,000/s"
    rows.append(["produce 1 KiB, acks=1 ≥ 370,000 msgs/s",
                 f"{best_1k['msgs_s']:,.0f} msgs/s ({best_1k['partitions']} partition(s))", ceiling,
                 verdict(best_1k["msgs_s"] >= GOAL_PRODUCE_1K_MSGS)])
    worst, worst_key = 0.0, None
    for (size, parts, acks), r in prod.items():
        if acks == -1:
            gap = 1 - r["msgs_s"] / prod[(size, parts, 1)]["msgs_s"]
            if worst_key is None or gap > worst:
                worst, worst_key = gap, (size, parts)
    gaps = ", ".join(f"{s} B/{p}p {100 * (1 - prod[(s, p, -1)]['msgs_s'] / prod[(s, p, 1)]['msgs_s']):+.0f}%"
                     for s in (1024, 100) for p in (1, 3))
    rows.append(["acks=-1 within 10% of acks=1 (one node)", f"slower by: {gaps}", "",
                 verdict(worst <= GOAL_ACKS_ALL_WITHIN)])
    for r in results["latency"]:
        if r["linger_ms"] != 5 or r["load"] != "half":
            continue
        low = next((x for x in results["latency"] if x["acks"] == r["acks"] and x["linger_ms"] == 5
                    and x["load"] != "half"), None)
        beside = f"{r.get('segments', '?')} segment(s) in the topic"
        if low:
            beside += f"; at {low['load']} load ({low['achieved_rate']:,.0f}/s) p99 {_ms(low['p99_ms'])}"

        rows.append([f"p99 ≤ 5 ms at half load, 1 KiB acks={r['acks']}",
                     f"p99 {_ms(r['p99_ms'])} (p50 {_ms(r['p50_ms'])}) at {r['achieved_rate']:,.0f}/s",
                     beside, verdict(r["p99_ms"] <= GOAL_P99_MS)])
    st = results["start"]
    ref = results.get("ceilings", {}).get("start_bare_asyncio")
    nh = results.get("start_without_hypothesis")
    rows.append(["start ≤ 250 ms (spawn → first accepted connection)",
                 f"{st['connect_median_ms']:.0f} ms (own line: {st['own_median_ms']:.0f} ms)",
                 (f"without `hypothesis`: {nh['connect_median_ms']:.0f} ms; " if nh else "")
                 + (f"bare asyncio {ref['median_ms']:.0f} ms" if ref else "bare asyncio 134 ms"),
                 verdict(st["connect_median_ms"] <= GOAL_START_MS)])
    idle = results["idle_mem"]
    nh_idle = nh.get("idle_mem") if nh else None
    rows.append(["idle RSS ≤ 40 MiB", f"VmRSS {idle['VmRSS']:.1f} MiB (RssAnon {idle['RssAnon']:.1f})",
                 (f"without `hypothesis`: {nh_idle['VmRSS']:.1f} MiB; " if nh_idle else "")
                 + "bare asyncio 19 MiB", verdict(idle["VmRSS"] <= GOAL_IDLE_RSS_MIB)])
    peak_anon = max(r["peak_anon_mib"] for r in results["produce"])
    peak_rss = max(r["peak_rss_mib"] for r in results["produce"])
    rows.append(["RssAnon ≤ 200 MiB under load", f"peak RssAnon {peak_anon:.1f} MiB (VmRSS {peak_rss:.1f})",
                 f"log written: {sum(r['log_bytes'] for r in results['produce']) / GB:.1f} GB",
                 verdict(peak_anon <= GOAL_ANON_LOAD_MIB)])
    return rows


def report(machine, sizes: Sizes, args, results: dict, elapsed: float) -> str:
    out = []
    cmd = ".venv/bin/python bench/bench_broker.py" + (" --quick" if args.quick else "") + \
        (" --profile" if args.profile else "")
    out += [f"Command: `{cmd}` (run time {elapsed:.0f} s)", "", "Machine:", *machine.lines(),
            f"- code: {results.get('code', '?')}",
            f"- busy before the run (2 s, all processes): {results['machine_busy_before_pct']:.0f}% of one core", ""]
    out += ["### Goals", "", table(["goal", "this run", "beside it", "verdict"], goals(results)), ""]

    client = {r["size"]: r for r in results.get("ceilings", {}).get("client", [])}
    out += ["### Produce (confluent-kafka, linger.ms=5, batch.size=65536, no key)", ""]
    rows = []
    extra = [results["produce_no_prefault"]] if "produce_no_prefault" in results else []
    for r in results["produce"] + extra:
        c = client.get(r["size"])
        acks = ("all" if r["acks"] == -1 else str(r["acks"])) + ("" if r["prefault"] else ", no prefault")
        rows.append([f"{r['size']} B", r["partitions"], acks, f"{r['count']:,}",
                     f"{r['msgs_s']:,.0f}", " / ".join(f"{x / 1000:,.0f}k" for x in r["runs_msgs_s"]),
                     f"{r['mb_s']:,.1f}",
                     f"{100 * r['msgs_s'] / c['produce_msgs_s']:.0f}%" if c else "",
                     f"{r['broker_cpu_s_per_gb']:.2f}", f"{r['records_per_request']:,.0f}",
                     f"{r['broker_us_per_request']:,.0f}", f"{r['broker_cpu_pct']:.0f}%", f"{r['client_cpu_pct']:.0f}%",
                     rest(r)])
    out += [table(["record", "partitions", "acks", "records", "msgs/s", "each run", "MB/s", "of client alone",
                   "broker CPU-s/GB", "records/request", "broker µs/request", "broker CPU", "client CPU",
                   "rest of machine"], rows), ""]
    out += [f"- Each case ran {sizes.reps} times, interleaved with the others (fresh topic each time); the table "
            "gives medians (\"each run\": every run's msgs/s) and the records over all runs. "
            "msgs/s and MB/s (record values) from the first produce() to the end of flush(). "
            "\"Of client alone\": the median against the same producer loop into librdkafka's mock cluster (below). "
            "CPU-s/GB: broker utime+stime per GB appended to the log. CPU columns: % of one core over "
            "the run (the machine has 2); \"rest of machine\" is all other busy CPU (other processes, kernel "
            "threads), from /proc/stat, the most of any run: ~5-10% is the kernel's own share. Other people's "
            f"tests share this machine, so a run with more than {DISTURBED_PCT:.0f}% there is repeated after "
            f"waiting for an idle machine, up to 4 tries ({sum(r['retries'] for r in results['produce'])} "
            "repeats in this run; \"disturbed\" marks a case whose last try was still disturbed). "
            "Requests: Produce requests the client sent (librdkafka's statistics, `tx`); "
            "broker µs/request = broker CPU / requests.",
            "- Each run but the last follows an untimed dd of about the log's size (`common.prefault`, as in the "
            "storage benchmark): on this VM, page-cache pages freed a few seconds earlier have gone back to the "
            "host and fault in slowly. The \"no prefault\" row repeats the first run without it.", ""]

    out += ["### Consume (assign() at OFFSET_BEGINNING, fetch.max.bytes 64 MiB, max.partition.fetch.bytes 16 MiB)", ""]
    rows = [[f"{r['size']} B", "confluent-kafka (Python)" if r["client"] == "python" else "kcat (C)",
             f"{r['count']:,}", f"{r['msgs_s']:,.0f}", " / ".join(f"{x / 1000:,.0f}k" for x in r["runs_msgs_s"]),
             f"{r['mb_s']:,.1f}", f"{r['broker_cpu_s_per_gb']:.3f}",
             f"{r['broker_cpu_pct']:.0f}%", f"{r['client_cpu_pct']:.0f}%", rest(r)]
            for r in results["consume"]]
    out += [table(["record", "client", "records", "msgs/s", "each run", "MB/s", "broker CPU-s/GB fetched",
                   "broker CPU", "client CPU", "rest of machine"], rows), ""]
    out += ["- Reads the 1-partition acks=1 topics written above, one per run (medians). The log is in the "
            "page cache. CPU-s/GB counts log bytes, i.e. what sendfile moves.", ""]
    loop = {r["mode"]: r for r in results.get("ceilings", {}).get("loopback", [])}
    if loop:
        out += [f"- Beside it: loopback sendfile {loop['sendfile']['mb_s']:,.0f} MB/s at "
                f"{loop['sendfile']['sender_cpu_s_per_gb']:.2f} CPU-s/GB for the sender; read+send "
                f"{loop['read+send']['mb_s']:,.0f} MB/s at {loop['read+send']['sender_cpu_s_per_gb']:.2f} "
                "(architecture.md §3: 0.09 and 0.50). kcat's wall time includes its start and connect.", ""]

    out += ["### Produce latency, 1 KiB, one partition, at a fixed rate", ""]
    rows = [["all" if r["acks"] == -1 else r["acks"], r["linger_ms"], r["load"], r.get("segments", ""),
             f"{r['target_rate']:,.0f}",
             f"{r['achieved_rate']:,.0f}", f"{r['count']:,}", _ms(r["p50_ms"]), _ms(r["p99_ms"]),
             _ms(r["p999_ms"]), _ms(r["max_ms"]),
             f"{r['queue_full_waits']:,}", f"{r['records_per_request']:,.1f}", f"{r['broker_us_per_request']:,.0f}",
             f"{r['broker_cpu_pct']:.0f}%", f"{r['client_cpu_pct']:.0f}%", rest(r)]
            for r in results["latency"]]
    out += [table(["acks", "linger.ms", "load", "segments", "target/s", "achieved/s", "samples", "p50", "p99", "p99.9", "max",
                   "queue-full waits", "records/request", "broker µs/request", "broker CPU", "client CPU",
                   "rest of machine"], rows), ""]
    worst_rd = max(abs(r["rd_p99_ms"] - r["p99_ms"]) for r in results["latency"])
    out += [f"- librdkafka's own msg.latency() (produce() to the answer, per record) gives the same percentiles "
            f"to within {worst_rd:.2f} ms at p99.",
            f"- Delivery callback time − produce() time, for every {LATENCY_SAMPLE_EVERY}th record (a Python callback "
            "on every record costs the client more than the broker's half load leaves it); "
            f"{sizes.latency_s:.0f} s measured after "
            f"{sizes.latency_warmup_s:.1f} s of warm-up. The rate is a fraction (half for the goal, and 1/8) of the "
            "1-partition median max of the same acks above. \"Segments\": .log files in the topic afterwards; more "
            "than one means the log rolled inside the window (at half load ~1.5 GB is written, past the 1 GiB "
            "segment.bytes). The two 1/4 rows differ only in segment.bytes (1 GiB, no roll; 256 MiB, rolls). "
            "These rows run on a broker of their own whose data directory starts empty: the GBs written above "
            "are removed and synced first, since on this VM a write that follows them goes into memory returned to "
            "the host (docs/benchmarks.md, \"Method\"). "
            "The pacing loop waits in poll() (up to 1 ms) between rounds; before 26 Nov 2026 it spun (poll(0.0002) is poll(0)) and took a core. \"Queue-full waits\": produce() found librdkafka's queue full (the rate was not sustained).", ""]

    idle, after = results["idle_mem"], results["after_mem"]
    nh_idle = results.get("start_without_hypothesis", {}).get("idle_mem")
    peak = max(results["produce"], key=lambda r: r["peak_anon_mib"])
    out += ["### Broker memory", ""]
    out += [table(["when", "VmRSS MiB", "RssAnon MiB", "RssFile MiB"],
                  [["idle, 1 s after start", f"{idle['VmRSS']:.1f}", f"{idle['RssAnon']:.1f}", f"{idle['RssFile']:.1f}"]]
                  + ([["the same with `hypothesis` not importable (see Start)",
                       f"{nh_idle['VmRSS']:.1f}", f"{nh_idle['RssAnon']:.1f}", f"{nh_idle['RssFile']:.1f}"]]
                     if nh_idle else []) + [
                   [f"peak under load ({peak['size']} B, {peak['partitions']}p, acks={peak['acks']})",
                    f"{peak['peak_rss_mib']:.1f}", f"{peak['peak_anon_mib']:.1f}", ""],
                   ["idle after the produce and consume runs", f"{after['VmRSS']:.1f}", f"{after['RssAnon']:.1f}", f"{after['RssFile']:.1f}"],
                   ["VmHWM (kernel's peak RSS) then", f"{after['VmHWM']:.1f}", "", ""]]), ""]

    st = results["start"]
    out += ["### Start", ""]
    rows = [["spawn → first accepted TCP connection (fresh data dir)", f"{st['connect_median_ms']:.0f} ms",
             ", ".join(f"{x:.0f}" for x in st["connect_ms"])],
            ["the broker's own \"started in N ms\" line", f"{st['own_median_ms']:.0f} ms",
             ", ".join(f"{x:.0f}" for x in st["own_ms"])],
            ["SIGTERM → exit (clean shutdown, idle broker)", f"{st['stop_median_ms']:.0f} ms",
             ", ".join(f"{x:.0f}" for x in st["stop_ms"])]]
    nh = results.get("start_without_hypothesis")
    if nh:
        rows += [["the same, spawn → first connection, with `hypothesis` not importable (as without the test extra)",
                  f"{nh['connect_median_ms']:.0f} ms", ", ".join(f"{x:.0f}" for x in nh["connect_ms"])],
                 ["its \"started in N ms\" line", f"{nh['own_median_ms']:.0f} ms",
                  ", ".join(f"{x:.0f}" for x in nh["own_ms"])]]
    c = results.get("ceilings")
    if c:
        rows += [["ref: bare asyncio server, spawn → first accepted connection",
                  f"{c['start_bare_asyncio']['median_ms']:.0f} ms",
                  ", ".join(f"{x:.0f}" for x in c["start_bare_asyncio"]["runs_ms"])],
                 ["ref: `python -c pass`, spawn → exit", f"{c['start_python_noop']['median_ms']:.0f} ms",
                  ", ".join(f"{x:.0f}" for x in c["start_python_noop"]["runs_ms"])]]
    out += [table(["what", "median", "runs (ms)"], rows), ""]
    if c:
        out += ["### Ceilings, same run", "", ceiling_tables(c), ""]
    if "profile" in results:
        out += ["### Profiles (py-spy, broker process)", ""]
        for name, p in results["profile"].items():
            out += [f"{name}: {p['msgs_s']:,.0f} msgs/s under py-spy; {p['samples']:,} samples in {p['seconds']:.1f} s "
                    f"(a thread was busy in {p['active_pct']:.0f}% of the sampling instants; idle samples are left out)", ""]
            out += [table(["own time", "function"], [[f"{100 * n / p['samples']:.1f}%", f] for f, n in p["own"]]), ""]
            out += [table(["total time", "function"], [[f"{100 * n / p['samples']:.1f}%", f] for f, n in p["total"]]), ""]
    if "import_times" in results:
        it = results["import_times"]
        out += [f"Imports at start (`python -X importtime`; {it['total_import_ms']:.0f} ms of imports, "
                f"spawn → connect {it['connect_ms_under_importtime']:.0f} ms under importtime):", ""]
        out += [table(["cumulative", "own", "depth", "module"],
                      [[f"{cum:.1f} ms", f"{own:.1f} ms", depth, name] for cum, own, depth, name in it["top"]]), ""]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a quarter of the volume")
    parser.add_argument("--dir", type=Path, default=None,
                        help="parent of the broker's data directory (default: the system temp dir)")
    parser.add_argument("--profile", action="store_true", help="add py-spy profiles of the broker")
    parser.add_argument("--no-ceilings", action="store_true", help="skip the ceilings (not for the docs)")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    parser.add_argument("--keep", action="store_true", help="keep the data directory")
    parser.add_argument("--wait-idle", type=float, default=0, metavar="SECONDS",
                        help="first wait up to this long for the machine to be idle (<15%% of a core busy)")
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    if args.wait_idle:
        say(f"waiting up to {args.wait_idle:.0f} s for an idle machine")
        wait_idle(args.wait_idle)
    root = Path(tempfile.mkdtemp(prefix="logbroker-bench-broker-", dir=args.dir))
    if is_tmpfs(root):
        shutil.rmtree(root)
        parser.error(f"{root.parent} is tmpfs; pick --dir on a disk")
    need = 6 * sizes.produce_counts[1024] * 1100 + 2 * sizes.ceiling_bytes
    if shutil.disk_usage(root).free < need:
        shutil.rmtree(root)
        parser.error(f"need {need / GiB:.1f} GiB free in {root.parent}")
    machine = machine_info(root)
    say("\n".join(machine.lines()))
    started = time.perf_counter()
    try:
        results = run(root, sizes, profile=args.profile, ceilings=not args.no_ceilings)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    elapsed = time.perf_counter() - started
    print(report(machine, sizes, args, results, elapsed))
    if args.json:
        write_json(args.json, machine, {"quick": args.quick, **results, "elapsed_s": elapsed})
    return 0


if __name__ == "__main__":
    sys.exit(main())
