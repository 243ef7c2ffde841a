"""The coordinator following the leadership of __consumer_offsets: CoordinatedPartitions' epoch fencing,
and GroupLoader with a real coordinator, ReplicaManager and log in-process."""

from __future__ import annotations

import asyncio
import logging

import pytest

from logbroker.clock import SystemClock
from logbroker.coordinator.group_coordinator import CONSUMER_GROUP_RECORDS, SHARE_GROUP_RECORDS, GroupCoordinator
from logbroker.coordinator.group_loader import CoordinatedPartitions, placed_here
from logbroker.coordinator.offsets_schema import (
    OFFSETS_TOPIC,
    OffsetAndMetadata,
    encode_offset_commit_key,
    partition_for,
)
from logbroker.errors import CoordinatorLoadInProgressError, NotCoordinatorError
from logbroker.metadata.local_store import LocalMetadataStore
from logbroker.metadata.model import PartitionState, TopicInfo, new_topic_id
from logbroker.replication.replica_manager import ReplicaManager
from logbroker.server.config import KafkaConfig
from logbroker.storage.log_manager import LogManager
from logbroker.types import TopicPartition


def test_election_loads_then_owns():
    partitions = CoordinatedPartitions()
    assert partitions.elect(0, epoch=3)
    assert partitions.loading == {0: 3} and not partitions.owned
    assert partitions.finish(0, epoch=3)
    assert partitions.owned == {0} and not partitions.loading


def test_reelection_of_an_owned_partition_keeps_its_groups():
    partitions = CoordinatedPartitions()
    partitions.elect(0, epoch=3)
    partitions.finish(0, epoch=3)
    assert not partitions.elect(0, epoch=4)  # no reload: parked requests and timers stay
    assert partitions.owned == {0} and partitions.epochs[0] == 4


def test_load_finishing_after_leadership_moved_away_is_discarded():
    partitions = CoordinatedPartitions()
    partitions.elect(0, epoch=3)
    assert partitions.resign(0, epoch=4)
    assert not partitions.finish(0, epoch=3)
    assert not partitions.owned and not partitions.loading


def test_load_from_an_earlier_term_is_discarded_when_leadership_came_back():
    partitions = CoordinatedPartitions()
    partitions.elect(0, epoch=3)
    partitions.resign(0, epoch=4)
    assert partitions.elect(0, epoch=5)  # another broker led at epoch 4: read the log again
    assert not partitions.finish(0, epoch=3)
    assert partitions.finish(0, epoch=5)
    assert partitions.owned == {0}


def test_stale_epochs_are_ignored():
    partitions = CoordinatedPartitions()
    partitions.elect(0, epoch=5)
    partitions.finish(0, epoch=5)
    assert not partitions.resign(0, epoch=4)
    assert not partitions.elect(0, epoch=4)
    assert partitions.owned == {0}


@pytest.mark.parametrize("lazy", [CONSUMER_GROUP_RECORDS, SHARE_GROUP_RECORDS], ids=["consumer", "share"])
def test_a_lazily_imported_group_type_takes_the_key_versions_the_loader_dispatches_on(lazy):
    assert lazy.records_class().KEY_VERSIONS == lazy.KEY_VERSIONS


def test_stopped_replica_resigns_whatever_its_epoch():
    partitions = CoordinatedPartitions()
    partitions.elect(1, epoch=2)
    assert partitions.resign(1, epoch=None)
    assert not partitions.resign(1, epoch=None)  # nothing left to drop


# -- the coordinator following leadership, in-process on a real log ----------------------------------
OFFSETS_TP = TopicPartition(OFFSETS_TOPIC, 0)


class Node:
    """A coordinator with its ReplicaManager and log, on one broker (id 0) of a pretend cluster:
    the test moves the leadership of __consumer_offsets-0 as zk_cluster would."""

    def __init__(self, tmp_path) -> None:
        clock = SystemClock()
        self.config = KafkaConfig.from_props({"log.dirs": str(tmp_path), "offsets.topic.num.partitions": "1"},
                                             log_warnings=False)
        store = LocalMetadataStore(tmp_path)
        self.info = TopicInfo(OFFSETS_TOPIC, new_topic_id(), {0: (0, 1)}, {})
        store.create_topic(self.info)
        self.logs = LogManager([tmp_path], default_config=self.config.default_log_config(), clock=clock)
        self.logs.startup({})
        self.replicas = ReplicaManager(broker_id=0, log_manager=self.logs, clock=clock)
        self.coordinator = GroupCoordinator(broker_id=0, config=self.config, replica_manager=self.replicas,
                                            store=store, create_topic=None, clock=clock)
        self.coordinator.load()

    def lead(self, epoch: int) -> None:
        self.replicas.become_leader(OFFSETS_TP, PartitionState(0, epoch, (0,)), (0, 1),
                                    config=self.config.default_log_config(), topic_id=self.info.topic_id)

    def follow(self, epoch: int) -> None:
        self.replicas.become_follower(OFFSETS_TP, PartitionState(1, epoch, (0, 1)), (0, 1),
                                      config=self.config.default_log_config(), topic_id=self.info.topic_id)

    async def commit(self, group: str, offset: int) -> None:
        await self.coordinator.commit_offsets(group_id=group, member_id="", group_instance_id=None, generation_id=-1,
                                              offsets={TopicPartition("t", 0): OffsetAndMetadata(offset)})

    def committed(self, group: str) -> int:
        return self.coordinator.fetch_offsets(group, None)[TopicPartition("t", 0)].offset


async def until(condition) -> None:
    deadline = asyncio.get_running_loop().time() + 30
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not met within 30 s"
        await asyncio.sleep(0.01)


def test_new_leader_answers_load_in_progress_until_its_log_is_replayed(tmp_path):
    async def scenario():
        node = Node(tmp_path)
        node.lead(epoch=0)  # an empty log: owned at once
        for offset in range(50):
            await node.commit(f"g{offset % 5}", offset)
        node.follow(epoch=1)
        with pytest.raises(NotCoordinatorError):
            node.coordinator.check_group("g0")
        assert node.coordinator.groups == {}
        node.lead(epoch=2)
        with pytest.raises(CoordinatorLoadInProgressError):
            node.coordinator.check_group("g0")
        await until(lambda: not node.coordinator.is_loading)
        assert [node.committed(f"g{i}") for i in range(5)] == [45, 46, 47, 48, 49]
        node.logs.shutdown()
    asyncio.run(scenario())


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_load_finishing_after_leadership_moved_away_installs_nothing(tmp_path):
    loader_log = logging.getLogger("kafka.coordinator.group.GroupMetadataManager")
    lines = Lines()

    async def scenario():
        node = Node(tmp_path)
        node.lead(epoch=0)
        await node.commit("g", 7)
        node.follow(epoch=1)
        node.lead(epoch=2)  # starts a load in a worker thread…
        node.follow(epoch=3)  # …that ends after this broker is a follower again
        await until(lambda: any("Discarded the groups loaded" in line for line in lines.lines))
        assert node.coordinator.groups == {} and not node.coordinator.is_loading
        with pytest.raises(NotCoordinatorError):
            node.coordinator.check_group("g")
        node.logs.shutdown()
    level = loader_log.level
    loader_log.addHandler(lines)
    loader_log.setLevel(logging.INFO)
    try:
        asyncio.run(scenario())
    finally:
        loader_log.removeHandler(lines)
        loader_log.setLevel(level)


def test_reelection_at_a_newer_epoch_keeps_parked_joins(tmp_path):
    async def scenario():
        node = Node(tmp_path)
        node.lead(epoch=0)
        join = asyncio.ensure_future(node.coordinator.join_group(
            group_id="g", member_id="", group_instance_id=None, require_known_member_id=False, client_id="c",
            client_host="/127.0.0.1", rebalance_timeout_ms=60000, session_timeout_ms=10000,
            protocol_type="consumer", protocols=[("range", b"")], supports_skip_assignment=False))
        await until(lambda: "g" in node.coordinator.groups)
        node.lead(epoch=1)  # the same broker re-elected: nothing reloaded, the join still parked
        assert not node.coordinator.is_loading and not join.done()
        node.follow(epoch=2)  # resignation answers it
        with pytest.raises(NotCoordinatorError):
            await join
        node.logs.shutdown()
    asyncio.run(scenario())


# -- records of groups that Kafka places in another partition ------------------------------------------
def test_records_of_groups_placed_elsewhere_are_set_apart_with_their_latest_values():
    here = partition_for("group-1", 10)
    elsewhere = "orders-consumer"
    assert partition_for(elsewhere, 10) != here

    def key(group: str, partition: int) -> bytes:
        return encode_offset_commit_key(group, "t", partition)

    records = [
        (key("group-1", 0), b"own", -1, None),
        (key(elsewhere, 0), b"a1", -1, None),
        (key(elsewhere, 1), b"b1", -1, None),
        (key(elsewhere, 2), b"c1", 7, None),  # transactional, then committed
        (key(elsewhere, 3), b"d1", 8, None),  # transactional, then aborted
        (key(elsewhere, 4), b"e1", 9, None),  # transactional, still open
        (key(elsewhere, 1), None, -1, None),  # offset deleted
        (None, None, 7, True),
        (None, None, 8, False),
        (key(elsewhere, 0), b"a2", -1, None),
    ]
    strays: dict[bytes, bytes] = {}
    kept = list(placed_here(records, here, 10, strays))
    assert kept == [records[0], records[7], records[8]]
    assert list(strays.items()) == [(key(elsewhere, 2), b"c1"), (key(elsewhere, 0), b"a2")]
