"""The machine's own limits for the broker benchmark, measured in the same run:

    .venv/bin/python bench/bench_ceilings.py            # alone: ~1 minute
    .venv/bin/python bench/bench_ceilings.py --quick

`bench_broker.py` imports this module and runs the same measurements beside the broker's:

- the client alone: the confluent-kafka Python producer against librdkafka's built-in mock
  cluster (`test.mock.num.brokers=1`), with the very loop the broker benchmark uses — the most
  any broker can get out of this client on this machine (the mock serves fetches too slowly to
  be a consumer ceiling);
- loopback: a plain Python socket sender (a subprocess) and receiver moving the same volume,
  sending from memory, with `os.sendfile` from a file in the page cache, and with read+send —
  MB/s and the sender's CPU seconds per GB;
- disk: `dd if=/dev/zero bs=1M` of the same volume to the broker's filesystem (buffered, no
  fsync, after an untimed prefault as in bench_storage.py);
- process start: spawn → first accepted TCP connection of a bare asyncio server, and
  `python -c pass` from spawn to exit.

Rates are decimal (1 MB = 10^6 bytes). Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import GiB, MiB, dd_write, is_tmpfs, machine_info, median, prefault, say, table  # noqa: E402

MB = 1e6
GB = 1e9

# The broker benchmark's client settings (acks is given per run).
PRODUCER_DEFAULTS = {"linger.ms": 5, "batch.size": 65536}
CONSUMER_SETTINGS = {
    "group.id": "bench",  # required by the client; no group is joined (assign(), no commits)
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "fetch.max.bytes": 64 * MiB,
    "max.partition.fetch.bytes": 16 * MiB,
    "receive.message.max.bytes": 64 * MiB + 4096,
    # librdkafka stops fetching while its queue holds queued.min.messages (100,000) records or
    # queued.max.messages.kbytes, and then waits fetch.queue.backoff.ms (1 s) before fetching
    # again: one 16 MiB fetch of 100 B records crosses the first limit. Room for a few fetches:
    "queued.min.messages": 1_000_000,
    "queued.max.messages.kbytes": 256 * 1024,
}
QUIET = {"log.connection.close": False}


# --- a shared machine -------------------------------------------------------------------------

CLK_TCK = os.sysconf("SC_CLK_TCK")
DISTURBED_PCT = 25.0  # other busy CPU (% of one core) above which a run is taken as disturbed


class MachineCpu:
    """Busy CPU of the whole machine (all processes and the kernel) over a block, in % of one
    core. Other people's test runs share these 2 cores; a run's "rest" (busy minus what the
    measured processes used) shows when they did: ~5-10% is the kernel's own share on an
    otherwise idle machine."""

    def __enter__(self) -> MachineCpu:
        self.t0, self.j0 = time.perf_counter(), self._busy_jiffies()
        return self

    def __exit__(self, *exc) -> None:
        self.busy_pct = 100 * (self._busy_jiffies() - self.j0) / CLK_TCK / (time.perf_counter() - self.t0)

    @staticmethod
    def _busy_jiffies() -> int:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:9]]
        return sum(v) - v[3] - v[4]  # all but idle and iowait


def wait_idle(max_s: float, threshold_pct: float = 15.0) -> float:
    """Wait (up to max_s) until the machine is idle over 2 s; returns the last busy %."""
    deadline = time.monotonic() + max_s
    while True:
        with MachineCpu() as m:
            time.sleep(2.0)
        if m.busy_pct < threshold_pct or time.monotonic() > deadline:
            return m.busy_pct
        say(f"  waiting for an idle machine ({m.busy_pct:.0f}% of a core busy)")


def undisturbed(run, *, attempts: int = 4, wait_s: float = 60.0) -> dict:
    """Call run(attempt) until its result's rest_cpu_pct is below DISTURBED_PCT, waiting for an
    idle machine between tries; the last try counts if none was undisturbed (then marked)."""
    for attempt in range(attempts):
        result = run(attempt)
        if result["rest_cpu_pct"] <= DISTURBED_PCT:
            break
        if attempt + 1 < attempts:
            say(f"  disturbed: {result['rest_cpu_pct']:.0f}% of a core used by others; again")
            wait_idle(wait_s)
    result["attempts"] = attempt + 1
    result["disturbed"] = result["rest_cpu_pct"] > DISTURBED_PCT
    return result


# --- the client loops (shared with bench_broker.py) -------------------------------------------

def cpu_seconds_self() -> float:
    t = os.times()
    return t.user + t.system


class RequestCounter:
    """The requests a client has sent (sum of brokers[*].tx in librdkafka's statistics, which
    arrive every `interval_ms` through poll()/flush()). Pass `config()` to the client."""

    def __init__(self, interval_ms: int = 100) -> None:
        self.interval_ms = interval_ms
        self.tx = 0
        self.seq = 0

    def config(self) -> dict:
        return {"statistics.interval.ms": self.interval_ms, "stats_cb": self._on_stats}

    def _on_stats(self, stats_json: str) -> None:
        stats = json.loads(stats_json)
        self.tx = sum(b.get("tx", 0) for b in stats.get("brokers", {}).values())
        self.seq += 1

    def read(self, client, timeout_s: float = 2.0) -> int:
        """Wait for the next statistics (so they cover everything sent so far); the count."""
        seq, deadline = self.seq, time.perf_counter() + timeout_s
        while self.seq < seq + 2 and time.perf_counter() < deadline:
            client.poll(0.02)
        return self.tx


def make_producer(config: dict):
    """A producer that reports only failed deliveries (counted in `producer.bench_errors`)."""
    from confluent_kafka import Producer

    errors: list = []
    producer = Producer({**QUIET, **PRODUCER_DEFAULTS, **config, "delivery.report.only.error": True,
                         "on_delivery": lambda err, msg: errors.append(err)})
    return producer, errors


def produce_loop(producer, topic: str, value: bytes, count: int) -> tuple[float, float]:
    """Produce `count` records of `value` (no key) as fast as the client takes them, then flush.
    Returns (wall seconds, this process's CPU seconds)."""
    produce, poll = producer.produce, producer.poll
    cpu0 = cpu_seconds_self()
    start = time.perf_counter()
    for _ in range(count):
        while True:
            try:
                produce(topic, value)
                break
            except BufferError:  # queue.buffering.max.messages reached: let deliveries drain
                poll(0.001)
    remaining = producer.flush(120)
    wall = time.perf_counter() - start
    if remaining:
        raise RuntimeError(f"{remaining} records still undelivered after flush")
    return wall, cpu_seconds_self() - cpu0


def paced_produce(producer, topic: str, value: bytes, *, rate: float, start: float, end: float,
                  on_delivery_for, sample_every: int = 8, poll_s: float = 0.001) -> tuple[int, int]:
    """Produce `value` at `rate` records/s from perf_counter time `start` to `end`; between rounds,
    poll() for delivery reports, waiting up to `poll_s` (it returns as soon as one is served).
    Every `sample_every`-th record carries the callback `on_delivery_for(sent_at)` returns
    (sent_at: its perf_counter time at produce()). Does not flush. Returns (records sent, times
    produce() found the client's queue full — the rate was not sustained).

    librdkafka takes the timeout in whole milliseconds: a poll(0.0002), which this loop used until
    26 Nov 2026, is poll(0) and the loop spun — a whole core of a 2-core machine at half load,
    taken from the broker under test (docs/benchmarks.md, "A broker")."""
    clock = time.perf_counter
    produce, poll = producer.produce, producer.poll
    sent = queue_full = 0
    while True:
        now = clock()
        if now >= end:
            return sent, queue_full
        due = int((now - start) * rate) - sent
        for i in range(sent, sent + due):
            while True:
                try:
                    if i % sample_every:
                        produce(topic, value)
                    else:
                        produce(topic, value, on_delivery=on_delivery_for(clock()))
                    break
                except BufferError:  # the broker is not keeping up
                    queue_full += 1
                    poll(0.001)
        sent += due
        poll(poll_s)


def consume_loop(bootstrap: str, partitions: list[tuple[str, int]], count: int, *, rounds: int = 1,
                 extra: dict | None = None) -> tuple[float, float, int]:
    """assign() the partitions at OFFSET_BEGINNING and consume until `count` records arrived;
    `rounds` times over (unassign, assign again). Returns (wall seconds from the first assign,
    this process's CPU seconds, payload bytes), over all rounds."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({**QUIET, **CONSUMER_SETTINGS, **(extra or {}), "bootstrap.servers": bootstrap})
    try:
        nbytes = 0
        consume = consumer.consume
        cpu0 = cpu_seconds_self()
        start = time.perf_counter()
        for _ in range(rounds):
            got = 0
            consumer.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t, p in partitions])
            while got < count:
                # consume() waits until it has num_messages or the timeout passes: never ask for
                # more than remain
                msgs = consume(min(10000, count - got), 10.0)
                if not msgs:
                    raise RuntimeError(f"consumer stalled after {got} of {count} records")
                got += len(msgs)
                last = msgs[-1]
                if last.error():
                    raise RuntimeError(f"consumer error: {last.error()}")
                nbytes += len(msgs) * len(last.value())  # every record in a run has the same size
            if got != count:
                raise RuntimeError(f"consumed {got} records, expected {count}")
            if rounds > 1:
                consumer.unassign()
        wall = time.perf_counter() - start
        cpu = cpu_seconds_self() - cpu0
    finally:
        consumer.close()
    return wall, cpu, nbytes


# --- (a) the client alone: librdkafka's mock cluster ------------------------------------------

def client_alone(size: int, count: int) -> dict:
    """Produce `count` records of `size` bytes (acks=1) into librdkafka's in-process mock
    cluster. (Not consumed back: the mock keeps only a few MB per partition and serves fetches
    at ~18 k records/s, so it is no consumer ceiling.)"""
    producer, errors = make_producer({"test.mock.num.brokers": 1, "acks": 1})
    value = os.urandom(size)
    with MachineCpu() as machine:
        wall, cpu = produce_loop(producer, f"mock-{size}", value, count)
    del producer
    if errors:
        raise RuntimeError(f"{len(errors)} failed deliveries against the mock cluster: {errors[0]}")
    return {"size": size, "count": count, "produce_wall_s": wall, "produce_msgs_s": count / wall,
            "produce_mb_s": count * size / wall / MB, "produce_client_cpu_s": cpu,
            "rest_cpu_pct": machine.busy_pct - 100 * cpu / wall}


# --- (b) loopback -----------------------------------------------------------------------------

CHUNK = MiB


def _sender(mode: str, port: int, nbytes: int, path: str | None) -> None:
    """The sending side, run as a subprocess; prints its own CPU seconds and wall time."""
    sock = socket.create_connection(("127.0.0.1", port))
    cpu0, start = cpu_seconds_self(), time.perf_counter()
    sent = 0
    if mode == "send":
        buf = memoryview(os.urandom(CHUNK))
        while sent < nbytes:
            n = min(CHUNK, nbytes - sent)
            sock.sendall(buf[:n])
            sent += n
    else:
        fd = os.open(path, os.O_RDONLY)
        try:
            if mode == "sendfile":
                while sent < nbytes:
                    n = os.sendfile(sock.fileno(), fd, sent, nbytes - sent)
                    if n == 0:
                        raise RuntimeError("file shorter than the volume to send")
                    sent += n
            else:  # read+send
                while sent < nbytes:
                    data = os.pread(fd, min(CHUNK, nbytes - sent), sent)
                    sock.sendall(data)
                    sent += len(data)
        finally:
            os.close(fd)
    sock.shutdown(socket.SHUT_WR)
    sock.recv(1)  # the receiver closes once it has everything
    print(json.dumps({"cpu_s": cpu_seconds_self() - cpu0, "wall_s": time.perf_counter() - start}))


def loopback(mode: str, nbytes: int, path: Path | None = None) -> dict:
    """Move `nbytes` over 127.0.0.1 from a sender subprocess to a receiver here (recv_into a
    1 MiB buffer). mode: 'send' (from memory), 'sendfile' or 'read+send' (from `path`)."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    child = subprocess.Popen([sys.executable, __file__, "--sender", mode, str(port), str(nbytes),
                              str(path or "")], stdout=subprocess.PIPE, text=True)
    conn, _ = listener.accept()
    listener.close()
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    cpu0, start = cpu_seconds_self(), time.perf_counter()
    got = 0
    with MachineCpu() as machine:
        while True:
            n = conn.recv_into(view)
            if n == 0:
                break
            got += n
    wall = time.perf_counter() - start
    recv_cpu = cpu_seconds_self() - cpu0
    conn.close()
    out, _ = child.communicate(timeout=60)
    if child.returncode != 0 or got != nbytes:
        raise RuntimeError(f"loopback {mode}: received {got} of {nbytes} bytes (sender exit {child.returncode})")
    sender = json.loads(out)
    return {"mode": mode, "bytes": nbytes, "wall_s": wall, "mb_s": nbytes / wall / MB,
            "sender_cpu_s": sender["cpu_s"], "sender_cpu_s_per_gb": sender["cpu_s"] / (nbytes / GB),
            "receiver_cpu_s_per_gb": recv_cpu / (nbytes / GB),
            "rest_cpu_pct": machine.busy_pct - 100 * (recv_cpu + sender["cpu_s"]) / wall}


# --- (c) disk ---------------------------------------------------------------------------------

def disk(root: Path, nbytes: int, keep_as: Path | None = None) -> dict:
    """`dd if=/dev/zero of=<root>/dd.out bs=1M count=...`, buffered, after an untimed prefault
    (common.prefault). The file is kept as `keep_as` (the sendfile source) if given."""
    count = max(1, nbytes // MiB)
    prefault(root, count * MiB)
    path = root / "dd.out"
    before = os.times()
    with MachineCpu() as machine:
        seconds = dd_write(path, block_size="1M", count=count)
    after = os.times()
    dd_cpu = after.children_user - before.children_user + after.children_system - before.children_system
    if keep_as is not None:
        path.rename(keep_as)
    else:
        path.unlink()
    # dd's own wall time is shorter than the block's (process start): rest is approximate
    return {"bytes": count * MiB, "wall_s": seconds, "mb_s": count * MiB / seconds / MB,
            "rest_cpu_pct": max(0.0, machine.busy_pct - 100 * dd_cpu / seconds)}


# --- process start ----------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_connect(port: int, process: subprocess.Popen, timeout_s: float = 30.0) -> float:
    """Poll 127.0.0.1:port every millisecond; perf_counter() of the first accepted connect."""
    deadline = time.perf_counter() + timeout_s
    while time.perf_counter() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1.0):
                return time.perf_counter()
        except OSError:
            if process.poll() is not None:
                raise RuntimeError(f"process exited with {process.returncode} before accepting") from None
            time.sleep(0.001)
    raise RuntimeError(f"nothing accepted on port {port} within {timeout_s} s")


BARE_ASYNCIO = """
import asyncio, sys
async def main():
    server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", int(sys.argv[1]))
    await asyncio.sleep(3600)
asyncio.run(main())
"""


def bare_asyncio_start(runs: int) -> dict:
    """Spawn → first accepted connection of a bare asyncio server, `runs` times."""
    times = []
    for _ in range(runs):
        port = free_port()
        start = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-c", BARE_ASYNCIO, str(port)])
        try:
            times.append((wait_for_connect(port, proc) - start) * 1000)
        finally:
            proc.kill()
            proc.wait()
    return {"runs_ms": times, "median_ms": median(times)}


def python_noop_start(runs: int) -> dict:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        times.append((time.perf_counter() - start) * 1000)
    return {"runs_ms": times, "median_ms": median(times)}


# --- all of them ------------------------------------------------------------------------------

def measure_all(root: Path, *, nbytes: int, counts: dict[int, int], start_runs: int) -> dict:
    """Every ceiling, in order: disk, loopback, client alone, process start."""
    say("ceilings: disk (dd)")
    source = root / "sendfile.src"

    def disk_once(attempt: int) -> dict:
        source.unlink(missing_ok=True)
        return disk(root, nbytes, keep_as=source)

    disk_result = undisturbed(disk_once)
    loop = []
    try:
        for mode in ("send", "sendfile", "read+send"):
            say(f"ceilings: loopback {mode}")
            loop.append(undisturbed(lambda attempt: loopback(mode, nbytes, source)))
    finally:
        source.unlink(missing_ok=True)
    client = []
    for size, count in counts.items():
        say(f"ceilings: client alone, {size} B x {count:,}")
        client.append(undisturbed(lambda attempt: client_alone(size, count)))
    say("ceilings: process start")
    return {"disk": disk_result, "loopback": loop, "client": client,
            "start_bare_asyncio": bare_asyncio_start(start_runs),
            "start_python_noop": python_noop_start(start_runs)}


def rest(r: dict) -> str:
    """The "rest of machine" cell: other busy CPU, marked when the run stayed disturbed."""
    # /proc/stat and the processes' own counters tick separately: ±10% is noise, not negative use
    return f"{max(0.0, r['rest_cpu_pct']):.0f}%" + (" (disturbed)" if r.get("disturbed") else "")


def ceiling_tables(c: dict) -> str:
    d = c["disk"]
    lines = ["Disk and loopback (the same volume as one 1 KiB produce run):", "",
             table(["what", "bytes", "seconds", "MB/s", "sender CPU-s/GB", "receiver CPU-s/GB", "rest of machine"],
                   [["dd if=/dev/zero bs=1M (buffered) to the data dir's filesystem", f"{d['bytes']:,}",
                     f"{d['wall_s']:.3f}", f"{d['mb_s']:,.0f}", "", "", rest(d)]]
                   + [[f"loopback TCP, {r['mode']}", f"{r['bytes']:,}", f"{r['wall_s']:.3f}",
                       f"{r['mb_s']:,.0f}", f"{r['sender_cpu_s_per_gb']:.3f}",
                       f"{r['receiver_cpu_s_per_gb']:.3f}", rest(r)] for r in c["loopback"]]),
             "", "The client alone (confluent-kafka against librdkafka's mock cluster, acks=1):", "",
             table(["record", "records", "produce msgs/s", "produce MB/s", "client CPU", "rest of machine"],
                   [[f"{r['size']} B", f"{r['count']:,}", f"{r['produce_msgs_s']:,.0f}",
                     f"{r['produce_mb_s']:,.1f}", f"{100 * r['produce_client_cpu_s'] / r['produce_wall_s']:.0f}%",
                     rest(r)] for r in c["client"]]),
             "",
             "The mock cluster runs inside the client process (its CPU is in \"client CPU\"). It keeps only a few "
             "MB per partition and serves fetches at ~18 k records/s, so it gives no consumer ceiling; kcat "
             "against the broker stands in for the client side there.",
             "", "Process start (median ms of each run):", "",
             table(["what", "median", "runs"],
                   [["bare asyncio server: spawn → first accepted connect",
                     f"{c['start_bare_asyncio']['median_ms']:.0f} ms",
                     ", ".join(f"{t:.0f}" for t in c["start_bare_asyncio"]["runs_ms"])],
                    ["`python -c pass`: spawn → exit", f"{c['start_python_noop']['median_ms']:.0f} ms",
                     ", ".join(f"{t:.0f}" for t in c["start_python_noop"]["runs_ms"])]])]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--sender":
        _sender(argv[1], int(argv[2]), int(argv[3]), argv[4] or None)
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="256 MiB instead of 1 GiB")
    parser.add_argument("--dir", type=Path, default=None, help="parent of the scratch directory")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="logbroker-bench-ceilings-", dir=args.dir))
    try:
        if is_tmpfs(root):
            raise SystemExit(f"{root.parent} is tmpfs; pick --dir on a disk")
        machine = machine_info(root)
        nbytes = 256 * MiB if args.quick else GiB
        counts = {100: 500_000, 1024: 250_000} if args.quick else {100: 2_000_000, 1024: 1_000_000}
        result = measure_all(root, nbytes=nbytes, counts=counts, start_runs=5)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print("\n".join(machine.lines()))
    print()
    print(ceiling_tables(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
