"""Partition as a leader of followers: high watermark over the (maximal) ISR, ISR shrink and
expansion, following only newer epochs; and where a follower truncates (KIP-101/279)."""

from __future__ import annotations

import pytest

from logbroker.clock import ManualClock
from logbroker.metadata.model import PartitionState
from logbroker.records.builder import build_batch
from logbroker.replication.fetcher import truncation_offset
from logbroker.replication.partition import Partition
from logbroker.storage.log import Log
from logbroker.storage.log_config import LogConfig
from logbroker.types import TopicPartition

TP = TopicPartition("t", 0)
LAG_MS = 10_000


def batch(n: int = 1) -> bytearray:
    return bytearray(build_batch([(None, b"v%d" % i) for i in range(n)], now_ms=1_700_000_000_000))


@pytest.fixture
def clock():
    return ManualClock()


@pytest.fixture
def leader(tmp_path, clock):
    log = Log.open(tmp_path / "t-0", LogConfig.defaults(), clock=clock)
    partition = Partition(TP, log=log, local_broker_id=1, clock=clock)
    partition.make_leader(PartitionState(1, 0, (1, 2, 3)), (1, 2, 3))
    return partition


def test_high_watermark_is_the_minimum_log_end_offset_over_the_isr(leader):
    leader.append_records_to_leader(batch(10), required_acks=-1)
    assert leader.high_watermark == 0
    assert leader.update_follower_fetch(2, 10) is False  # follower 3 has nothing yet
    assert leader.update_follower_fetch(3, 4) is True
    assert leader.high_watermark == 4
    leader.update_follower_fetch(3, 10)
    assert leader.high_watermark == 10


def test_a_follower_not_caught_up_for_the_max_lag_leaves_the_isr(leader, clock):
    leader.append_records_to_leader(batch(5), required_acks=1)
    leader.update_follower_fetch(2, 5)
    leader.update_follower_fetch(3, 5)
    leader.append_records_to_leader(batch(5), required_acks=1)
    clock.advance(LAG_MS // 2)
    leader.update_follower_fetch(2, 10)  # caught up again; 3 stops fetching
    assert leader.isr_to_shrink(LAG_MS) is None
    clock.advance(LAG_MS // 2 + 1)
    assert leader.isr_to_shrink(LAG_MS) == (1, 2)


def test_a_shrink_counts_for_the_high_watermark_only_once_written(leader):
    leader.append_records_to_leader(batch(10), required_acks=1)
    leader.update_follower_fetch(2, 10)
    leader.pending_isr = (1, 2)  # asked for, not yet written
    leader.maybe_increment_high_watermark()
    assert leader.high_watermark == 0  # 3 still counts
    leader.isr, leader.pending_isr = (1, 2), None
    leader.maybe_increment_high_watermark()
    assert leader.high_watermark == 10


def test_a_follower_rejoins_once_at_the_high_watermark_and_the_epoch_start(tmp_path, clock):
    log = Log.open(tmp_path / "t-0", LogConfig.defaults(), clock=clock)
    log.append_as_leader(batch(6), leader_epoch=0)
    partition = Partition(TP, log=log, local_broker_id=1, clock=clock)
    partition.make_leader(PartitionState(1, 1, (1, 2)), (1, 2, 3))  # epoch 1 starts at 6
    partition.append_records_to_leader(batch(4), required_acks=1)
    partition.update_follower_fetch(2, 10)
    assert partition.high_watermark == 10
    partition.update_follower_fetch(3, 5)
    assert partition.isr_to_expand() is None  # below the epoch start and the high watermark
    partition.update_follower_fetch(3, 10)
    assert partition.isr_to_expand() == (1, 2, 3)


def test_an_expansion_counts_for_the_high_watermark_as_soon_as_asked(leader):
    leader.isr = (1, 2)
    leader.append_records_to_leader(batch(10), required_acks=1)
    leader.update_follower_fetch(2, 10)
    assert leader.high_watermark == 10
    leader.append_records_to_leader(batch(2), required_acks=1)
    leader.pending_isr = (1, 2, 3)
    leader.update_follower_fetch(3, 11)
    leader.update_follower_fetch(2, 12)
    assert leader.high_watermark == 11  # 3 counts while its admission is being written


def test_make_follower_acts_only_on_a_newer_epoch(leader):
    assert leader.make_follower(PartitionState(2, 0, (1, 2, 3)), (1, 2, 3)) is False
    assert leader.is_leader
    assert leader.make_follower(PartitionState(2, 1, (2, 3)), (1, 2, 3)) is True
    assert not leader.is_leader and leader.leader_id == 2 and leader.leader_epoch == 1


def test_a_follower_truncates_where_its_epoch_ends_at_the_leader(tmp_path, clock):
    log = Log.open(tmp_path / "t-0", LogConfig.defaults(), clock=clock)
    log.append_as_leader(batch(5), leader_epoch=0)   # 0..4 in epoch 0
    log.append_as_leader(batch(5), leader_epoch=2)   # 5..9 in epoch 2, never replicated
    log.update_high_watermark(8)
    # The new leader (epoch 3) only knew epoch 0..1: it says epoch 1 ends at 7 for our epoch 2.
    assert truncation_offset(log, 1, 7) == 5  # where epoch 1 (absent here: epoch 0) ends for us
    assert truncation_offset(log, 2, 7) == 7
    assert truncation_offset(log, 2, 12) == 10  # never past our own log end
    assert truncation_offset(log, -1, -1) is None


def test_read_replica_candidates_are_in_sync_followers_holding_the_offset(leader, clock):
    # KIP-392: a consumer may be sent only to a follower in the ISR that has the fetch offset.
    leader.append_records_to_leader(batch(10), required_acks=1)
    leader.update_follower_fetch(2, 10)
    leader.update_follower_fetch(3, 6)
    clock.advance(5)
    assert [(r, end) for r, end, _ in leader.caught_up_followers(6)] == [(2, 10), (3, 6)]
    assert [r for r, _, _ in leader.caught_up_followers(8)] == [2]
    leader.isr = (1, 3)  # 2 left the ISR
    assert leader.caught_up_followers(8) == []
