"""ZooKeeperMetadataStore against a real ZooKeeper: Kafka's znodes and JSON, and the fencing of
stale controllers, stale leaders and racing producer-id claims."""

from __future__ import annotations

import json
import threading
import uuid

import pytest

from logbroker.clock import ManualClock
from logbroker.errors import (
    DuplicateBrokerRegistrationError,
    NotControllerError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from logbroker.metadata.model import BrokerInfo, PartitionState, TopicInfo, topic_id_to_str
from logbroker.metadata.zookeeper_store import (
    ControllerMovedError,
    StaleStateError,
    ZooKeeperMetadataStore,
)
from logbroker.types import TopicPartition

WAIT_S = 10.0


@pytest.fixture
def open_store(zk_connect):
    """Factory: a started store for a broker id, closed at the end of the test."""
    stores = []

    def open_(broker_id: int, **kwargs) -> ZooKeeperMetadataStore:
        store = ZooKeeperMetadataStore(zk_connect, broker_id=broker_id, **kwargs).start()
        stores.append(store)
        return store
    yield open_
    for store in stores:
        store.close()


def read_json(zk_client, path: str):
    data, _ = zk_client.get(path)
    return json.loads(data)


def new_topic(name: str = "orders", assignment=None, configs=None) -> TopicInfo:
    return TopicInfo(name, uuid.uuid4(), assignment or {0: (1, 2), 1: (2, 1)}, configs or {})


class Latest:
    """Collects watch callbacks (made on kazoo's thread). `wait_for` waits for the next value, in
    callback order, that satisfies a predicate, so a quick succession of changes is never missed."""

    def __init__(self) -> None:
        self.values = []
        self.changed = threading.Condition()
        self._next = 0

    def __call__(self, value) -> None:
        with self.changed:
            self.values.append(value)
            self.changed.notify_all()

    def wait_for(self, predicate):
        def find():
            for i in range(self._next, len(self.values)):
                if predicate(self.values[i]):
                    return i
            return None
        with self.changed:
            assert self.changed.wait_for(lambda: find() is not None, WAIT_S), self.values
            i = find()
            self._next = i + 1
            return self.values[i]


# -- layout -----------------------------------------------------------------------------------
def test_start_creates_kafka_persistent_paths_and_cluster_id(open_store, zk_client):
    store = open_store(1)
    for path in ("/brokers/ids", "/brokers/topics", "/brokers/seqid", "/config/changes",
                 "/config/topics", "/config/users", "/admin/delete_topics",
                 "/latest_producer_id_block", "/isr_change_notification"):
        assert zk_client.exists(path) is not None, path
    cluster = read_json(zk_client, "/cluster/id")
    assert cluster == {"version": "1", "id": store.cluster_id}
    assert len(store.cluster_id) == 22
    assert open_store(2).cluster_id == store.cluster_id


# -- brokers ----------------------------------------------------------------------------------
def test_broker_registration_is_kafka_v5_json(open_store, zk_client):
    store = open_store(1, clock=ManualClock(1_700_000_000_123))
    store.register_broker(BrokerInfo(1, "127.0.0.1", 9092, rack="r1"))
    assert read_json(zk_client, "/brokers/ids/1") == {
        "version": 5, "host": "127.0.0.1", "port": 9092, "endpoints": ["PLAINTEXT://127.0.0.1:9092"],
        "jmx_port": -1, "timestamp": "1700000000123", "features": {},
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"}, "rack": "r1"}
    assert b" " not in zk_client.get("/brokers/ids/1")[0]  # compact, as Jackson writes it


def test_broker_registration_is_ephemeral(open_store):
    first, observer = open_store(1), open_store(2)
    first.register_broker(BrokerInfo(1, "127.0.0.1", 9092))
    observer.register_broker(BrokerInfo(2, "127.0.0.1", 9093))
    assert observer.brokers() == {1: BrokerInfo(1, "127.0.0.1", 9092, endpoints=(("PLAINTEXT", "127.0.0.1", 9092),)),
                                  2: BrokerInfo(2, "127.0.0.1", 9093, endpoints=(("PLAINTEXT", "127.0.0.1", 9093),))}
    first.close()
    assert list(observer.brokers()) == [2]


def test_broker_id_held_by_another_session_is_refused(open_store):
    open_store(1).register_broker(BrokerInfo(1, "127.0.0.1", 9092))
    with pytest.raises(DuplicateBrokerRegistrationError):
        open_store(1).register_broker(BrokerInfo(1, "127.0.0.1", 9095))


def test_reads_a_registration_written_by_kafka(open_store, zk_client):
    store = open_store(1)
    zk_client.create("/brokers/ids/7", json.dumps({
        "features": {}, "listener_security_protocol_map": {"CLIENT": "PLAINTEXT", "REPL": "SSL"},
        "endpoints": ["CLIENT://kafka-7:9092", "REPL://kafka-7:9093"], "jmx_port": 9999, "port": 9092,
        "host": "kafka-7", "version": 5, "timestamp": "1700000000000"}).encode(), ephemeral=True)
    assert store.brokers() == {7: BrokerInfo(7, "kafka-7", 9092, endpoints=(("CLIENT", "kafka-7", 9092),
                                                                            ("REPL", "kafka-7", 9093)))}
    assert store.brokers()[7].for_listener("REPL") == BrokerInfo(7, "kafka-7", 9093, endpoints=store.brokers()[7].endpoints)
    assert store.brokers()[7].for_listener("PLAINTEXT") is None


def test_watch_brokers_sees_joins_and_leaves(open_store):
    observer, joining = open_store(1), open_store(2)
    seen = Latest()
    observer.watch_brokers(seen)
    seen.wait_for(lambda ids: ids == [])
    joining.register_broker(BrokerInfo(2, "127.0.0.1", 9093))
    seen.wait_for(lambda ids: ids == [2])
    joining.close()
    seen.wait_for(lambda ids: ids == [])


# -- topics -----------------------------------------------------------------------------------
def test_topic_znodes_are_kafka_json(open_store, zk_client):
    store = open_store(1)
    info = new_topic(configs={"retention.ms": "1000"})
    store.create_topic(info)
    assert read_json(zk_client, "/brokers/topics/orders") == {
        "version": 3, "topic_id": topic_id_to_str(info.topic_id),
        "partitions": {"0": [1, 2], "1": [2, 1]}, "adding_replicas": {}, "removing_replicas": {}}
    assert read_json(zk_client, "/config/topics/orders") == {"version": 1, "config": {"retention.ms": "1000"}}
    other = open_store(2)
    assert other.topic("orders") == info
    assert other.topics() == {"orders": info}
    assert other.topic_by_id(info.topic_id) == info
    assert other.topic("missing") is None


def test_create_existing_topic_fails(open_store):
    store = open_store(1)
    store.create_topic(new_topic())
    with pytest.raises(TopicAlreadyExistsError):
        open_store(2).create_topic(new_topic())


def test_reads_a_topic_written_by_kafka_and_gives_an_id_to_one_without(open_store, zk_client):
    store = open_store(1)
    zk_client.create("/brokers/topics/kafka-made", json.dumps({
        "removing_replicas": {}, "partitions": {"1": [3, 1], "0": [1, 3]}, "topic_id": "vfL1mXw4TRi5v0uQ5x_hcw",
        "adding_replicas": {}, "version": 3}).encode())
    zk_client.create("/brokers/topics/old", json.dumps({"version": 1, "partitions": {"0": [1]}}).encode())
    made = store.topic("kafka-made")
    assert topic_id_to_str(made.topic_id) == "vfL1mXw4TRi5v0uQ5x_hcw"
    assert made.assignment == {0: (1, 3), 1: (3, 1)} and made.configs == {}
    old = store.topic("old")
    assert open_store(2).topic("old").topic_id == old.topic_id
    assert read_json(zk_client, "/brokers/topics/old")["topic_id"] == topic_id_to_str(old.topic_id)


def test_config_change_writes_a_notification(open_store, zk_client):
    store = open_store(1)
    store.create_topic(new_topic())
    store.set_topic_configs("orders", {"cleanup.policy": "compact"})
    assert read_json(zk_client, "/config/topics/orders") == {"version": 1, "config": {"cleanup.policy": "compact"}}
    assert zk_client.get_children("/config/changes") == ["config_change_0000000000"]
    assert read_json(zk_client, "/config/changes/config_change_0000000000") == {
        "version": 2, "entity_path": "topics/orders"}
    assert store.topic("orders").configs == {"cleanup.policy": "compact"}
    with pytest.raises(UnknownTopicOrPartitionError):
        store.set_topic_configs("missing", {})


def test_controller_deletes_a_topic_marked_for_deletion(open_store, zk_client):
    controller, admin = open_store(1), open_store(2)
    controller.elect_controller()
    info = new_topic()
    controller.create_topic(info)
    controller.set_partition_states({TopicPartition("orders", 0): PartitionState(1, 0, (1, 2))})
    admin.request_topic_deletion("orders")
    assert zk_client.exists("/admin/delete_topics/orders") is not None
    assert controller.topics_to_delete() == ["orders"]
    assert controller.delete_topic("orders") == info
    for path in ("/brokers/topics/orders", "/config/topics/orders", "/admin/delete_topics/orders"):
        assert zk_client.exists(path) is None, path
    assert admin.topics() == {}


def test_only_the_controller_sets_assignments_and_states(open_store):
    broker = open_store(1)
    broker.create_topic(new_topic())
    with pytest.raises(NotControllerError):
        broker.set_assignment("orders", {0: (1, 2)})
    with pytest.raises(NotControllerError):
        broker.set_partition_states({TopicPartition("orders", 0): PartitionState(1, 0, (1, 2))})


def test_controller_adds_partitions(open_store):
    controller = open_store(1)
    controller.elect_controller()
    info = new_topic()
    controller.create_topic(info)
    controller.set_assignment("orders", {**info.assignment, 2: (1, 2)})
    added = open_store(2).topic("orders")
    assert added.assignment == {0: (1, 2), 1: (2, 1), 2: (1, 2)}
    assert added.topic_id == info.topic_id


# -- partition states -------------------------------------------------------------------------
def test_partition_state_is_kafka_json_stamped_with_the_controller_epoch(open_store, zk_client):
    controller = open_store(1)
    epoch = controller.elect_controller()
    controller.create_topic(new_topic())
    tp = TopicPartition("orders", 0)
    versions = controller.set_partition_states({tp: PartitionState(2, 3, (2, 1))})
    assert versions == {tp: 0}
    assert read_json(zk_client, "/brokers/topics/orders/partitions/0/state") == {
        "version": 1, "leader": 2, "leader_epoch": 3, "controller_epoch": epoch, "isr": [2, 1]}
    reader = open_store(2)
    assert reader.partition_state(tp) == PartitionState(2, 3, (2, 1), epoch)
    assert reader.partition_state(TopicPartition("orders", 1)) is None
    assert controller.set_partition_states({tp: PartitionState(1, 4, (1,))}) == {tp: 1}
    assert reader.partition_state_with_version(tp).zk_version == 1


def test_leader_isr_update_is_conditional_on_the_state_version(open_store):
    controller, leader = open_store(1), open_store(2)
    controller.elect_controller()
    controller.create_topic(new_topic())
    tp = TopicPartition("orders", 0)
    controller.set_partition_states({tp: PartitionState(2, 0, (2, 1))})
    read = leader.partition_state_with_version(tp)
    shrunk = PartitionState(2, 0, (2,), read.state.controller_epoch)
    new_version = leader.update_isr(tp, shrunk, expected_version=read.zk_version)
    assert new_version == read.zk_version + 1
    with pytest.raises(StaleStateError):  # a second write from the same, now stale, read
        leader.update_isr(tp, PartitionState(2, 0, (2, 1)), expected_version=read.zk_version)
    assert leader.partition_state(tp) == shrunk


def test_controller_election_based_on_a_stale_state_fails(open_store):
    controller, leader = open_store(1), open_store(2)
    controller.elect_controller()
    controller.create_topic(new_topic())
    tp = TopicPartition("orders", 0)
    controller.set_partition_states({tp: PartitionState(2, 0, (2, 1))})
    read = controller.partition_state_with_version(tp)
    leader.update_isr(tp, PartitionState(2, 0, (2,)), expected_version=read.zk_version)
    with pytest.raises(StaleStateError):  # electing 1 from the old ISR would lose data
        controller.set_partition_states({tp: PartitionState(1, 1, (1,))},
                                        expected_versions={tp: read.zk_version})
    assert controller.partition_state(tp).isr == (2,)


def test_watch_partition_state_sees_leader_changes(open_store):
    controller, follower = open_store(1), open_store(2)
    controller.elect_controller()
    controller.create_topic(new_topic())
    tp = TopicPartition("orders", 0)
    seen = Latest()
    follower.watch_partition_state(tp, seen)
    seen.wait_for(lambda v: v is None)
    controller.set_partition_states({tp: PartitionState(1, 0, (1, 2))})
    assert seen.wait_for(lambda v: v is not None).state.leader == 1
    controller.set_partition_states({tp: PartitionState(2, 1, (2,))})
    assert seen.wait_for(lambda v: v.state.leader_epoch == 1).state.leader == 2


# -- controller -------------------------------------------------------------------------------
def test_first_controller_gets_epoch_one_and_kafka_json(open_store, zk_client):
    first, second = open_store(1, clock=ManualClock(1_700_000_000_000)), open_store(2)
    assert first.elect_controller() == 1
    assert second.elect_controller() is None
    assert zk_client.get("/controller_epoch")[0] == b"1"
    assert read_json(zk_client, "/controller") == {
        "version": 2, "brokerid": 1, "timestamp": "1700000000000", "kraftControllerEpoch": -1}
    assert second.controller_id() == 1
    assert first.is_controller and not second.is_controller


def test_deposed_controller_cannot_write(open_store, zk_client):
    old, new = open_store(1), open_store(2)
    assert old.elect_controller() == 1
    old.create_topic(new_topic())
    tp = TopicPartition("orders", 0)
    old.set_partition_states({tp: PartitionState(1, 0, (1, 2))})
    # The old controller is cut off (its /controller goes away) but has not noticed yet.
    zk_client.delete("/controller")
    assert new.elect_controller() == 2
    with pytest.raises(ControllerMovedError):
        old.set_partition_states({tp: PartitionState(1, 1, (1,))})
    assert not old.is_controller
    with pytest.raises(NotControllerError):
        old.set_assignment("orders", {0: (1,), 1: (1,)})
    assert new.partition_state(tp) == PartitionState(1, 0, (1, 2), 1)
    new.set_partition_states({tp: PartitionState(2, 1, (2,))})
    assert new.partition_state(tp).controller_epoch == 2


def test_controller_failover_on_session_close(open_store, zk_client):
    first, second = open_store(1), open_store(2)
    assert first.elect_controller() == 1
    elected = Latest()

    def on_controller(controller_id):
        if controller_id is None:
            elected(second.elect_controller())  # a real broker would hop to a thread first
    second.watch_controller(on_controller)
    first.close()
    assert elected.wait_for(lambda epoch: epoch is not None) == 2
    assert second.is_controller and second.controller_epoch == 2
    assert read_json(zk_client, "/controller")["brokerid"] == 2
    assert zk_client.get("/controller_epoch")[0] == b"2"


# -- producer ids -----------------------------------------------------------------------------
def test_producer_id_block_is_kafka_json(open_store, zk_client):
    store = open_store(3)
    assert store.claim_producer_id_block(1000) == 0
    assert store.claim_producer_id_block(1000) == 1000
    assert read_json(zk_client, "/latest_producer_id_block") == {
        "version": 1, "broker": 3, "block_start": "1000", "block_end": "1999"}


def test_racing_producer_id_claims_never_overlap(open_store):
    stores = [open_store(1), open_store(2), open_store(3)]
    claims: list[int] = []
    lock = threading.Lock()
    start = threading.Barrier(len(stores))

    def claim(store):
        start.wait()
        for _ in range(30):
            first = store.claim_producer_id_block(10)
            with lock:
                claims.append(first)
    threads = [threading.Thread(target=claim, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(claims) == list(range(0, 900, 10))


# -- sessions ---------------------------------------------------------------------------------
def expire_session(store: ZooKeeperMetadataStore, zk_connect: str) -> None:
    """Expire the store's session the way ZooKeeper's own tests do: open a second connection with
    the same session id and password, and close it."""
    from kazoo.client import KazooClient
    twin = KazooClient(hosts=zk_connect, client_id=store._client.client_id)
    twin.start(timeout=WAIT_S)
    twin.stop()
    twin.close()


def test_session_expiry_drops_controller_and_re_registers_the_broker(open_store, zk_connect):
    store, observer = open_store(1), open_store(2)
    store.register_broker(BrokerInfo(1, "127.0.0.1", 9092))
    store.elect_controller()
    old_session = store.session_id
    seen = Latest()
    observer.watch_brokers(seen)
    seen.wait_for(lambda ids: ids == [1])
    expire_session(store, zk_connect)
    seen.wait_for(lambda ids: ids == [])
    seen.wait_for(lambda ids: ids == [1])
    assert store.session_id != old_session
    assert not store.is_controller
    assert observer.controller_id() is None


def test_state_write_for_a_deleted_topic_does_not_resurrect_it(open_store, zk_client):
    controller = open_store(1)
    controller.elect_controller()
    with pytest.raises(UnknownTopicOrPartitionError):
        controller.set_partition_states({TopicPartition("gone", 0): PartitionState(1, 0, (1,))})
    assert zk_client.exists("/brokers/topics/gone") is None
    assert controller.is_controller
