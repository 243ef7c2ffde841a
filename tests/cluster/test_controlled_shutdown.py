"""Controlled shutdown: a partition leader stopped with SIGTERM first has the controller move its
leadership away, so an acks=all producer sees no error and no acknowledged record is lost."""

from __future__ import annotations

import contextlib
import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from cluster_helpers import fully_led, start_cluster, topic_metadata, wait_for
from raw_requests import send
from logbroker.metadata.controller import controlled_shutdown_state
from logbroker.metadata.model import PartitionState
from logbroker.protocol.controlled_shutdown import ControlledShutdownRequestV1, ControlledShutdownRequestV2


@contextlib.contextmanager
def running_cluster(tmp_path, zk_connect, **overrides):
    brokers = start_cluster(tmp_path, zk_connect, **overrides)
    try:
        yield brokers
    finally:
        for broker in brokers:
            broker.kill()


class SteadyProducer(threading.Thread):
    """acks=all writes of "0", "1", … to partition 0 until stopped; keeps what was acked and every
    delivery error."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2,
                                  "enable.idempotence": False})
        self.topic = topic
        self.acked: list[bytes] = []
        self.errors: list = []
        self.stopping = threading.Event()

    def _delivered(self, err, msg) -> None:
        if err is None:
            self.acked.append(msg.value())
        else:
            self.errors.append(err)

    def run(self) -> None:
        i = 0
        while not self.stopping.is_set():
            self.producer.produce(self.topic, str(i).encode(), partition=0, on_delivery=self._delivered)
            self.producer.poll(0.002)
            i += 1
        self.producer.flush(60)


def read_all(bootstrap: str, topic: str, expected: set[bytes]) -> set[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{time.time()}",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen: set[bytes] = set()
    deadline = time.monotonic() + 60
    while not expected <= seen and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            seen.add(msg.value())
    consumer.close()
    return seen


def test_sigterm_of_the_leader_moves_leadership_first_and_loses_nothing(tmp_path, zk_connect):
    with running_cluster(tmp_path, zk_connect, **{"replica.lag.time.max.ms": "10000"}) as cluster:
        check_leader_sigterm(cluster)


def check_leader_sigterm(cluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster[0].bootstrap})
    admin.create_topics([NewTopic("steady", num_partitions=1, replication_factor=3,
                                  config={"min.insync.replicas": "2"})])["steady"].result(30)
    md = wait_for(lambda: fully_led(cluster[0].bootstrap, "steady", 1, 3))
    old_leader = md.topics["steady"].partitions[0].leader
    leaving = cluster[old_leader - 1]
    staying = [b for b in cluster if b is not leaving]

    producer = SteadyProducer(",".join(b.bootstrap for b in cluster), "steady")
    producer.start()
    wait_for(lambda: len(producer.acked) >= 300, timeout_s=60)
    assert leaving.stop() == 0
    acked_at_stop = len(producer.acked)
    wait_for(lambda: len(producer.acked) >= acked_at_stop + 300, timeout_s=60)
    producer.stopping.set()
    producer.join(90)

    assert producer.errors == []
    log = leaving.new_log_text()
    moved = log.index("Controlled shutdown request returned successfully")
    assert moved < log.index(f"Broker {old_leader} shut down cleanly")
    assert "Proceeding to do an unclean shutdown" not in log
    state = lambda: topic_metadata(staying[0].bootstrap, "steady").topics["steady"].partitions[0]  # noqa: E731
    wait_for(lambda: state().leader not in (-1, old_leader) and old_leader not in state().isrs)

    acked = set(producer.acked)
    assert read_all(staying[0].bootstrap, "steady", acked) >= acked


def test_sigterm_without_controlled_shutdown_leaves_it_to_the_controller(tmp_path, zk_connect):
    with running_cluster(tmp_path, zk_connect, **{"controlled.shutdown.enable": "false"}) as brokers:
        admin = AdminClient({"bootstrap.servers": brokers[0].bootstrap})
        admin.create_topics([NewTopic("plain", num_partitions=1, replication_factor=3)])["plain"].result(30)
        md = wait_for(lambda: fully_led(brokers[0].bootstrap, "plain", 1, 3))
        old_leader = md.topics["plain"].partitions[0].leader
        leaving = brokers[old_leader - 1]
        assert leaving.stop() == 0
        assert "controlled shutdown" not in leaving.new_log_text().lower()
        other = next(b for b in brokers if b is not leaving)
        wait_for(lambda: topic_metadata(other.bootstrap, "plain").topics["plain"].partitions[0].leader
                 not in (-1, old_leader))


def test_brokers_stopped_one_by_one_each_move_leadership_and_the_last_does_not_wait(tmp_path, zk_connect):
    with running_cluster(tmp_path, zk_connect) as brokers:
        admin = AdminClient({"bootstrap.servers": brokers[0].bootstrap})
        admin.create_topics([NewTopic("rolling", num_partitions=3, replication_factor=3)])["rolling"].result(30)
        md = wait_for(lambda: fully_led(brokers[0].bootstrap, "rolling", 3, 3))
        controller = brokers[md.controller_id - 1]
        other = next(b for b in brokers if b is not controller)
        assert controlled_shutdown(controller, ControlledShutdownRequestV1(broker_id=99)) == (8, [])  # BROKER_NOT_AVAILABLE
        assert controlled_shutdown(other, ControlledShutdownRequestV2(broker_id=brokers.index(other) + 1,
                                                                    broker_epoch=-1)) == (41, [])  # NOT_CONTROLLER
        for broker in reversed(brokers):
            assert broker.stop() == 0
            log = broker.new_log_text()
            assert "Controlled shutdown request returned successfully" in log
            assert "Remaining partitions to move" not in log and "controlled shutdown attempt" not in log


def controlled_shutdown(broker, body) -> tuple[int, list]:
    response = send(broker, body)
    return response.error_code, list(response.remaining_partitions)


# -- the controller's decision, per partition (metadata.controller.controlled_shutdown_state) ----
def test_led_partition_goes_to_the_first_live_in_sync_replica_of_the_assignment():
    state = PartitionState(leader=1, leader_epoch=4, isr=(1, 2, 3))
    assert controlled_shutdown_state(state, (1, 3, 2), leaving=1, live={1, 2, 3}) == \
        PartitionState(3, 5, (2, 3))
    assert controlled_shutdown_state(state, (1, 3, 2), leaving=1, live={1, 2}) == PartitionState(2, 5, (2, 3))


def test_led_partition_with_no_other_live_in_sync_replica_stays():
    state = PartitionState(leader=1, leader_epoch=4, isr=(1, 3))
    assert controlled_shutdown_state(state, (1, 2, 3), leaving=1, live={1, 2}) is None


def test_followed_partition_drops_the_leaving_broker_from_its_isr_but_never_empties_it():
    assert controlled_shutdown_state(PartitionState(2, 7, (2, 1)), (2, 1), leaving=1, live={1, 2}) == \
        PartitionState(2, 8, (2,))
    assert controlled_shutdown_state(PartitionState(2, 7, (2,)), (2, 1), leaving=1, live={1, 2}) is None
    assert controlled_shutdown_state(PartitionState(-1, 7, (1,)), (2, 1), leaving=1, live={1, 2}) is None


def test_sigterm_while_zookeeper_is_gone_still_stops_the_broker(tmp_path):
    """Each controlled shutdown attempt is bounded (request.timeout.ms): with ZooKeeper gone, the
    attempts fail, the broker says it shuts down uncleanly, and it exits."""
    from logbroker.zookeeper_process import ZooKeeperProcess

    zookeeper = ZooKeeperProcess(tmp_path / "zookeeper").start()
    try:
        [broker] = start_cluster(tmp_path, f"{zookeeper.connect_string}/gone", count=1,
                                 **{"request.timeout.ms": "3000",
                                    "controlled.shutdown.retry.backoff.ms": "200"})
    finally:
        zookeeper.stop()
    try:
        assert broker.stop(timeout_s=60) == 0
        assert "Proceeding to do an unclean shutdown" in broker.new_log_text()
    finally:
        broker.kill()
