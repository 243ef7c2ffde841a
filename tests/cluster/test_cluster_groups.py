"""Consumer groups, committed offsets and producer ids across a three-broker ZooKeeper cluster.

`__consumer_offsets` has three partitions with three replicas each; the coordinator of a group is
the leader of its partition and moves with it when that broker dies.
"""

from __future__ import annotations

import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient, KafkaConsumer

from cluster_helpers import CLUSTER_OVERRIDES, fully_led, start_cluster, wait_for
from logbroker.protocol.apis import ApiKey
from logbroker.records.record_batch import iter_batches
from logbroker.testing import BrokerProcess

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "coordinator"))
from raw import Raw  # noqa: E402  (tests/coordinator/raw.py: kio-encoded requests on a socket)

GROUP_CLUSTER = {"offsets.topic.replication.factor": "3", "offsets.topic.num.partitions": "3",
                 "replica.lag.time.max.ms": "5000"}
NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE = 16, 15


@pytest.fixture
def cluster(tmp_path, zk_connect):
    brokers = start_cluster(tmp_path, zk_connect, **GROUP_CLUSTER)
    yield brokers
    for broker in brokers:
        broker.kill()


@pytest.fixture(scope="module")
def steady_cluster(tmp_path_factory, zookeeper):
    """One cluster for the tests that kill no broker (each uses its own groups and topics)."""
    brokers = start_cluster(tmp_path_factory.mktemp("steady"), f"{zookeeper.connect_string}/t-{uuid.uuid4().hex[:12]}",
                            **GROUP_CLUSTER)
    yield brokers
    for broker in brokers:
        broker.kill()


def alive(cluster) -> list:
    return [b for b in cluster if b.process.poll() is None]


def bootstrap(cluster) -> str:
    return ",".join(b.bootstrap for b in alive(cluster))


def create_topic(cluster, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap(cluster)})
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=3,
                                  config={"min.insync.replicas": "2"})])[name].result(20)
    wait_for(lambda: fully_led(cluster[0].bootstrap, name, partitions, 3), timeout_s=30)


def produce(cluster, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap(cluster), "acks": "all", "linger.ms": 5})
    for value in values:
        producer.produce(topic, value, key=value)
        producer.poll(0)
    assert producer.flush(90) == 0


def find_coordinator(cluster, group: str) -> int | None:
    """The coordinator's broker id as a live broker answers FindCoordinator, or None."""
    with Raw(alive(cluster)[0].bootstrap) as raw:
        answer = raw.request(ApiKey.FIND_COORDINATOR, 1, key=group, key_type=0)
    return answer.node_id if answer.error_code == 0 else None


def broker_by_id(cluster, broker_id: int):
    return cluster[broker_id - 1]  # start_cluster numbers brokers 1..n


def end_offsets(cluster, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": "watermarks"})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=20)[1] for p in range(partitions)}
    finally:
        consumer.close()


class GroupMember(threading.Thread):
    """A confluent-kafka group consumer committing synchronously about every 0.3 s. Records each
    delivery and each acknowledged commit with a global sequence number, so the test can tell
    which re-deliveries at-least-once allows (those at or after the last acknowledged commit)."""

    sequence = iter(range(10**9))
    lock = threading.Lock()

    def __init__(self, cluster, group: str, topic: str, deliveries: list, commits: list, *,
                 protocol: str = "classic") -> None:
        super().__init__(daemon=True)
        # A consumer-protocol member takes its session and heartbeat interval from the broker.
        timing = {"session.timeout.ms": 10000, "heartbeat.interval.ms": 500} if protocol == "classic" else {}
        self.consumer = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": group,
                                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                  "group.protocol": protocol, **timing})
        self.topic, self.deliveries, self.commits = topic, deliveries, commits
        self.stopping = threading.Event()

    def run(self) -> None:
        self.consumer.subscribe([self.topic])
        last_commit = time.monotonic()
        dirty = False
        while not self.stopping.is_set():
            msg = self.consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                with self.lock:
                    self.deliveries.append((next(self.sequence), msg.partition(), msg.offset(), msg.value()))
                dirty = True
            if dirty and time.monotonic() - last_commit > 0.3:
                try:
                    committed = self.consumer.commit(asynchronous=False)
                except KafkaException:
                    continue  # coordinator moving or group rebalancing: the next round retries
                with self.lock:
                    for tp in committed or []:
                        if tp.error is None and tp.offset >= 0:
                            self.commits.append((next(self.sequence), tp.partition, tp.offset))
                last_commit, dirty = time.monotonic(), False
        self.consumer.close()


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_confluent_group_continues_after_its_coordinator_is_killed(cluster, protocol):
    topic, group, partitions = "events", f"g-{uuid.uuid4().hex[:8]}", 6
    create_topic(cluster, topic, partitions)
    first = [f"a-{i}".encode() for i in range(1500)]
    second = [f"b-{i}".encode() for i in range(1500)]
    produce(cluster, topic, first)

    deliveries: list = []
    commits: list = []
    members = [GroupMember(cluster, group, topic, deliveries, commits, protocol=protocol) for _ in range(3)]
    for member in members:
        member.start()
    try:
        wait_for(lambda: {v for *_, v in deliveries} >= set(first) and commits, timeout_s=60)
        admin = AdminClient({"bootstrap.servers": bootstrap(cluster)})
        old = admin.describe_consumer_groups([group])[group].result(20).coordinator.id
        broker_by_id(cluster, old).kill()

        produce(cluster, topic, second)
        everything = set(first) | set(second)
        wait_for(lambda: {v for *_, v in deliveries} >= everything, timeout_s=90)
        ends = end_offsets(cluster, topic, partitions)

        def committed_to_end():
            latest = {}
            for _, p, offset in list(commits):
                latest[p] = max(latest.get(p, 0), offset)
            return latest == ends
        wait_for(committed_to_end, timeout_s=60)

        # DescribeGroups and ListGroups answered by the new coordinator.
        admin = AdminClient({"bootstrap.servers": bootstrap(cluster)})
        description = wait_for(lambda: _stable_description(admin, group, 3), timeout_s=60)
        assert description.coordinator.id != old
        listed = admin.list_consumer_groups().result(20)
        assert group in {g.group_id for g in listed.valid}
    finally:
        for member in members:
            member.stopping.set()
        for member in members:
            member.join(30)

    # Offsets survived the move: another broker reads them from the new coordinator.
    admin = AdminClient({"bootstrap.servers": alive(cluster)[-1].bootstrap})
    result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(20)
    assert {tp.partition: tp.offset for tp in result.topic_partitions if tp.topic == topic} == ends

    # No loss, and each re-delivery at or after the partition's last acknowledged commit.
    assert {v for *_, v in deliveries} == set(first) | set(second)
    seen: set = set()
    for seq, p, offset, _ in sorted(deliveries):
        if (p, offset) in seen:
            acknowledged = max((o for s, cp, o in commits if cp == p and s < seq), default=0)
            assert offset >= acknowledged, f"partition {p} offset {offset} re-delivered below commit {acknowledged}"
        seen.add((p, offset))


def _stable_description(admin: AdminClient, group: str, members: int):
    try:
        description = admin.describe_consumer_groups([group])[group].result(20)
    except KafkaException:
        return None
    if description.state.name != "STABLE" or len(description.members) != members:
        return None
    return description


def test_kafka_python_consumer_follows_its_coordinator_and_keeps_its_offsets(cluster):
    topic, group, partitions = "clicks", f"kp-{uuid.uuid4().hex[:8]}", 3
    create_topic(cluster, topic, partitions)
    produce(cluster, topic, [f"a-{i}".encode() for i in range(300)])
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap(cluster).split(","), group_id=group,
                             enable_auto_commit=False, auto_offset_reset="earliest",
                             session_timeout_ms=10000, heartbeat_interval_ms=500)
    try:
        values = []
        wait_for(lambda: values.extend(r.value for batch in consumer.poll(500).values() for r in batch)
                 or len(values) >= 300, timeout_s=60)
        consumer.commit()
        old = wait_for(lambda: find_coordinator(cluster, group))
        broker_by_id(cluster, old).kill()
        produce(cluster, topic, [f"b-{i}".encode() for i in range(300)])
        wait_for(lambda: values.extend(r.value for batch in consumer.poll(500).values() for r in batch)
                 or len(values) >= 600, timeout_s=90)
        wait_for(lambda: _commit(consumer), timeout_s=60)
        assert sorted(values) == sorted([f"a-{i}".encode() for i in range(300)] + [f"b-{i}".encode() for i in range(300)])
        new = wait_for(lambda: find_coordinator(cluster, group) not in (None, old) and find_coordinator(cluster, group))
        survivor = broker_by_id(cluster, new).bootstrap
        admin = KafkaAdminClient(bootstrap_servers=survivor)
        try:
            committed = admin.list_group_offsets({group: None})[group]
            assert {tp.partition: meta.offset for tp, meta in committed.items()} == end_offsets(cluster, topic, partitions)
            description = admin.describe_groups([group], group_coordinator_id=new)[group]
            assert description["group_state"] == "Stable" and len(description["members"]) == 1
            listed = admin.list_groups(broker_ids=[new])
            assert group in {g["group_id"] for g in listed}
        finally:
            admin.close()
    finally:
        consumer.close()


def _commit(consumer) -> bool:
    try:
        consumer.commit()
        return True
    except Exception:  # noqa: BLE001 - kafka-python raises CommitFailedError or a retriable error
        return False


def test_brokers_that_do_not_coordinate_a_group_answer_not_coordinator(steady_cluster):
    cluster = steady_cluster
    group = f"raw-{uuid.uuid4().hex[:8]}"
    coordinator = wait_for(lambda: find_coordinator(cluster, group), timeout_s=30)
    with Raw(broker_by_id(cluster, coordinator).bootstrap) as raw:  # until it has applied its leadership
        wait_for(lambda: heartbeat(raw, group) != NOT_COORDINATOR, timeout_s=30)
    for broker in cluster:
        with Raw(broker.bootstrap) as raw:
            unknown_member = heartbeat(raw, group)
            fetched = raw.request(ApiKey.OFFSET_FETCH, 3, group_id=group, topics=None)
            described = raw.request(ApiKey.DESCRIBE_GROUPS, 1, groups=[group])
        if broker is broker_by_id(cluster, coordinator):
            assert (unknown_member, fetched.error_code, described.groups[0].error_code) == (25, 0, 0)
            assert described.groups[0].group_state == "Dead"
        else:
            assert unknown_member == NOT_COORDINATOR
            assert fetched.error_code == NOT_COORDINATOR
            assert described.groups[0].error_code == NOT_COORDINATOR


def heartbeat(raw: Raw, group: str, member: str = "m", generation: int = 1) -> int:
    return raw.request(ApiKey.HEARTBEAT, 4, group_id=group, generation_id=generation, member_id=member,
                       group_instance_id=None).error_code


def test_idempotent_producers_on_different_brokers_get_distinct_producer_ids(steady_cluster):
    cluster = steady_cluster
    create_topic(cluster, "ids", 1)
    raw_ids = []
    for broker in cluster:
        with Raw(broker.bootstrap) as raw:
            for _ in range(3):
                answer = raw.request(ApiKey.INIT_PRODUCER_ID, 1, transactional_id=None, transaction_timeout=60000)
                assert answer.error_code == 0
                raw_ids.append(answer.producer_id)
    assert len(set(raw_ids)) == 9
    for broker in cluster:
        producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
        producer.produce("ids", b"x", partition=0)
        assert producer.flush(60) == 0
    batch_ids = wait_for(lambda: _producer_ids_in(cluster[0], "ids") if len(_producer_ids_in(cluster[0], "ids")) == 3 else None,
                         timeout_s=30)
    assert len(batch_ids) == 3 and not batch_ids & set(raw_ids)


def _producer_ids_in(broker, topic: str) -> set[int]:
    segment = (broker.data_dir / f"{topic}-0" / "00000000000000000000.log").read_bytes()
    return {header.producer_id for _, header in iter_batches(segment)}


def test_offsets_topic_waits_for_enough_brokers_then_gets_three_replicas(tmp_path, zk_connect):
    brokers = start_cluster(tmp_path, zk_connect, count=2, **GROUP_CLUSTER)
    try:
        with Raw(brokers[0].bootstrap) as raw:
            answer = raw.request(ApiKey.FIND_COORDINATOR, 1, key="early", key_type=0)
        assert answer.error_code == COORDINATOR_NOT_AVAILABLE
        assert "__consumer_offsets" not in topic_layouts(brokers)
        overrides = {**CLUSTER_OVERRIDES, **GROUP_CLUSTER, "broker.id": "3", "zookeeper.connect": zk_connect}
        brokers.append(BrokerProcess(tmp_path / "broker-3", overrides=overrides).start())
        wait_for(lambda: find_coordinator(brokers, "early"), timeout_s=30)
        layout = wait_for(lambda: topic_layouts(brokers).get("__consumer_offsets"), timeout_s=30)
        assert sorted(layout) == [0, 1, 2] and all(sorted(r) == [1, 2, 3] for r in layout.values())
    finally:
        for broker in brokers:
            broker.kill()


def topic_layouts(cluster) -> dict[str, dict[int, list[int]]]:
    """Every topic's replicas by partition; a Metadata request for all topics creates none."""
    md = AdminClient({"bootstrap.servers": bootstrap(cluster)}).list_topics(timeout=20)
    return {name: {p: list(meta.replicas) for p, meta in t.partitions.items()} for name, t in md.topics.items()}


def test_group_returns_to_its_restarted_coordinator_with_offsets_committed_meanwhile(tmp_path, zk_connect):
    """A → B (A killed) → A (restarted, preferred leader again): the member and generation
    survive both moves, a JoinGroup parked at B is answered NOT_COORDINATOR when B resigns, and
    the offset committed at B is what A answers."""
    cluster = start_cluster(tmp_path, zk_connect, **GROUP_CLUSTER, **{"leader.imbalance.check.interval.seconds": "1"})
    try:
        create_topic(cluster, "t", 1)
        group = f"back-{uuid.uuid4().hex[:8]}"
        first = wait_for(lambda: find_coordinator(cluster, group), timeout_s=30)
        with Raw(broker_by_id(cluster, first).bootstrap) as raw:
            wait_for(lambda: heartbeat(raw, group) != NOT_COORDINATOR, timeout_s=30)  # leadership applied
            member, generation = join_and_sync(raw, group)
            assert commit(raw, group, member, generation, 5) == 0
        broker_by_id(cluster, first).kill()
        second = wait_for(lambda: find_coordinator(cluster, group) not in (None, first) and find_coordinator(cluster, group),
                          timeout_s=60)
        with Raw(broker_by_id(cluster, second).bootstrap) as raw, \
                Raw(broker_by_id(cluster, second).bootstrap, timeout_s=90) as parked:
            wait_for(lambda: commit(raw, group, member, generation, 10) == 0, timeout_s=30)
            parked.send(ApiKey.JOIN_GROUP, 3, group_id=group, session_timeout=30000, rebalance_timeout=90000,
                        member_id="", protocol_type="consumer", protocols=[{"name": "range", "metadata": b""}])
            broker_by_id(cluster, first).start()
            wait_for(lambda: find_coordinator(cluster, group) == first, timeout_s=60)
            assert parked.receive(ApiKey.JOIN_GROUP, 3).error_code == NOT_COORDINATOR
        with Raw(broker_by_id(cluster, first).bootstrap) as raw:
            fetched = wait_for(lambda: _loaded(raw.request(ApiKey.OFFSET_FETCH, 3, group_id=group, topics=None)), timeout_s=30)
            assert [(t.name, p.partition_index, p.committed_offset) for t in fetched.topics for p in t.partitions] == [("t", 0, 10)]
            assert heartbeat(raw, group, member, generation) == 0
    finally:
        for broker in cluster:
            broker.kill()


def _loaded(answer):
    return answer if answer.error_code == 0 else None  # 14 while the new coordinator loads


def join_and_sync(raw: Raw, group: str) -> tuple[str, int]:
    joined = raw.request(ApiKey.JOIN_GROUP, 3, group_id=group, session_timeout=30000, rebalance_timeout=30000,
                         member_id="", protocol_type="consumer", protocols=[{"name": "range", "metadata": b""}])
    assert joined.error_code == 0
    synced = raw.request(ApiKey.SYNC_GROUP, 3, group_id=group, generation_id=joined.generation_id,
                         member_id=joined.member_id, group_instance_id=None,
                         assignments=[{"member_id": joined.member_id, "assignment": b"t0"}])
    assert synced.error_code == 0
    return joined.member_id, joined.generation_id


def commit(raw: Raw, group: str, member: str, generation: int, offset: int) -> int:
    answer = raw.request(ApiKey.OFFSET_COMMIT, 2, group_id=group, generation_id_or_member_epoch=generation,
                         member_id=member, retention_time=-1, topics=[{"name": "t", "partitions": [
                             {"partition_index": 0, "committed_offset": offset, "committed_metadata": None}]}])
    return answer.topics[0].partitions[0].error_code
