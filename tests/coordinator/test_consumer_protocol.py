"""KIP-848 consumer groups with real consumers: confluent-kafka's `group.protocol=consumer`.

The coordinator assigns; members split the partitions, never own one at the same time, and every
record is consumed once, through joins, leaves, kills, new partitions, restarts, and a group
changing protocol while empty.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer, ConsumerGroupType, KafkaError
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from logbroker.testing import BrokerProcess
from test_group_consumers import Poller, create_topic, names, produce

PARTITIONS = 6
TIMEOUT_S = 30
# Heartbeats every 300 ms; a silent member is fenced after 3 s.
OVERRIDES = {"group.initial.rebalance.delay.ms": "100", "group.min.session.timeout.ms": "1000",
             "group.consumer.heartbeat.interval.ms": "300", "group.consumer.session.timeout.ms": "3000"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    process = BrokerProcess(tmp_path_factory.mktemp("kip848-broker"), overrides=OVERRIDES)
    yield process.start()
    process.kill()


@pytest.fixture
def restartable(tmp_path):
    process = BrokerProcess(tmp_path / "broker", overrides=OVERRIDES)
    yield process
    process.kill()


def consumer(bootstrap: str, group: str, **extra) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False, **extra})


def drain(poller: Poller, consumers, expected: set, timeout_s: float = TIMEOUT_S) -> None:
    poller.poll_until(consumers, lambda owned: poller.consumed >= expected, timeout_s)


def owned_by_each(poller: Poller, consumers, counts: list[int], timeout_s: float = TIMEOUT_S) -> list[set[int]]:
    poller.poll_until(consumers, lambda owned: sorted(len(a) for a in owned) == sorted(counts), timeout_s)
    return poller.assignments(consumers)


def test_members_split_partitions_and_consume_each_record_once(broker):
    topic, group = names()
    create_topic(broker.bootstrap, topic)
    consumers = [consumer(broker.bootstrap, group) for _ in range(3)]
    poller = Poller(topic)
    try:
        for c in consumers:
            c.subscribe([topic])
        owned = owned_by_each(poller, consumers, [2, 2, 2])
        assert set().union(*owned) == set(range(PARTITIONS))
        # Written once split: until then the first member to join may own every partition, and
        # what it read of one (nothing is committed) the next owner reads again, as in Kafka.
        written = produce(broker.bootstrap, topic, 20)
        drain(poller, consumers, written)
        offsets = [o for by in poller.by_consumer.values() for o in by]
        assert len(offsets) == len(set(offsets)) == len(written), "a record was consumed twice"
    finally:
        for c in consumers:
            c.close()


def test_a_member_leaving_hands_its_partitions_to_the_others(broker):
    topic, group = names()
    create_topic(broker.bootstrap, topic)
    consumers = [consumer(broker.bootstrap, group) for _ in range(3)]
    poller = Poller(topic)
    for c in consumers:
        c.subscribe([topic])
    owned_by_each(poller, consumers, [2, 2, 2])
    consumers.pop().close()
    owned = owned_by_each(poller, consumers, [3, 3])
    assert set().union(*owned) == set(range(PARTITIONS))
    for c in consumers:
        c.close()


KILLED_MEMBER = """
import sys, time
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "group.protocol": "consumer",
              "auto.offset.reset": "earliest"})
c.subscribe([sys.argv[3]])
while True:
    c.poll(0.1)
    if c.assignment():
        print("assigned", flush=True)
"""


def test_a_killed_member_is_fenced_after_its_session_and_its_partitions_move(broker):
    topic, group = names()
    create_topic(broker.bootstrap, topic)
    child = subprocess.Popen([sys.executable, "-c", KILLED_MEMBER, broker.bootstrap, group, topic],
                             stdout=subprocess.PIPE, text=True)
    survivor = consumer(broker.bootstrap, group)
    poller = Poller(topic)
    try:
        assert child.stdout.readline().strip() == "assigned"
        survivor.subscribe([topic])
        owned_by_each(poller, [survivor], [3])
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        started = time.monotonic()
        owned_by_each(poller, [survivor], [6])
        assert time.monotonic() - started < 3 + 5  # the session timeout, plus a few heartbeats
    finally:
        child.kill()
        survivor.close()


def test_new_partitions_and_a_new_matching_topic_are_assigned(broker):
    topic, group = names()
    prefix = topic
    create_topic(broker.bootstrap, f"{prefix}-a", 2)
    c = consumer(broker.bootstrap, group, **{"topic.metadata.refresh.interval.ms": 500})
    try:
        c.subscribe([f"^{prefix}-.*"])
        deadline = time.monotonic() + TIMEOUT_S
        while len(c.assignment()) != 2:
            c.poll(0.1)
            assert time.monotonic() < deadline
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_partitions([NewPartitions(f"{prefix}-a", 3)])[f"{prefix}-a"].result(TIMEOUT_S)
        admin.create_topics([NewTopic(f"{prefix}-b", 2, 1)])[f"{prefix}-b"].result(TIMEOUT_S)
        while {(tp.topic, tp.partition) for tp in c.assignment()} != {
                (f"{prefix}-a", 0), (f"{prefix}-a", 1), (f"{prefix}-a", 2), (f"{prefix}-b", 0), (f"{prefix}-b", 1)}:
            c.poll(0.1)
            assert time.monotonic() < deadline, c.assignment()
    finally:
        c.close()


def test_static_member_rejoining_keeps_its_partitions(broker):
    topic, group = names()
    create_topic(broker.bootstrap, topic)
    members = [consumer(broker.bootstrap, group, **{"group.instance.id": f"i{n}"}) for n in range(2)]
    poller = Poller(topic)
    for c in members:
        c.subscribe([topic])
    before = owned_by_each(poller, members, [3, 3])
    members[1].close()  # a static member leaves with epoch -2: its partitions wait for it
    time.sleep(1)
    assert poller.assignments(members[:1]) == before[:1]
    members[1] = consumer(broker.bootstrap, group, **{"group.instance.id": "i1"})
    members[1].subscribe([topic])
    after = owned_by_each(poller, members, [3, 3])
    assert after == before
    for c in members:
        c.close()


def test_committed_offsets_and_the_group_survive_a_restart(restartable):
    broker = restartable.start()
    topic, group = names()
    create_topic(broker.bootstrap, topic)
    first = produce(broker.bootstrap, topic, 5)
    c = consumer(broker.bootstrap, group)
    poller = Poller(topic)
    c.subscribe([topic])
    drain(poller, [c], first)
    c.commit(asynchronous=False)
    c.close()
    broker = restartable.restart()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    listed = {g.group_id: g for g in admin.list_consumer_groups().result(TIMEOUT_S).valid}
    assert listed[group].type == ConsumerGroupType.CONSUMER
    second = produce(broker.bootstrap, topic, 5)
    c = consumer(broker.bootstrap, group)
    poller = Poller(topic)
    c.subscribe([topic])
    drain(poller, [c], second)
    assert poller.consumed == second, "records committed before the restart came again"
    c.close()


def test_an_empty_classic_group_is_taken_over_by_the_consumer_protocol_and_back(broker):
    topic, group = names()
    create_topic(broker.bootstrap, topic)
    for protocol in ("classic", "consumer", "classic"):
        batch = produce(broker.bootstrap, topic, 3)
        c = consumer(broker.bootstrap, group, **{"group.protocol": protocol})
        poller = Poller(topic)
        c.subscribe([topic])
        drain(poller, [c], batch)
        assert poller.consumed == batch, f"{protocol}: records committed by an earlier member came again"
        c.commit(asynchronous=False)
        c.close()


def test_a_consumer_group_with_members_refuses_a_classic_member(broker):
    topic, group = names()
    create_topic(broker.bootstrap, topic)
    modern = consumer(broker.bootstrap, group)
    modern.subscribe([topic])
    poller = Poller(topic)
    owned_by_each(poller, [modern], [6])
    classic = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "session.timeout.ms": 6000})
    classic.subscribe([topic])
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            msg = classic.poll(0.2)
            modern.poll(0)
            if msg is not None and msg.error() is not None:
                assert msg.error().code() == KafkaError.INCONSISTENT_GROUP_PROTOCOL
                break
            assert time.monotonic() < deadline
        assert len(modern.assignment()) == 6
    finally:
        classic.close()
        modern.close()


def test_admin_lists_and_describes_a_consumer_protocol_group(broker):
    topic, group = names()
    create_topic(broker.bootstrap, topic)
    c = consumer(broker.bootstrap, group, **{"client.id": "kip848-client"})
    c.subscribe([topic])
    owned_by_each(Poller(topic), [c], [6])
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    try:
        listed = admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result(TIMEOUT_S).valid
        assert group in {g.group_id for g in listed}
        classic_only = admin.list_consumer_groups(types={ConsumerGroupType.CLASSIC}).result(TIMEOUT_S).valid
        assert group not in {g.group_id for g in classic_only}
        described = admin.describe_consumer_groups([group])[group].result(TIMEOUT_S)
        assert described.type == ConsumerGroupType.CONSUMER
        assert str(described.state).endswith("STABLE")
        [member] = described.members
        assert member.client_id == "kip848-client"
        assert sorted(tp.partition for tp in member.assignment.topic_partitions) == list(range(PARTITIONS))
    finally:
        c.close()
