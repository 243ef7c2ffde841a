"""Consumer-group rebalance benchmark: how long a group of 3 takes to become a group
of 4, on the classic protocol and on KIP-848's consumer protocol.

    .venv/bin/python bench/bench_rebalance.py                 # ~3-4 minutes
    .venv/bin/python bench/bench_rebalance.py --runs 3 --heartbeat-ms 3000 --protocol consumer

A real `logbroker serve` subprocess, a 12-partition topic, and confluent-kafka consumers, each in
its own thread calling poll(0.05) (which serves the rebalance callbacks). Each run uses a fresh
group: three members subscribe and the run waits until each holds 4 partitions; then the fourth
subscribes, and the rebalance time is from just before its subscribe() to the moment the last of
the four on_assign callbacks gives it its new assignment (3 partitions each, all 12 covered).
Classic consumers use the default assignor (range, eager: every member gives up all its
partitions and rejoins), session.timeout.ms 45000 and the heartbeat.interval.ms under test.
Consumer-protocol members (group.protocol=consumer) get their heartbeat interval from the broker
(group.consumer.heartbeat.interval.ms, set to the interval under test) and their assignment from
its default assignor (uniform): only the partitions that move change hands, each once its owner
has revoked it. Assignments are tracked incrementally (on_assign adds, on_revoke removes), which
reads both protocols right. The table also counts the partitions that changed owner (moved) and
those the members gave up at some point during the rebalance (revoked: all 12 with the eager
classic protocol, only the moved ones with the consumer protocol).

Each setting runs on a broker with group.initial.rebalance.delay.ms 0 and with Kafka's default
3000. That delay holds the first join of an *empty* group (so that a fleet starting together is
assigned once); a group that already has members rebalances at once. So it shows in the first
three members' join time, not in the 3 -> 4 rebalance: the table reports both.

The floor (classic). Members learn of a rebalance from their heartbeat's REBALANCE_IN_PROGRESS, so the
coordinator waits for the existing members' next heartbeats before it can complete the join:
up to one heartbeat.interval.ms. The three joined together and heartbeat in step, so with the
fourth joining at a random phase (the run sleeps 0.5 s plus a uniform random part of one
interval first) the wait is uniform over the interval: half of it on average, all of it at
worst. The protocol allows nothing faster; the broker's own work (JoinGroup, the leader's
assignment, SyncGroup, the offset fetches) comes on top. With the consumer protocol a partition
moves in three heartbeats (its owner is told to revoke it, reports it revoked, the new member is
given it), so its floor is about two intervals from the fourth member's join, its members'
heartbeats being out of step.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import machine_info, median, say, table  # noqa: E402

from logbroker.testing import BrokerProcess  # noqa: E402

PARTITIONS = 12
KAFKA_DEFAULT_INITIAL_DELAY_MS = 3000
LIBRDKAFKA_DEFAULT_HEARTBEAT_MS = 3000
TIMEOUT_S = 60.0


class Member:
    """One consumer in its own thread; keeps every assignment it is given, with its time."""

    def __init__(self, name: str, bootstrap: str, group: str, topic: str,
                 heartbeat_ms: int, protocol: str) -> None:
        from confluent_kafka import Consumer
        self.name = name
        self.topic = topic
        timing = ({"heartbeat.interval.ms": heartbeat_ms, "session.timeout.ms": 45000}
                  if protocol == "classic" else {})  # the consumer protocol's come from the broker
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                  "client.id": name, "enable.auto.commit": False,
                                  "group.protocol": protocol, **timing})
        self.owned: frozenset[int] = frozenset()
        self.revoked: set[int] = set()  # every partition this member gave up
        self.assignments: list[tuple[float, frozenset[int]]] = []
        self.subscribed_at: float | None = None
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _on_assign(self, consumer, partitions) -> None:
        with self.lock:
            self.owned |= {p.partition for p in partitions}
            self.assignments.append((time.perf_counter(), self.owned))

    def _on_revoke(self, consumer, partitions) -> None:
        with self.lock:
            self.revoked |= {p.partition for p in partitions}
            self.owned -= {p.partition for p in partitions}
            self.assignments.append((time.perf_counter(), self.owned))

    def _run(self) -> None:
        self.subscribed_at = time.perf_counter()
        self.consumer.subscribe([self.topic], on_assign=self._on_assign,
                                on_revoke=self._on_revoke)
        while not self.stopping.is_set():
            self.consumer.poll(0.05)
        self.consumer.close()

    def latest(self) -> tuple[float, frozenset[int]] | None:
        with self.lock:
            return self.assignments[-1] if self.assignments else None

    def stop(self) -> None:
        self.stopping.set()


def wait_balanced(members: list[Member], since: float, per_member: int) -> float:
    """Block until each member's latest assignment came after `since`, has `per_member`
    partitions, and together they cover the topic once. Returns the last of those times."""
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        latest = [m.latest() for m in members]
        if all(entry is not None and entry[0] >= since and len(entry[1]) == per_member
               for entry in latest):
            covered = [p for _, partitions in latest for p in partitions]
            if sorted(covered) == list(range(PARTITIONS)):
                return max(at for at, _ in latest)
        time.sleep(0.005)
    raise TimeoutError(f"no balanced assignment of {len(members)} members within {TIMEOUT_S} s: "
                       f"{[m.latest() for m in members]}")


def one_run(bootstrap: str, topic: str, heartbeat_ms: int, protocol: str) -> tuple[float, float, int, int]:
    """(first join of 3 members, rebalance 3 -> 4 in milliseconds, partitions moved, partitions
    revoked during the rebalance)."""
    group = f"bench-{uuid.uuid4().hex[:10]}"
    members = [Member(f"member-{i}", bootstrap, group, topic, heartbeat_ms, protocol) for i in range(4)]
    try:
        first_start = time.perf_counter()
        for member in members[:3]:
            member.start()
        joined = wait_balanced(members[:3], first_start, PARTITIONS // 3)
        # Settle (all three past SyncGroup and heartbeating), then join at a random phase of
        # their heartbeats: they joined together, so they heartbeat in step, and how long the
        # rebalance waits for them depends on that phase alone.
        time.sleep(0.5 + random.uniform(0, heartbeat_ms / 1000))
        before = {m.name: m.latest()[1] for m in members[:3]}
        for m in members[:3]:
            with m.lock:
                m.revoked.clear()
        fourth_start = time.perf_counter()
        members[3].start()
        rebalanced = wait_balanced(members, fourth_start, PARTITIONS // 4)
        moved = sum(len(before[m.name] - m.latest()[1]) for m in members[:3])
        revoked = sum(len(m.revoked) for m in members[:3])
        return (joined - first_start) * 1000, (rebalanced - fourth_start) * 1000, moved, revoked
    finally:
        for member in members:
            member.stop()
        for member in members:
            member.thread.join(30)


def run_setting(base_dir: Path, protocol: str, initial_delay_ms: int, heartbeat_ms: int,
                runs: int) -> dict:
    say(f"{protocol} protocol, broker with group.initial.rebalance.delay.ms={initial_delay_ms}, "
        f"heartbeat interval {heartbeat_ms} ms")
    broker = BrokerProcess(base_dir / f"broker-{protocol}-{initial_delay_ms}-{heartbeat_ms}",
                           overrides={"group.initial.rebalance.delay.ms": str(initial_delay_ms),
                                      "group.consumer.heartbeat.interval.ms": str(heartbeat_ms)})
    broker.start()
    try:
        from confluent_kafka.admin import AdminClient, NewTopic
        topic = f"rebalance-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(topic, PARTITIONS)])[topic].result(timeout=30)
        del admin  # closed now, not when the broker stops under it (librdkafka would log that)
        joins, rebalances, moves, revokes = [], [], [], []
        for i in range(runs):
            join_ms, rebalance_ms, moved, revoked = one_run(broker.bootstrap, topic, heartbeat_ms, protocol)
            say(f"  run {i + 1}: first join of 3 {join_ms:.0f} ms, 3 -> 4 {rebalance_ms:.0f} ms, "
                f"{moved} moved, {revoked} revoked")
            joins.append(join_ms)
            rebalances.append(rebalance_ms)
            moves.append(moved)
            revokes.append(revoked)
    finally:
        broker.stop()
    return {"protocol": protocol, "initial_delay_ms": initial_delay_ms, "heartbeat_ms": heartbeat_ms,
            "joins_ms": joins, "rebalances_ms": rebalances, "moved": moves, "revoked": revokes}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--heartbeat-ms", type=int, action="append",
                        help="heartbeat interval (clients' heartbeat.interval.ms, the broker's "
                             "group.consumer.heartbeat.interval.ms); repeatable "
                             f"(default: {LIBRDKAFKA_DEFAULT_HEARTBEAT_MS} and 500)")
    parser.add_argument("--protocol", action="append", choices=("classic", "consumer"),
                        help="group.protocol; repeatable (default: both)")
    args = parser.parse_args()
    heartbeats = args.heartbeat_ms or [LIBRDKAFKA_DEFAULT_HEARTBEAT_MS, 500]
    protocols = args.protocol or ["classic", "consumer"]

    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bench-rebalance-") as tmp:
        machine = machine_info(tmp)
        # The initial delay only holds a classic group's first join; the consumer protocol has none.
        results = [run_setting(Path(tmp), protocol, delay, heartbeat, args.runs)
                   for heartbeat in heartbeats for protocol in protocols
                   for delay in ((0, KAFKA_DEFAULT_INITIAL_DELAY_MS) if protocol == "classic" else (0,))]
    elapsed = time.monotonic() - started

    print(f"Command: `.venv/bin/python bench/bench_rebalance.py {' '.join(sys.argv[1:])}`".rstrip()
          + f" (run time {elapsed:.0f} s)\n")
    print("Machine:")
    print("\n".join(machine.lines()))
    print()
    rows = []
    for r in results:
        rows.append([r["protocol"], f"{r['initial_delay_ms']:,} ms" if r["protocol"] == "classic" else "-",
                     f"{r['heartbeat_ms']:,} ms",
                     f"{median(r['joins_ms']):,.0f} ms", f"{median(r['rebalances_ms']):,.0f} ms",
                     f"{min(r['rebalances_ms']):,.0f} ms", f"{max(r['rebalances_ms']):,.0f} ms",
                     f"{median(r['rebalances_ms']) / r['heartbeat_ms']:.2f}×",
                     f"{median(r['moved']):.0f}", f"{median(r['revoked']):.0f}"])
    print(table(["group.protocol", "group.initial.rebalance.delay.ms", "heartbeat interval",
                 "first join of 3 (median)", "3 → 4 rebalance (median)", "min", "max",
                 "median / heartbeat", "moved", "revoked"], rows))
    print()
    print(f"Medians of {args.runs} runs, each with a fresh group. Every run (ms):")
    for r in results:
        print(f"- {r['protocol']}, delay {r['initial_delay_ms']}, heartbeat {r['heartbeat_ms']}: join "
              + ", ".join(f"{v:.0f}" for v in r["joins_ms"]) + "; 3 → 4 "
              + ", ".join(f"{v:.0f}" for v in r["rebalances_ms"]))


if __name__ == "__main__":
    main()
