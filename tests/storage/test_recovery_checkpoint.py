"""Recovery checkpoints of the active segment (log_flush.py) and the tail recovery they allow
(log_loader.py): a log crashed after a checkpoint comes back with exactly what it held — index
entries, aborted transactions, producer state, last stable offset — having replayed only the
batches past the checkpoint; a torn tail is cut; an index that does not match its log is not
trusted."""

from __future__ import annotations

import logging
import os
import re

import pytest

from logbroker.clock import ManualClock
from logbroker.records.builder import build_batch
from logbroker.records.control import build_end_txn_marker_batch
from logbroker.storage.log import Log
from logbroker.storage.log_config import LogConfig
from logbroker.storage.log_flush import recovery_checkpoint_bytes

NOW = 1_700_000_000_000
CONFIG = LogConfig.defaults().with_overrides({"segment.bytes": 8 * 1024 * 1024})
REPLAYED = re.compile(r"Recovered segment 0 of \S+ from offset (\d+): (\d+) batch\(es\) replayed")


class Producer:
    def __init__(self, pid: int) -> None:
        self.pid, self.seq = pid, 0

    def batch(self, n: int) -> bytearray:
        data = build_batch([(b"k", b"v" * 300)] * n, producer_id=self.pid, producer_epoch=0,
                           base_sequence=self.seq, transactional=True, now_ms=NOW + self.seq)
        self.seq += n
        return bytearray(data)

    def marker(self, commit: bool) -> bytes:
        return build_end_txn_marker_batch(commit=commit, producer_id=self.pid, producer_epoch=0,
                                          coordinator_epoch=0, timestamp_ms=NOW)


def state_of(log: Log) -> dict:
    """Everything recovery must give back, as comparable values."""
    # A snapshot keeps each producer's last batch only (as Kafka's), so that one is compared.
    producers = {pid: (e.producer_epoch, e.last_seq, e.current_txn_first_offset,
                       e.batch_metadata[-1].last_offset)
                 for pid, e in log.producer_state.active_producers.items()}
    segment = log.active_segment
    return {"log_end": log.log_end_offset, "lso": log.last_stable_offset, "producers": producers,
            "aborted": log.collect_aborted_transactions(0, log.log_end_offset),
            "offset_index": [(e.offset, e.position) for e in segment.offset_index.all_entries()],
            "time_index": [(e.timestamp, e.offset) for e in segment.time_index.all_entries()]}


def write_past_checkpoints(directory, clock) -> tuple[Log, int, int]:
    """Three transactional producers (every third transaction aborted, one transaction left
    open across the last checkpoint) until the active segment took two recovery checkpoints and
    grew past the last one. Returns the log, left open as a crash leaves it, the last
    checkpoint's offset and the number of batches appended after it."""
    log = Log.open(directory, CONFIG, clock=clock)
    producers = [Producer(1), Producer(2), Producer(3)]
    checkpoints, after = [], 0
    i = 0
    while len(checkpoints) < 2 or after < 40:
        p = producers[i % 2]
        log.append_as_leader(p.batch(1 + i % 3), leader_epoch=0)
        log.append_as_leader(p.marker(commit=i % 3 != 0), leader_epoch=0, is_from_client=False)
        log.update_high_watermark(log.log_end_offset)
        after += 2
        if len(checkpoints) == 1 and producers[2].seq == 0:  # open before the last checkpoint
            log.append_as_leader(producers[2].batch(2), leader_epoch=0)
            after += 1
        if log.recovery_checkpoint_due():
            assert log.checkpoint_active_segment()
            checkpoints.append(log.recovery_point)
            assert log.recovery_point == log.log_end_offset
            after = 0
        i += 1
    log.append_as_leader(producers[2].marker(commit=False), leader_epoch=0, is_from_client=False)
    log.update_high_watermark(log.log_end_offset)
    after += 1
    assert len(log.segments) == 1 and checkpoints[0] > 0
    assert log.active_segment.size > 2 * recovery_checkpoint_bytes(CONFIG.segment_bytes) - 64 * 1024
    # The older checkpoint's snapshot went once the newer one was flushed.
    assert log.producer_state.snapshot_offsets() == [checkpoints[-1]]
    return log, checkpoints[-1], after


@pytest.fixture
def clock():
    return ManualClock(NOW)


def reopen(directory, clock, recovery_point: int, caplog) -> tuple[Log, list[tuple[int, int]]]:
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="kafka.log.LogLoader"):
        log = Log.open(directory, CONFIG, clock=clock, recovery_point=recovery_point)
    log.update_high_watermark(log.log_end_offset)  # from replication-offset-checkpoint
    return log, [(int(m.group(1)), int(m.group(2))) for m in map(REPLAYED.search, caplog.messages) if m]


def test_a_crash_after_a_checkpoint_replays_only_the_batches_past_it(tmp_path, clock, caplog):
    directory = tmp_path / "t-0"
    log, checkpoint, after = write_past_checkpoints(directory, clock)
    before = state_of(log)
    assert before["aborted"] and all(e[2] == -1 for e in before["producers"].values())
    log.close_handles()

    log, replayed = reopen(directory, clock, checkpoint, caplog)
    assert replayed == [(checkpoint, after)]
    assert state_of(log) == before
    # The aborted transaction that spans the checkpoint is known from both sides of it.
    spanning = [t for t in before["aborted"] if t.producer_id == 3]
    assert len(spanning) == 1 and spanning[0].first_offset < checkpoint <= spanning[0].last_offset
    log.close()


def test_a_torn_tail_past_the_checkpoint_is_cut(tmp_path, clock, caplog):
    directory = tmp_path / "t-0"
    log, checkpoint, after = write_past_checkpoints(directory, clock)
    path = log.active_segment.log.path
    log.close_handles()
    os.truncate(path, path.stat().st_size - 5)  # the last batch (the ABORT marker) torn

    log, replayed = reopen(directory, clock, checkpoint, caplog)
    assert replayed == [(checkpoint, after - 1)]
    # Producer 3's transaction is open again: its abort was lost with the torn batch.
    assert log.producer_state.active_producers[3].current_txn_first_offset < checkpoint
    assert log.first_unstable_offset == log.producer_state.active_producers[3].current_txn_first_offset
    log.close()


def test_an_index_entry_that_does_not_match_its_batch_means_a_whole_recovery(tmp_path, clock, caplog):
    directory = tmp_path / "t-0"
    log, checkpoint, _ = write_past_checkpoints(directory, clock)
    before = state_of(log)
    entries = log.active_segment.offset_index.entries
    kept = [e for e in before["offset_index"] if e[0] < checkpoint]
    index_path = log.active_segment.offset_index.path
    total = sum(1 for _ in log.active_segment.log.batches(0))
    log.close_handles()
    with open(index_path, "r+b") as f:  # the last entry below the checkpoint points elsewhere
        f.seek((len(kept) - 1) * 8 + 4)
        f.write((kept[-1][1] + 1).to_bytes(4, "big"))
    assert entries >= len(kept)

    log, replayed = reopen(directory, clock, checkpoint, caplog)
    assert replayed == [(0, total)]
    assert any("does not match the batch at its position" in m for m in caplog.messages)
    assert state_of(log) == before
    log.close()


def test_a_checkpoint_in_a_segment_rolled_since_is_recovered_from_there(tmp_path, clock, caplog):
    # Rolled after its last checkpoint and trimmed by the roll's flush, whose fsyncs the crash
    # interrupted before the recovery point moved on: the rolled segment (trimmed indexes) is
    # recovered from the checkpoint, the new one wholly.
    directory = tmp_path / "t-0"
    log, checkpoint, after = write_past_checkpoints(directory, clock)
    before = state_of(log)
    log.roll()
    log.segments[0].flush(rolled=True)
    rolled_time_index = [(e.timestamp, e.offset) for e in log.segments[0].time_index.all_entries()]
    log.close_handles()

    log, replayed = reopen(directory, clock, checkpoint, caplog)
    assert replayed == [(checkpoint, after)]
    assert len(log.segments) == 2 and log.log_end_offset == before["log_end"]
    segment = log.segments[0]
    assert [(e.offset, e.position) for e in segment.offset_index.all_entries()] == before["offset_index"]
    assert [(e.timestamp, e.offset) for e in segment.time_index.all_entries()] == rolled_time_index
    assert log.collect_aborted_transactions(0, log.log_end_offset) == before["aborted"]
    log.close()


def test_a_producer_whose_data_is_below_the_log_start_keeps_its_sequence_across_a_tail_recovery(tmp_path, clock, caplog):
    """KIP-360: a flush (flush.messages) put the recovery point at the log end with no snapshot
    there, and DeleteRecords moved the log start onto a producer's COMMIT marker. Kafka replays
    the whole segment, so the producer keeps the sequence of its deleted data batches; the tail
    recovery must not rebuild it from the marker alone (an epoch and no sequence: its next batch
    would be out of order)."""
    directory = tmp_path / "t-0"
    log = Log.open(directory, CONFIG, clock=clock)
    other, producer = Producer(1), Producer(7)
    log.append_as_leader(other.batch(3), leader_epoch=0)
    log.append_as_leader(producer.batch(2), leader_epoch=0)
    log.append_as_leader(other.marker(commit=True), leader_epoch=0, is_from_client=False)
    marker_offset = log.log_end_offset
    log.append_as_leader(producer.marker(commit=True), leader_epoch=0, is_from_client=False)
    log.update_high_watermark(log.log_end_offset)
    log.flush()
    assert log.recovery_point == log.log_end_offset == marker_offset + 1
    assert log.maybe_increment_log_start_offset(marker_offset)
    log.close_handles()

    caplog.clear()
    with caplog.at_level(logging.INFO, logger="kafka.log.LogLoader"):
        log = Log.open(directory, CONFIG, clock=clock, recovery_point=marker_offset + 1,
                       log_start_offset=marker_offset)
    assert [m.group(1, 2) for m in map(REPLAYED.search, caplog.messages) if m] == [(str(marker_offset + 1), "0")]
    assert log.log_start_offset == marker_offset
    states = {pid: (e.producer_epoch, e.last_seq, e.current_txn_first_offset)
              for pid, e in log.producer_state.active_producers.items()}
    assert states == {1: (0, 2, -1), 7: (0, 1, -1)}
    next_offset = log.log_end_offset
    assert log.append_as_leader(producer.batch(1), leader_epoch=0).first_offset == next_offset
    log.close()
