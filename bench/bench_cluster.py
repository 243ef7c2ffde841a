"""Cluster benchmark: three `logbroker serve` processes and one ZooKeeper on this machine,
all on loopback, driven by confluent-kafka.

    .venv/bin/python bench/bench_cluster.py                  # ~10 minutes (failover: ~5)
    .venv/bin/python bench/bench_cluster.py --quick          # ~2 minutes, fewer records and repeats
    .venv/bin/python bench/bench_cluster.py --wait-idle 600  # first wait for an idle machine
    .venv/bin/python bench/bench_cluster.py --no-failover    # throughput and latency only, ~3 minutes

Three brokers on a 2-core machine share the CPU with each other, the client and ZooKeeper: RF=3
costs here what it would not cost on three machines (every byte is handled by three processes on
the same two cores), so read RF=3 against RF=1 as an upper bound of replication's cost.

1. Produce throughput: 1 KiB records, linger.ms=5, batch.size=65536, one partition, for RF=1 and
   RF=3 (min.insync.replicas=2) with acks=1 and acks=-1, and with `flush.before.ack=true` (the
   fsync-before-ack group commit) for acks=-1 on RF=1 and RF=3. Each case runs `--reps` times,
   interleaved, a fresh topic each time; medians. Beside each: the brokers' CPU (all three, % of
   one core), the Produce requests the client sent, and the disk's flush requests over the run
   (/proc/diskstats, the data dir's device: every fsync that reaches the disk is one; other
   processes' fsyncs count too, so this is an upper bound of ours).
2. Produce latency at a fixed rate (1 KiB records, linger.ms=0, every record timed from produce()
   to its delivery callback), p50/p99/p99.9, the same cases.
3. Failover: the partition leader of an RF=3, min.insync.replicas=2 topic is SIGKILLed; measured
   from the kill to (a) the first Metadata answer from a surviving broker that names a new
   leader and (b) the first acks=all record produced after the kill being acknowledged (the
   producer is connected and idle at the kill). Then the broker is restarted and back in the ISR
   before the next repeat. The controller learns of a dead broker only when its ZooKeeper session
   expires, so this is run with zookeeper.session.timeout.ms at Kafka's 18000 and smaller.

The machine is shared with other people's tests: each throughput run records the CPU other
processes used meanwhile ("rest of machine"), a disturbed run is repeated once after waiting for an
idle machine (bench_ceilings.undisturbed), and the report gives `uptime`'s load averages before and
after.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_broker import proc_cpu_s  # noqa: E402
from bench_ceilings import (  # noqa: E402
    MB,
    QUIET,
    MachineCpu,
    RequestCounter,
    cpu_seconds_self,
    make_producer,
    produce_loop,
    rest,
    undisturbed,
    wait_idle,
)
from common import is_tmpfs, machine_info, median, percentile, say, table, write_json  # noqa: E402

from logbroker.testing import BrokerProcess  # noqa: E402
from logbroker.zookeeper_process import ZooKeeperProcess  # noqa: E402

RECORD_SIZE = 1024
DEFAULT_SESSION_TIMEOUT_MS = 18_000  # Kafka's zookeeper.session.timeout.ms
ATTEMPTS = 2  # tries of a throughput run disturbed by other processes (bench_ceilings.undisturbed)
# (replication factor, acks, flush.before.ack)
CASES = ((1, 1, False), (1, -1, False), (3, 1, False), (3, -1, False), (1, -1, True), (3, -1, True))


@dataclass(frozen=True, slots=True)
class Sizes:
    records: int  # per throughput run
    reps: int
    latency_rate: int  # records/s
    latency_s: float
    latency_warmup_s: float
    failovers: int
    session_timeouts_ms: tuple[int, ...]


FULL = Sizes(records=200_000, reps=3, latency_rate=2_000, latency_s=5.0, latency_warmup_s=1.0,
             failovers=5, session_timeouts_ms=(DEFAULT_SESSION_TIMEOUT_MS, 6_000, 2_000))
QUICK = Sizes(records=50_000, reps=1, latency_rate=1_000, latency_s=2.0, latency_warmup_s=0.5,
              failovers=2, session_timeouts_ms=(6_000, 2_000))


def acks_name(acks: int) -> str:
    return "all" if acks == -1 else str(acks)


def case_name(rf: int, acks: int, fsync: bool) -> str:
    return f"RF={rf}, acks={acks_name(acks)}" + (", flush.before.ack" if fsync else "")


def disk_flushes(device: str) -> int:
    """Flush requests the block device has completed (/proc/diskstats, field 16 after the name)."""
    with open("/proc/diskstats") as f:
        for line in f:
            fields = line.split()
            if fields[2] == device:
                return int(fields[18]) if len(fields) > 18 else 0
    return 0


def block_device(path: Path) -> str:
    source = subprocess.run(["df", "-P", str(path)], capture_output=True, text=True,
                            check=True).stdout.splitlines()[-1].split()[0]
    return os.path.basename(source)


class Cluster:
    """One ZooKeeper chroot and three brokers on loopback."""

    def __init__(self, root: Path, zookeeper: ZooKeeperProcess, *, session_timeout_ms: int) -> None:
        self.root = root
        connect = f"{zookeeper.connect_string}/bench-{uuid.uuid4().hex[:8]}"
        overrides = {"zookeeper.connect": connect, "zookeeper.session.timeout.ms": str(session_timeout_ms),
                     "offsets.topic.replication.factor": "1", "group.initial.rebalance.delay.ms": "0"}
        self.brokers = {i: BrokerProcess(root / f"broker-{i}", overrides={**overrides, "broker.id": str(i)})
                        for i in (1, 2, 3)}

    def start(self) -> Cluster:
        for broker in self.brokers.values():
            broker.start()
        admin = self.admin()
        wait(lambda: len(admin.list_topics(timeout=10).brokers) == len(self.brokers),
             "every broker to be registered")
        return self

    def stop(self) -> None:
        for broker in self.brokers.values():
            broker.kill()

    def live(self) -> list[BrokerProcess]:
        return [b for b in self.brokers.values() if b.process is not None and b.process.poll() is None]

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.live())

    def pids(self) -> list[int]:
        return [b.process.pid for b in self.live()]

    def admin(self):
        from confluent_kafka.admin import AdminClient

        return AdminClient({**QUIET, "bootstrap.servers": self.bootstrap})

    def partition(self, topic: str, admin=None):
        """(leader, isr, controller id) of `topic`-0 as Metadata answers; None while unknown."""
        md = (admin or self.admin()).list_topics(topic, timeout=10)
        t = md.topics.get(topic)
        if t is None or t.error is not None or 0 not in t.partitions:
            return None
        p = t.partitions[0]
        return p.leader, tuple(sorted(p.isrs)), md.controller_id

    def create_topic(self, name: str, rf: int, config: dict) -> None:
        from confluent_kafka.admin import NewTopic

        admin = self.admin()  # kept alive until the result arrives
        admin.create_topics([NewTopic(name, 1, rf, config=config)])[name].result(30)
        wait(lambda: (p := self.partition(name)) is not None and p[0] >= 0 and len(p[1]) == rf,
             f"{name} to have a leader and an ISR of {rf}")


def wait(condition, what: str, timeout_s: float = 120.0, interval_s: float = 0.05) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(interval_s)


def topic_config(rf: int, fsync: bool) -> dict:
    config = {"min.insync.replicas": "2"} if rf == 3 else {}
    return {**config, "flush.before.ack": "true"} if fsync else config


# -- 1. throughput ----------------------------------------------------------------------------------

def throughput_run(cluster: Cluster, device: str, rf: int, acks: int, fsync: bool, count: int, tag: str) -> dict:
    topic = f"tput-{tag}-rf{rf}-acks{acks_name(acks)}{'-fsync' if fsync else ''}"
    cluster.create_topic(topic, rf, topic_config(rf, fsync))
    requests = RequestCounter()
    producer, errors = make_producer({"bootstrap.servers": cluster.bootstrap, "acks": acks, **requests.config()})
    value = os.urandom(RECORD_SIZE)
    producer.produce(topic, value, partition=0)  # connect and learn the leader, untimed
    producer.flush(30)
    tx0 = requests.read(producer)
    pids = cluster.pids()
    cpu0 = sum(proc_cpu_s(p) for p in pids)
    flushes0 = disk_flushes(device)
    with MachineCpu() as machine:
        wall, client_cpu = produce_loop(producer, topic, value, count)
    brokers_cpu = sum(proc_cpu_s(p) for p in pids) - cpu0
    flushes = disk_flushes(device) - flushes0
    n_requests = requests.read(producer) - tx0
    del producer
    if errors:
        raise RuntimeError(f"{topic}: {len(errors)} failed deliveries, first: {errors[0]}")
    return {"topic": topic, "rf": rf, "acks": acks, "fsync": fsync, "count": count, "wall_s": wall,
            "msgs_s": count / wall, "mb_s": count * RECORD_SIZE / wall / MB, "requests": n_requests,
            "disk_flushes": flushes, "brokers_cpu_pct": 100 * brokers_cpu / wall,
            "client_cpu_pct": 100 * client_cpu / wall,
            "rest_cpu_pct": machine.busy_pct - 100 * (brokers_cpu + client_cpu) / wall}


def throughput(cluster: Cluster, device: str, sizes: Sizes) -> list[dict]:
    runs: dict[tuple, list[dict]] = {case: [] for case in CASES}
    for rep in range(sizes.reps):
        for case in CASES:
            say(f"throughput {case_name(*case)}, run {rep + 1}/{sizes.reps}")
            runs[case].append(undisturbed(lambda attempt, case=case: throughput_run(
                cluster, device, *case, sizes.records, f"{rep}{attempt}"), attempts=ATTEMPTS, wait_s=30))
    results = []
    for case, case_runs in runs.items():
        mid = sorted(case_runs, key=lambda r: r["msgs_s"])[len(case_runs) // 2]
        results.append({**mid, "runs_msgs_s": [r["msgs_s"] for r in case_runs],
                        "rest_cpu_pct": max(r["rest_cpu_pct"] for r in case_runs),
                        "disturbed": any(r["disturbed"] for r in case_runs),
                        "retries": sum(r["attempts"] - 1 for r in case_runs)})
    return results


# -- 2. latency -------------------------------------------------------------------------------------

def latency(cluster: Cluster, rf: int, acks: int, fsync: bool, sizes: Sizes) -> dict:
    """Records at a fixed rate, each timed from produce() to its delivery callback."""
    from confluent_kafka import Producer

    topic = f"lat-rf{rf}-acks{acks_name(acks)}{'-fsync' if fsync else ''}"
    cluster.create_topic(topic, rf, topic_config(rf, fsync))
    clock = time.perf_counter
    record_from = [float("inf")]
    latencies: list[float] = []
    failed: list = []

    def delivered(sent_at: float, err, msg) -> None:
        if err is not None:
            failed.append(err)
        elif sent_at >= record_from[0]:
            latencies.append(clock() - sent_at)

    producer = Producer({**QUIET, "bootstrap.servers": cluster.bootstrap, "acks": acks, "linger.ms": 0})
    value = os.urandom(RECORD_SIZE)
    producer.produce(topic, value, partition=0)
    producer.flush(30)
    start = clock()
    record_from[0] = start + sizes.latency_warmup_s
    end = record_from[0] + sizes.latency_s
    sent = 0
    with MachineCpu() as machine:
        cpu0 = cpu_seconds_self()
        while (now := clock()) < end:
            for _ in range(int((now - start) * sizes.latency_rate) - sent):
                producer.produce(topic, value, partition=0,
                                 on_delivery=lambda err, msg, t=clock(): delivered(t, err, msg))
                sent += 1
            producer.poll(0.001)  # not a busy loop: the brokers need the cores
        producer.flush(30)
        client_cpu = cpu_seconds_self() - cpu0
    if failed:
        raise RuntimeError(f"{topic}: {len(failed)} failed deliveries: {failed[0]}")
    lat = sorted(x * 1000 for x in latencies)
    return {"rf": rf, "acks": acks, "fsync": fsync, "count": len(lat), "p50_ms": percentile(lat, 50),
            "p99_ms": percentile(lat, 99), "p999_ms": percentile(lat, 99.9), "max_ms": lat[-1],
            "machine_busy_pct": machine.busy_pct, "client_cpu_pct": 100 * client_cpu / (clock() - start)}


# -- 3. failover ------------------------------------------------------------------------------------

def failover(root: Path, zookeeper: ZooKeeperProcess, session_timeout_ms: int, repeats: int) -> dict:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient

    cluster = Cluster(root / f"failover-{session_timeout_ms}", zookeeper,
                      session_timeout_ms=session_timeout_ms).start()
    runs = []
    try:
        topic = "failover"
        cluster.create_topic(topic, 3, {"min.insync.replicas": "2"})
        for rep in range(repeats):
            leader, _, controller = cluster.partition(topic)
            delivered_at: list[float] = []
            producer = Producer({**QUIET, "bootstrap.servers": cluster.bootstrap, "acks": "all",
                                 "linger.ms": 0, "message.timeout.ms": 120_000})
            producer.produce(topic, b"warm-up", partition=0)
            if producer.flush(30):
                raise RuntimeError("the warm-up record was not acknowledged")
            victim = cluster.brokers[leader]
            killed_at = time.perf_counter()
            victim.kill()
            producer.produce(topic, b"after the kill", partition=0,
                             on_delivery=lambda err, msg: delivered_at.append(
                                 time.perf_counter() if err is None else float("nan")))
            survivors_admin = AdminClient({**QUIET, "bootstrap.servers": cluster.bootstrap})
            elected_at = None
            while not delivered_at or elected_at is None:
                producer.poll(0.01)
                if elected_at is None:
                    p = cluster.partition(topic, survivors_admin)
                    if p is not None and p[0] >= 0 and p[0] != leader:
                        elected_at = time.perf_counter()
                if time.perf_counter() - killed_at > 120:
                    raise RuntimeError("no new leader within 120 s")
            if delivered_at[0] != delivered_at[0]:  # NaN: the record failed
                raise RuntimeError("the record produced after the kill failed")
            runs.append({"leader": leader, "was_controller": leader == controller,
                         "elected_s": elected_at - killed_at, "acked_s": delivered_at[0] - killed_at})
            say(f"  failover {rep + 1}/{repeats} (session {session_timeout_ms} ms): new leader after "
                f"{runs[-1]['elected_s']:.2f} s, first ack after {runs[-1]['acked_s']:.2f} s")
            del producer
            victim.start()
            wait(lambda: (p := cluster.partition(topic)) is not None and len(p[1]) == 3,
                 "the restarted broker to rejoin the ISR")
    finally:
        cluster.stop()
    return {"session_timeout_ms": session_timeout_ms, "runs": runs,
            "elected_median_s": median([r["elected_s"] for r in runs]),
            "elected_max_s": max(r["elected_s"] for r in runs),
            "acked_median_s": median([r["acked_s"] for r in runs]),
            "acked_max_s": max(r["acked_s"] for r in runs)}


# -- the disk's own floor ---------------------------------------------------------------------------

def fsync_alone(root: Path, count: int = 500) -> dict:
    """A 1 KiB write and an fsync, `count` times, on the data dir's filesystem: the least one
    group commit can cost (Log.flush fsyncs the segment and its two indexes)."""
    path = root / "fsync.probe"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    times = []
    try:
        for _ in range(count):
            os.write(fd, b"x" * 1024)
            start = time.perf_counter()
            os.fsync(fd)
            times.append((time.perf_counter() - start) * 1000)
    finally:
        os.close(fd)
        path.unlink()
    times.sort()
    return {"count": count, "p50_ms": percentile(times, 50), "p99_ms": percentile(times, 99)}


# -- the whole run ----------------------------------------------------------------------------------

def run(root: Path, sizes: Sizes, *, with_failover: bool) -> dict:
    results: dict = {"load_before": os.getloadavg()}
    device = block_device(root)
    results["fsync"] = fsync_alone(root)
    with ZooKeeperProcess(root / "zookeeper") as zookeeper:
        cluster = Cluster(root / "main", zookeeper, session_timeout_ms=DEFAULT_SESSION_TIMEOUT_MS).start()
        try:
            results["throughput"] = throughput(cluster, device, sizes)
            results["latency"] = []
            for case in CASES:
                say(f"latency {case_name(*case)}")
                results["latency"].append(latency(cluster, *case, sizes))
        finally:
            cluster.stop()
        results["failover"] = [failover(root, zookeeper, timeout, sizes.failovers)
                               for timeout in (sizes.session_timeouts_ms if with_failover else ())]
    results["device"] = device
    results["load_after"] = os.getloadavg()
    return results


def report(machine, sizes: Sizes, args, results: dict, elapsed: float) -> str:
    cmd = ".venv/bin/python bench/bench_cluster.py" + (" --quick" if args.quick else "") + \
        (" --no-failover" if args.no_failover else "")
    load = " / ".join(f"{x:.2f}" for x in results["load_before"])
    load_after = " / ".join(f"{x:.2f}" for x in results["load_after"])
    out = [f"Command: `{cmd}` (run time {elapsed:.0f} s)", "", "Machine:", *machine.lines(),
           f"- load average (1/5/15 min, `uptime`) before: {load}; after: {load_after}",
           "- three brokers, the client and ZooKeeper share these cores: RF=3 pays for three "
           "brokers' work on the same CPU", ""]
    out += [f"### Produce throughput (1 KiB records, one partition, linger.ms=5, batch.size=65536; "
            f"medians of {sizes.reps})", ""]
    rows = [[case_name(r["rf"], r["acks"], r["fsync"]), f"{r['count']:,}", f"{r['msgs_s']:,.0f}",
             " / ".join(f"{x / 1000:,.1f}k" for x in r["runs_msgs_s"]), f"{r['mb_s']:,.1f}",
             f"{r['requests']:,}", f"{r['disk_flushes']:,}", f"{r['brokers_cpu_pct']:.0f}%",
             f"{r['client_cpu_pct']:.0f}%", rest(r)] for r in results["throughput"]]
    out += [table(["case", "records", "msgs/s", "each run", "MB/s", "Produce requests", "disk flushes",
                   "brokers' CPU", "client CPU", "rest of machine"], rows), ""]
    out += ["- msgs/s from the first produce() to the end of flush(); \"each run\": every run's msgs/s. "
            "Produce requests: what the client sent (librdkafka's statistics, `tx`). Disk flushes: flush "
            f"requests the data dir's device ({results['device']}) completed during the run, from "
            "/proc/diskstats; everyone's fsyncs count, so it bounds ours from above. CPU columns: % of one "
            "core (the machine has 2); brokers' CPU is all three together; \"rest of machine\" is all other "
            "busy CPU (ZooKeeper, other people's processes, the kernel); a run with more than 25% there is "
            "repeated once after waiting up to 30 s for an idle machine (\"disturbed\": still so).", ""]
    out += [f"### Produce latency ({sizes.latency_rate:,} records/s of 1 KiB, linger.ms=0, "
            f"{sizes.latency_s:g} s after {sizes.latency_warmup_s:g} s of warm-up)", ""]
    rows = [[case_name(r["rf"], r["acks"], r["fsync"]), f"{r['count']:,}", f"{r['p50_ms']:.2f}",
             f"{r['p99_ms']:.2f}", f"{r['p999_ms']:.2f}", f"{r['max_ms']:.1f}", f"{r['machine_busy_pct']:.0f}%"]
            for r in results["latency"]]
    out += [table(["case", "records", "p50 ms", "p99 ms", "p99.9 ms", "max ms", "machine busy"], rows), ""]
    fs = results["fsync"]
    out += [f"- The disk alone: a 1 KiB write + fsync, {fs['count']} times: p50 {fs['p50_ms']:.2f} ms, "
            f"p99 {fs['p99_ms']:.2f} ms. Machine busy: all processes, % of one core.", ""]
    if not results["failover"]:
        return "\n".join(out)
    out += ["### Failover (leader SIGKILLed; RF=3, min.insync.replicas=2)", ""]
    rows = [[f"{f['session_timeout_ms']:,}", len(f["runs"]), f"{f['elected_median_s']:.2f}",
             f"{f['elected_max_s']:.2f}", f"{f['acked_median_s']:.2f}", f"{f['acked_max_s']:.2f}",
             " / ".join(f"{r['acked_s']:.1f}" + ("*" if r["was_controller"] else "") for r in f["runs"])]
            for f in results["failover"]]
    out += [table(["zookeeper.session.timeout.ms", "kills", "new leader: median s", "max s",
                   "first acks=all: median s", "max s", "each kill (s; * = the leader was also the controller)"],
                  rows), ""]
    out += ["- From the SIGKILL to the first Metadata answer of a surviving broker naming a new leader, and "
            "to the acknowledgement of an acks=all record produced right after the kill (librdkafka, "
            "connected and idle at the kill, default retry and metadata settings).", ""]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer records, repeats and session timeouts")
    parser.add_argument("--dir", type=Path, default=None,
                        help="parent of the data directories, on a disk (default: the system temp dir)")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    parser.add_argument("--no-failover", action="store_true", help="throughput and latency only")
    parser.add_argument("--wait-idle", type=float, default=0, metavar="SECONDS",
                        help="first wait up to this long for the machine to be idle (<15%% of a core busy)")
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    # SIGTERM unwinds like an exception, so the brokers and ZooKeeper are stopped on the way out.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with tempfile.TemporaryDirectory(prefix="logbroker-bench-cluster-", dir=args.dir) as tmp:
        root = Path(tmp)
        if is_tmpfs(root):
            parser.error(f"{root.parent} is tmpfs, where fsync costs nothing; pick --dir on a disk")
        if args.wait_idle:
            say(f"waiting up to {args.wait_idle:.0f} s for an idle machine")
            wait_idle(args.wait_idle)
        machine = machine_info(root)
        say("\n".join(machine.lines()))
        started = time.perf_counter()
        results = run(root, sizes, with_failover=not args.no_failover)
        results["elapsed_s"] = time.perf_counter() - started
    print(report(machine, sizes, args, results, results["elapsed_s"]))
    if args.json:
        write_json(args.json, machine, {"quick": args.quick, **results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
