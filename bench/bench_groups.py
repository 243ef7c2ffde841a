"""Group coordinator failover: loading a `__consumer_offsets` partition, and the time
from a coordinator's SIGKILL to the next acknowledged offset commit.

    .venv/bin/python bench/bench_groups.py            # load: 1000 groups × 100 offsets × 5 commits
    .venv/bin/python bench/bench_groups.py --quick    # a tenth of that, and fewer failovers

1. Load. When a broker becomes leader of an offsets partition, `group_loader.load_groups` replays
   its log in a worker thread, and the partition's groups answer COORDINATOR_LOAD_IN_PROGRESS until
   it ends: this time adds to a coordinator failover. The log is written in-process the way the
   coordinator writes it (one batch per commit of a group's partitions, one group-metadata record
   per group), uncompacted, so every commit is read back; then loaded `--reps` times (page cache
   warm). Reported: records and MiB per second.
2. Failover. Three brokers and ZooKeeper on loopback, __consumer_offsets with three replicas; a
   confluent-kafka consumer commits, its coordinator is SIGKILLed, and the consumer commits again
   in a loop: the time to the first acknowledged commit, for a few zookeeper.session.timeout.ms
   (the controller learns of the dead broker only when its session expires).
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from pathlib import Path

from bench_ceilings import QUIET
from bench_cluster import Cluster, wait
from common import machine_info, median, say, table
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as ClientTopicPartition
from confluent_kafka.admin import AdminClient

from logbroker.clock import SystemClock
from logbroker.coordinator.group_loader import load_groups
from logbroker.coordinator.offsets_log import build_records
from logbroker.coordinator import offsets_schema as schema
from logbroker.storage.log_config import LogConfig
from logbroker.storage.log_manager import LogManager
from logbroker.types import TopicPartition
from logbroker.zookeeper_process import ZooKeeperProcess


def write_offsets_log(data_dir: Path, *, groups: int, partitions: int, commits: int):
    clock = SystemClock()
    manager = LogManager([data_dir], default_config=LogConfig.defaults(), clock=clock)
    manager.startup({})
    log_ = manager.get_or_create_log(TopicPartition(schema.OFFSETS_TOPIC, 0), LogConfig.defaults(), None)
    now = clock.time_ms()
    for g in range(groups):
        group_id = f"group-{g}"
        member = schema.MemberRecord(f"m-{g}", None, "bench", "/127.0.0.1", 300000, 45000, b"subscription", b"assignment")
        record = schema.GroupMetadataRecord("consumer", 1, "range", member.member_id, now, (member,))
        log_.append_as_leader(build_records([(schema.encode_group_metadata_key(group_id),
                                              schema.encode_group_metadata_value(record))], now), leader_epoch=0)
        for c in range(commits):
            entries = [(schema.encode_offset_commit_key(group_id, "events", p),
                        schema.encode_offset_commit_value(schema.OffsetAndMetadata(c * 1000 + p, -1, "", now, -1)))
                       for p in range(partitions)]
            log_.append_as_leader(build_records(entries, now), leader_epoch=0)
    return manager, log_


def load(groups: int, partitions: int, commits: int, reps: int) -> list:
    with tempfile.TemporaryDirectory() as tmp:
        manager, log_ = write_offsets_log(Path(tmp), groups=groups, partitions=partitions, commits=commits)
        end = log_.log_end_offset
        size_mib = sum(f.stat().st_size for f in Path(log_.dir).glob("*.log")) / (1 << 20)
        seconds = []
        for _ in range(reps):
            started = time.perf_counter()
            loaded = load_groups(log_, end, 0, 0)
            seconds.append(time.perf_counter() - started)
            assert len(loaded) == groups and all(len(g.offsets) == partitions for g in loaded.values())
        manager.shutdown()
    took = median(seconds)
    return [groups, partitions, end, f"{size_mib:.1f}", f"{took:.2f}", f"{end / took:,.0f}", f"{size_mib / took:.1f}"]


def failover_once(root: Path, zookeeper: ZooKeeperProcess, session_timeout_ms: int) -> float:
    cluster = Cluster(root, zookeeper, session_timeout_ms=session_timeout_ms)
    for broker in cluster.brokers.values():
        broker.overrides.update({"offsets.topic.replication.factor": "3", "offsets.topic.num.partitions": "3",
                                 "replica.lag.time.max.ms": "5000"})
    cluster.start()
    try:
        cluster.create_topic("events", 3, {"min.insync.replicas": "2"})
        producer = Producer({**QUIET, "bootstrap.servers": cluster.bootstrap})
        producer.produce("events", b"x", partition=0)
        producer.flush(30)
        group = f"g-{uuid.uuid4().hex[:8]}"
        consumer = Consumer({**QUIET, "bootstrap.servers": cluster.bootstrap, "group.id": group,
                             "enable.auto.commit": False, "auto.offset.reset": "earliest",
                             "session.timeout.ms": max(session_timeout_ms * 2, 10_000)})
        consumer.subscribe(["events"])
        wait(lambda: (m := consumer.poll(0.2)) is not None and m.error() is None, "the first record")
        offsets = [ClientTopicPartition("events", 0, 1)]
        consumer.commit(offsets=offsets, asynchronous=False)
        admin = AdminClient({**QUIET, "bootstrap.servers": cluster.bootstrap})  # alive until the answer
        coordinator = admin.describe_consumer_groups([group])[group].result(30).coordinator.id
        killed_at = time.perf_counter()
        cluster.brokers[coordinator].kill()
        while True:
            consumer.poll(0.05)
            try:
                consumer.commit(offsets=offsets, asynchronous=False)
                took = time.perf_counter() - killed_at
                break
            except KafkaException:
                if time.perf_counter() - killed_at > 180:
                    raise RuntimeError("no commit acknowledged within 180 s of the kill") from None
        consumer.close()
        say(f"  session {session_timeout_ms} ms: coordinator {coordinator} killed, commit acknowledged after {took:.2f} s")
        return took
    finally:
        cluster.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    groups, partitions, commits = (100, 100, 5) if args.quick else (1000, 100, 5)
    with tempfile.TemporaryDirectory() as tmp:
        say(machine_info(tmp))
    say(table(["groups", "offsets/group", "records", "log MiB", "load s (median)", "records/s", "MiB/s"],
              [load(groups, partitions, commits, args.reps)]))
    rows = []
    with tempfile.TemporaryDirectory() as tmp, ZooKeeperProcess(Path(tmp) / "zookeeper") as zookeeper:
        for session_timeout_ms in (6000,) if args.quick else (6000, 18000):
            runs = [failover_once(Path(tmp) / f"{session_timeout_ms}-{rep}", zookeeper, session_timeout_ms)
                    for rep in range(1 if args.quick else args.reps)]
            rows.append([session_timeout_ms, len(runs), f"{median(runs):.2f}", f"{max(runs):.2f}"])
    say(table(["zookeeper.session.timeout.ms", "runs", "kill → commit acked, median s", "max s"], rows))


if __name__ == "__main__":
    main()
