"""Real group consumers — confluent-kafka, kafka-python, aiokafka — against a broker.

Each test checks the two things a consumer group promises: no partition is ever owned by two
members at once, and every record is consumed, through joins, leaves, crashes and restarts.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

PARTITIONS = 6
TIMEOUT_S = 30


def names() -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:8]
    return f"t-{suffix}", f"g-{suffix}"


def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the result arrives
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(TIMEOUT_S)


def produce(bootstrap: str, topic: str, per_partition: int, *, partitions: int = PARTITIONS) -> set[tuple[int, int]]:
    """Write records round the partitions; returns their (partition, value) pairs."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    written = set()
    for i in range(per_partition * partitions):
        partition = i % partitions
        value = f"{uuid.uuid4().hex}"
        producer.produce(topic, value=value.encode(), key=str(i).encode(), partition=partition)
        written.add((partition, value))
    assert producer.flush(TIMEOUT_S) == 0
    return written


def ck_consumer(bootstrap: str, group: str, **extra) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                     "session.timeout.ms": 6000, "heartbeat.interval.ms": 500, **extra})


class Poller:
    """Polls confluent consumers round-robin, recording what they consume and checking after each
    poll that no partition is assigned to two of them."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.consumed: set[tuple[int, str]] = set()
        self.by_consumer: dict[int, list[tuple[int, int]]] = {}

    def assignments(self, consumers) -> list[set[int]]:
        return [{tp.partition for tp in c.assignment() if tp.topic == self.topic} for c in consumers]

    def poll_until(self, consumers, done, timeout_s: float = TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for c in consumers:
                msg = c.poll(0.02)
                if msg is not None and msg.error() is None:
                    self.consumed.add((msg.partition(), msg.value().decode()))
                    self.by_consumer.setdefault(id(c), []).append((msg.partition(), msg.offset()))
            owned = self.assignments(consumers)
            flat = [p for a in owned for p in a]
            assert len(flat) == len(set(flat)), f"a partition is assigned twice: {owned}"
            if done(owned):
                return
        raise AssertionError(f"timed out; assignments {self.assignments(consumers)}, consumed {len(self.consumed)}")


def split(n_members: int):
    return lambda owned: (sum(len(a) for a in owned) == PARTITIONS and all(owned) and len(owned) == n_members)


def test_confluent_consumers_split_partitions_through_joins_and_leaves(group_broker):
    bootstrap = group_broker.bootstrap
    topic, group = names()
    create_topic(bootstrap, topic)
    written = produce(bootstrap, topic, 20)
    consumers = [ck_consumer(bootstrap, group) for _ in range(3)]
    for c in consumers:
        c.subscribe([topic])
    poller = Poller(topic)
    poller.poll_until(consumers, lambda owned: split(3)(owned) and [len(a) for a in owned] == [2, 2, 2])
    late = ck_consumer(bootstrap, group)
    late.subscribe([topic])
    consumers.append(late)
    poller.poll_until(consumers, split(4))
    consumers.pop(0).close()  # leaves the group at once
    poller.poll_until(consumers, split(3))
    written |= produce(bootstrap, topic, 20)
    poller.poll_until(consumers, lambda owned: poller.consumed == written)
    for c in consumers:
        c.close()


KILLABLE_CONSUMER = """
import sys, time
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "auto.offset.reset": "earliest",
              "session.timeout.ms": 6000, "heartbeat.interval.ms": 500, "enable.auto.commit": False})
c.subscribe([sys.argv[3]])
reported = None
while True:
    c.poll(0.05)
    mine = sorted(tp.partition for tp in c.assignment())
    if mine != reported:
        reported = mine
        print("assigned", ",".join(map(str, mine)), flush=True)
"""


def test_killed_consumers_partitions_move_after_its_session_timeout(group_broker):
    bootstrap = group_broker.bootstrap
    topic, group = names()
    create_topic(bootstrap, topic)
    written = produce(bootstrap, topic, 10)
    victim = subprocess.Popen([sys.executable, "-c", KILLABLE_CONSUMER, bootstrap, group, topic],
                              stdout=subprocess.PIPE, text=True)
    try:
        consumers = [ck_consumer(bootstrap, group) for _ in range(2)]
        for c in consumers:
            c.subscribe([topic])
        poller = Poller(topic)
        poller.poll_until(consumers, lambda owned: sum(map(len, owned)) == 4 and all(owned))
        line = victim.stdout.readline()
        while line and line.strip() == "assigned":
            line = victim.stdout.readline()
        victims = {int(p) for p in line.split()[1].split(",")}
        assert len(victims) == 2 and not victims & set().union(*poller.assignments(consumers))
    finally:
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait()
    killed_at = time.monotonic()
    poller.poll_until(consumers, lambda owned: sum(map(len, owned)) == PARTITIONS)
    assert time.monotonic() - killed_at >= 3  # it took the session timeout, not a LeaveGroup
    written |= produce(bootstrap, topic, 10)
    poller.poll_until(consumers, lambda owned: poller.consumed == written)
    for c in consumers:
        c.close()


def test_committed_offsets_survive_a_broker_restart(restartable_broker):
    broker = restartable_broker
    topic, group = names()
    create_topic(broker.bootstrap, topic, 3)
    produce(broker.bootstrap, topic, 10, partitions=3)
    first = ck_consumer(broker.bootstrap, group, **{"enable.auto.commit": False})
    first.subscribe([topic])
    seen: dict[int, list[int]] = {}
    while sum(map(len, seen.values())) < 15:
        msg = first.poll(0.1)
        if msg is not None and msg.error() is None:
            seen.setdefault(msg.partition(), []).append(msg.offset())
    positions = {p: max(offsets) + 1 for p, offsets in seen.items()}
    first.commit(offsets=[CkTopicPartition(topic, p, o, metadata=f"meta-{p}") for p, o in positions.items()],
                 asynchronous=False)
    first.close()

    broker.stop()
    broker.start()

    second = ck_consumer(broker.bootstrap, group, **{"enable.auto.commit": False})
    committed = second.committed([CkTopicPartition(topic, p) for p in range(3)], timeout=TIMEOUT_S)
    assert {tp.partition: (tp.offset, tp.metadata) for tp in committed if tp.offset >= 0} == {
        p: (o, f"meta-{p}") for p, o in positions.items()}
    second.subscribe([topic])
    resumed: dict[int, list[int]] = {}
    deadline = time.monotonic() + TIMEOUT_S
    while sum(map(len, resumed.values())) < 30 - 15 and time.monotonic() < deadline:
        msg = second.poll(0.1)
        if msg is not None and msg.error() is None:
            resumed.setdefault(msg.partition(), []).append(msg.offset())
    second.close()
    for p in range(3):
        assert sorted(seen.get(p, []) + resumed.get(p, [])) == list(range(10)), p  # none twice, none lost


def test_a_closed_consumers_group_comes_back_empty_after_a_restart(restartable_broker):
    """The last consumer of a group closes (LeaveGroup): the group is Empty, a broker restart keeps
    it so, and the next consumer gets the partitions at once. Were the member loaded back, it would
    wait for that session to expire (45 s here, as librdkafka's default; longer than the test's
    30 s). Nothing is logged at ERROR: the last member's going used to log a traceback."""
    broker = restartable_broker
    topic, group = names()
    create_topic(broker.bootstrap, topic, 3)
    written = produce(broker.bootstrap, topic, 2, partitions=3)
    first = ck_consumer(broker.bootstrap, group, **{"session.timeout.ms": 45000})
    first.subscribe([topic])
    Poller(topic).poll_until([first], lambda owned: owned[0] == {0, 1, 2})
    first.close()

    broker.stop()
    broker.start()

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    described = admin.describe_consumer_groups([group])[group].result(TIMEOUT_S)
    assert (described.state, described.members) == (ConsumerGroupState.EMPTY, [])
    second = ck_consumer(broker.bootstrap, group, **{"session.timeout.ms": 45000})
    second.subscribe([topic])
    poller = Poller(topic)
    poller.poll_until([second], lambda owned: poller.consumed == written)
    second.close()
    assert not [line for line in broker.new_log_text().splitlines() if "] ERROR " in line or "Traceback" in line]


def test_static_member_rejoins_without_a_rebalance(group_broker):
    bootstrap = group_broker.bootstrap
    topic, group = names()
    create_topic(bootstrap, topic)
    static = lambda instance: ck_consumer(bootstrap, group, **{"group.instance.id": instance})  # noqa: E731
    a, b = static("a"), static("b")
    for c in (a, b):
        c.subscribe([topic])
    poller = Poller(topic)
    poller.poll_until([a, b], split(2))
    a_partitions, b_partitions = poller.assignments([a, b])
    log_before = group_broker.new_log_text().count(f"Stabilized group {group} ")
    a.close()  # a static member sends no LeaveGroup
    a = static("a")
    a.subscribe([topic])
    poller.poll_until([a, b], lambda owned: owned == [a_partitions, b_partitions])
    time.sleep(0.5)
    poller.poll_until([a, b], lambda owned: owned == [a_partitions, b_partitions], timeout_s=1)
    assert group_broker.new_log_text().count(f"Stabilized group {group} ") == log_before
    assert "Static member a of group " + group in group_broker.new_log_text()
    for c in (a, b):
        c.close()


def test_confluent_admin_lists_describes_and_deletes_groups(group_broker):
    from confluent_kafka import ConsumerGroupState

    bootstrap = group_broker.bootstrap
    topic, group = names()
    create_topic(bootstrap, topic)
    consumer = ck_consumer(bootstrap, group, **{"client.id": "admin-test"})
    consumer.subscribe([topic])
    Poller(topic).poll_until([consumer], split(1))
    admin = AdminClient({"bootstrap.servers": bootstrap})
    listed = admin.list_consumer_groups().result(TIMEOUT_S)
    assert group in {g.group_id for g in listed.valid}
    described = admin.describe_consumer_groups([group], include_authorized_operations=True)[group].result(TIMEOUT_S)
    assert described.state == ConsumerGroupState.STABLE
    # No authorizer: every group operation is allowed.
    assert {op.name for op in described.authorized_operations} == {"READ", "DESCRIBE", "DELETE"}
    assert [m.client_id for m in described.members] == ["admin-test"]
    assert sorted(tp.partition for tp in described.members[0].assignment.topic_partitions) == list(range(PARTITIONS))
    with pytest.raises(Exception, match="NON_EMPTY_GROUP|not empty"):
        admin.delete_consumer_groups([group])[group].result(TIMEOUT_S)
    consumer.close()
    admin.delete_consumer_groups([group])[group].result(TIMEOUT_S)
    assert group not in {g.group_id for g in admin.list_consumer_groups().result(TIMEOUT_S).valid}


def test_kafka_python_consumers_split_partitions_and_admin_reads_offsets(group_broker):
    from kafka import KafkaAdminClient, KafkaConsumer

    bootstrap = group_broker.bootstrap
    topic, group = names()
    create_topic(bootstrap, topic)
    written = produce(bootstrap, topic, 10)
    consumers = [KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                               session_timeout_ms=6000, heartbeat_interval_ms=500, enable_auto_commit=False)
                 for _ in range(3)]
    # One thread per consumer, as applications run kafka-python (polling several consumers in
    # turn from one thread delays each one's JoinGroup to its next poll and keeps kicking off
    # new rebalances).
    consumed: set[tuple[int, str]] = set()
    lock = threading.Lock()
    stop = threading.Event()

    def run(consumer) -> None:
        while not stop.is_set():
            for records in consumer.poll(timeout_ms=100).values():
                with lock:
                    consumed.update((r.partition, r.value.decode()) for r in records)

    threads = [threading.Thread(target=run, args=(c,), daemon=True) for c in consumers]
    for t in threads:
        t.start()
    deadline = time.monotonic() + TIMEOUT_S
    owned: list[set[int]] = []
    while time.monotonic() < deadline:
        owned = [{tp.partition for tp in c.assignment()} for c in consumers]
        flat = [p for a in owned for p in a]
        assert len(flat) == len(set(flat)), owned
        with lock:
            if consumed == written and sorted(map(len, owned)) == [2, 2, 2]:
                break
        time.sleep(0.02)
    stop.set()
    for t in threads:
        t.join()
    assert consumed == written and sorted(map(len, owned)) == [2, 2, 2]
    for c in consumers:
        c.commit()
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        # kafka-python 3.0 names them list_groups / list_group_offsets (list_consumer_groups before)
        assert group in {g["group_id"] for g in admin.list_groups(states_filter=["Stable"])}
        offsets = admin.list_group_offsets(group)[group]
        assert {tp.partition: meta.offset for tp, meta in offsets.items()} == {p: 10 for p in range(PARTITIONS)}
    finally:
        admin.close()
        for c in consumers:
            c.close()


def test_aiokafka_consumers_split_partitions(group_broker):
    from aiokafka import AIOKafkaConsumer

    bootstrap = group_broker.bootstrap
    topic, group = names()
    create_topic(bootstrap, topic)
    written = produce(bootstrap, topic, 10)

    async def run() -> tuple[set, list]:
        consumers = [AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                      auto_offset_reset="earliest", session_timeout_ms=6000,
                                      heartbeat_interval_ms=500) for _ in range(3)]
        for c in consumers:
            await c.start()
        consumed: set[tuple[int, str]] = set()
        owned: list[set[int]] = []
        try:
            deadline = time.monotonic() + TIMEOUT_S
            while time.monotonic() < deadline:
                batches = await asyncio.gather(*(c.getmany(timeout_ms=50) for c in consumers))
                for batch in batches:
                    for records in batch.values():
                        consumed |= {(r.partition, r.value.decode()) for r in records}
                owned = [{tp.partition for tp in c.assignment()} for c in consumers]
                flat = [p for a in owned for p in a]
                assert len(flat) == len(set(flat)), owned
                if consumed == written and sorted(map(len, owned)) == [2, 2, 2]:
                    break
        finally:
            for c in consumers:
                await c.stop()
        return consumed, owned

    consumed, owned = asyncio.run(run())
    assert consumed == written and sorted(map(len, owned)) == [2, 2, 2]
