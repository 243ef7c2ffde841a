"""ReplicaManager.write_txn_markers (the contract with the transaction coordinator): one marker
per led partition, the per-partition errors, the marker listeners, and the acks=-1 wait."""

from __future__ import annotations

import asyncio

import pytest

from logbroker.clock import SystemClock
from logbroker.errors import (
    InvalidProducerEpochError,
    NotLeaderOrFollowerError,
    RequestTimedOutError,
    UnknownTopicOrPartitionError,
)
from logbroker.metadata.model import PartitionState
from logbroker.records.builder import build_batch
from logbroker.replication.replica_manager import ReplicaManager
from logbroker.storage.log_config import LogConfig
from logbroker.storage.log_manager import LogManager
from logbroker.types import TopicPartition

LED = TopicPartition("txn", 0)
FOLLOWED = TopicPartition("txn", 1)
ELSEWHERE = TopicPartition("txn", 2)
PID = 42


@pytest.fixture
def manager(tmp_path):
    clock = SystemClock()
    config = LogConfig.defaults()
    log_manager = LogManager([tmp_path / "data"], default_config=config, clock=clock, broker_id=1)
    log_manager.startup()
    rm = ReplicaManager(broker_id=1, log_manager=log_manager, clock=clock)
    rm.partition_exists = lambda tp: tp.topic == "txn" and tp.partition < 3
    rm.become_leader(LED, PartitionState(1, 0, (1,)), (1,), config=config, topic_id=None)
    rm.become_follower(FOLLOWED, PartitionState(2, 1, (2, 1)), (2, 1), config=config, topic_id=None)
    yield rm
    log_manager.shutdown()


def txn_batch(epoch: int = 0) -> bytearray:
    return bytearray(build_batch([(b"k", b"v")], producer_id=PID, producer_epoch=epoch,
                                 base_sequence=0, transactional=True, now_ms=1_700_000_000_000))


def write(rm: ReplicaManager, partitions, *, commit=False, epoch=0, timeout_ms=5000):
    return asyncio.run(rm.write_txn_markers(producer_id=PID, producer_epoch=epoch,
                                            coordinator_epoch=0, commit=commit,
                                            partitions=partitions, timeout_ms=timeout_ms))


def test_markers_end_the_transaction_and_call_the_listeners(manager):
    seen = []
    manager.add_txn_marker_listener(lambda tp, pid, commit: seen.append((tp, pid, commit)))
    manager.append_records_now(timeout_ms=1000, required_acks=1, entries={LED: txn_batch()})
    log = manager.partitions[LED].log
    assert log.last_stable_offset == 0
    unknown = TopicPartition("nope", 0)
    errors = write(manager, [LED, FOLLOWED, ELSEWHERE, unknown])
    assert errors[LED] is None
    assert isinstance(errors[FOLLOWED], NotLeaderOrFollowerError)
    assert isinstance(errors[ELSEWHERE], NotLeaderOrFollowerError)
    assert isinstance(errors[unknown], UnknownTopicOrPartitionError)
    assert seen == [(LED, PID, False)]
    assert log.last_stable_offset == 2 == log.high_watermark
    assert [t.producer_id for s in log.segments for t in s.txn_index.all_aborted_txns()] == [PID]


def test_a_stale_producer_epoch_is_refused_and_writes_nothing(manager):
    manager.append_records_now(timeout_ms=1000, required_acks=1, entries={LED: txn_batch(epoch=3)})
    errors = write(manager, [LED], epoch=2)
    assert isinstance(errors[LED], InvalidProducerEpochError)
    assert manager.partitions[LED].log.log_end_offset == 1


def test_the_marker_waits_for_the_isr(manager, tmp_path):
    # A leader with a follower in the ISR that never fetches: the high watermark stays below
    # the marker, so the answer is REQUEST_TIMED_OUT (as acks=-1), though the marker is written.
    tp = TopicPartition("txn", 3)
    manager.become_leader(tp, PartitionState(1, 1, (1, 2)), (1, 2), config=LogConfig.defaults(),
                          topic_id=None)
    errors = write(manager, [tp], timeout_ms=100)
    assert isinstance(errors[tp], RequestTimedOutError)
    assert manager.partitions[tp].log.log_end_offset == 1
