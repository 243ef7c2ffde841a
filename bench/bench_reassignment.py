"""Partition reassignment and preferred-leader election on three local brokers.

    .venv/bin/python bench/bench_reassignment.py              # 100 MiB, 3 repeats
    .venv/bin/python bench/bench_reassignment.py --mib 20 --reps 1

1. Reassignment: a one-partition RF=1 topic on broker 1 holding `--mib` MiB of 1 KiB records is
   reassigned to brokers [2, 3] (AlterPartitionReassignments through kafka-python); measured from
   the request to (a) ListPartitionReassignments being empty and the topic's replicas being [2, 3]
   in Metadata. MiB/s is the data copied to each new replica over that time (both copy at once).
2. ElectLeaders (PREFERRED): for an RF=3 topic whose preferred leader was restarted and is back in
   the ISR, the time of confluent-kafka's elect_leaders (the answer waits until the controller's
   metadata shows the new leader) and until a non-controller broker's Metadata names it.

Three brokers, ZooKeeper and the client share this machine's cores with other people's work: read
the numbers as this machine's, with `uptime` printed before and after.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import ElectionType, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import TopicPartition as KafkaTopicPartition
from kafka.admin import KafkaAdminClient

from logbroker.testing import BrokerProcess
from logbroker.zookeeper_process import ZooKeeperProcess

OVERRIDES = {"zookeeper.session.timeout.ms": "6000", "replica.lag.time.max.ms": "5000",
             "offsets.topic.replication.factor": "1", "auto.leader.rebalance.enable": "false"}


def wait_for(condition, timeout_s: float = 120.0, interval_s: float = 0.02):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval_s)
    raise RuntimeError(f"condition not met within {timeout_s} s")


def partition(bootstrap: str, topic: str, index: int = 0):
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    t = md.topics.get(topic)
    return None if t is None or t.error is not None else t.partitions.get(index)


def create_topic(bootstrap: str, topic: str, replicas: list[int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the answer
    admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[replicas])])[topic].result(30)


def fill(bootstrap: str, topic: str, mib: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 65536,
                         "acks": "1"})
    record = os.urandom(1024)
    for _ in range(mib * 1024):
        while True:
            try:
                producer.produce(topic, record, partition=0)
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(120)


def reassign_once(brokers, mib: int, rep: int) -> float:
    bootstrap = brokers[0].bootstrap
    topic = f"moving-{rep}"
    create_topic(bootstrap, topic, [1])
    wait_for(lambda: (p := partition(bootstrap, topic)) is not None and p.leader == 1)
    fill(bootstrap, topic, mib)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        tp = KafkaTopicPartition(topic, 0)
        start = time.monotonic()
        assert admin.alter_partition_reassignments({tp: [2, 3]}) == {tp: None}
        wait_for(lambda: not admin.list_partition_reassignments() and
                 (p := partition(bootstrap, topic)) is not None and list(p.replicas) == [2, 3],
                 interval_s=0.05)
        return time.monotonic() - start
    finally:
        admin.close()


def elect_once(brokers, rep: int) -> tuple[float, float]:
    bootstrap = brokers[1].bootstrap
    topic = f"prefer-{rep}"
    create_topic(bootstrap, topic, [1, 2, 3])
    wait_for(lambda: (p := partition(bootstrap, topic)) is not None and sorted(p.isrs) == [1, 2, 3])
    brokers[0].stop()
    wait_for(lambda: (p := partition(bootstrap, topic)) is not None and p.leader not in (-1, 1))
    brokers[0].start()
    wait_for(lambda: 1 in partition(bootstrap, topic).isrs)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    start = time.monotonic()
    result = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0)]).result(30)
    answered = time.monotonic() - start
    assert all(error is None for error in result.values()), result
    other = next(b for b in brokers[1:])
    wait_for(lambda: partition(other.bootstrap, topic).leader == 1, interval_s=0.005)
    return answered, time.monotonic() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=100)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    print("uptime before:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    with tempfile.TemporaryDirectory(prefix="bench-reassign-") as tmp, \
            ZooKeeperProcess(Path(tmp) / "zk") as zk:
        brokers = [BrokerProcess(Path(tmp) / f"broker-{i}", overrides={
            **OVERRIDES, "broker.id": str(i), "zookeeper.connect": f"{zk.connect_string}/bench"}).start()
            for i in (1, 2, 3)]
        try:
            moves = [reassign_once(brokers, args.mib, rep) for rep in range(args.reps)]
            print(f"reassign {args.mib} MiB from [1] to [2,3]: median {statistics.median(moves):.2f} s "
                  f"({args.mib / statistics.median(moves):.1f} MiB/s per new replica); "
                  f"runs {', '.join(f'{m:.2f}' for m in moves)} s")
            elections = [elect_once(brokers, rep) for rep in range(args.reps)]
            print("elect_leaders PREFERRED: answer median "
                  f"{statistics.median(a for a, _ in elections) * 1000:.0f} ms, leader visible on "
                  f"another broker median {statistics.median(v for _, v in elections) * 1000:.0f} ms; "
                  f"runs {', '.join(f'{a * 1000:.0f}/{v * 1000:.0f}' for a, v in elections)} ms")
        finally:
            for broker in brokers:
                broker.kill()
    print("uptime after:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    sys.exit(main())
