"""Log: appends, reads, rolling, truncation, retention, DeleteRecords, flushing, reopening."""

from __future__ import annotations

import os
import uuid

import pytest

from logbroker.clock import ManualClock
from logbroker.errors import (
    InconsistentTopicIdError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceNumberError,
)
from logbroker.records.batch import read_header
from logbroker.records.builder import build_batch
from logbroker.records.record_batch import RecordBatch, iter_batches
from logbroker.storage.log import Log, UnexpectedAppendOffsetError
from logbroker.storage.log_config import LogConfig
from logbroker.types import TopicPartition

NOW = 1_700_000_000_000
HOUR = 3_600_000


def make_batch(n: int = 1, *, value_size: int = 20, ts: int | None = NOW, **kwargs) -> bytearray:
    return bytearray(build_batch([(b"k%d" % i, b"v" * value_size) for i in range(n)],
                                 now_ms=ts, **kwargs))


def config(**overrides) -> LogConfig:
    return LogConfig.defaults().with_overrides({k.replace("_", "."): v for k, v in overrides.items()})


@pytest.fixture
def clock():
    return ManualClock(NOW)


def open_log(tmp_path, clock, name="topic-0", **overrides) -> Log:
    return Log.open(tmp_path / name, config(**overrides), clock=clock)


def region_bytes(info) -> bytes:
    if info.region is None:
        return b""
    return os.pread(info.region.fd, info.region.size, info.region.position)


def read_all(log: Log, start: int | None = None, max_offset: int | None = None) -> list[bytes]:
    """Every complete batch from `start` up to max_offset (or the end), as stored."""
    offset = log.log_start_offset if start is None else start
    out = []
    while True:
        info = log.read(offset, max_bytes=1 << 20, max_offset=max_offset)
        data = region_bytes(info)
        if not data:
            return out
        last = None
        for position, header in iter_batches(data):
            out.append(data[position:position + header.size_in_bytes])
            last = header
        offset = last.next_offset


# --- appending and reading ---------------------------------------------------------------


def test_append_assigns_offsets_and_read_returns_the_same_bytes(tmp_path, clock):
    log = open_log(tmp_path, clock)
    written = []
    for n in (1, 3, 2):
        buf = make_batch(n)
        info = log.append_as_leader(buf, leader_epoch=4)
        written.append(bytes(buf))
        assert info.last_offset - info.first_offset == n - 1
    assert log.log_end_offset == 6
    assert read_all(log) == written
    headers = [read_header(b) for b in written]
    assert [h.base_offset for h in headers] == [0, 1, 4]
    assert {h.partition_leader_epoch for h in headers} == {4}
    assert info.first_offset == 4 and info.last_offset == 5 and info.record_count == 2
    assert info.valid_bytes == len(written[-1]) and not info.duplicate


def test_append_patches_the_callers_buffer_in_place(tmp_path, clock):
    log = open_log(tmp_path, clock)
    log.append_as_leader(make_batch(), leader_epoch=0)
    buf = make_batch()
    view = memoryview(buf)
    log.append_as_leader(view, leader_epoch=2)
    assert read_header(buf).base_offset == 1
    assert read_header(buf).partition_leader_epoch == 2


def test_read_only_batch_is_written_patched_without_touching_the_callers_bytes(tmp_path, clock):
    """The produce path hands over the bytes the request decoder made: the log writes a patched
    16-byte head before the rest, and the stored batch equals the one patched in place."""
    writable_log = open_log(tmp_path, clock, "writable-0")
    readonly_log = open_log(tmp_path, clock, "readonly-0")
    for epoch in (0, 3):
        for batch in (make_batch(3), make_batch(1, value_size=5000)):
            original = bytes(batch)
            writable_log.append_as_leader(bytearray(original), leader_epoch=epoch)
            readonly_log.append_as_leader(original, leader_epoch=epoch)
    assert read_all(readonly_log) == read_all(writable_log)
    stored = read_all(readonly_log)
    assert [read_header(b).base_offset for b in stored] == [0, 3, 4, 7]
    assert [read_header(b).partition_leader_epoch for b in stored] == [0, 0, 3, 3]
    assert all(RecordBatch(b).is_valid() for b in stored)


def test_read_only_batch_on_a_log_append_time_topic_is_stamped(tmp_path, clock):
    log = open_log(tmp_path, clock, message_timestamp_type="LogAppendTime")
    original = bytes(make_batch(2, ts=NOW - HOUR))
    info = log.append_as_leader(original, leader_epoch=1)
    [stored] = read_all(log)
    assert RecordBatch(stored).is_valid() and RecordBatch(stored).header.is_log_append_time
    assert info.log_append_time_ms == NOW


def test_leader_epoch_cache_records_new_epochs(tmp_path, clock):
    log = open_log(tmp_path, clock)
    for epoch in (0, 0, 2, 2, 5):
        log.append_as_leader(make_batch(2), leader_epoch=epoch)
    assert [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries] == [(0, 0), (2, 4), (5, 8)]
    assert log.end_offset_for_epoch(2) == (2, 8)
    assert log.end_offset_for_epoch(5) == (5, 10)
    assert log.end_offset_for_epoch(1) == (0, 4)


def test_log_append_time_topic_stamps_broker_time_and_keeps_crc_valid(tmp_path, clock):
    log = open_log(tmp_path, clock, message_timestamp_type="LogAppendTime")
    clock.advance(5000)
    info = log.append_as_leader(make_batch(2, ts=NOW - 10 * HOUR), leader_epoch=0)
    assert info.log_append_time_ms == NOW + 5000 == info.max_timestamp
    [stored] = read_all(log)
    batch = RecordBatch(stored)
    assert batch.is_valid() and batch.header.is_log_append_time
    assert [r.timestamp for r in batch.records()] == [NOW + 5000] * 2


def test_idempotent_retry_is_not_written_twice(tmp_path, clock):
    log = open_log(tmp_path, clock)
    first = log.append_as_leader(make_batch(2, producer_id=9, producer_epoch=0, base_sequence=0),
                                 leader_epoch=0)
    log.append_as_leader(make_batch(1), leader_epoch=0)
    retry = log.append_as_leader(make_batch(2, producer_id=9, producer_epoch=0, base_sequence=0),
                                 leader_epoch=0)
    assert retry.duplicate and (retry.first_offset, retry.last_offset) == (first.first_offset, first.last_offset)
    assert log.log_end_offset == 3
    with pytest.raises(OutOfOrderSequenceNumberError):
        log.append_as_leader(make_batch(1, producer_id=9, producer_epoch=0, base_sequence=5),
                             leader_epoch=0)


def test_producer_state_survives_reopen(tmp_path, clock):
    log = open_log(tmp_path, clock)
    log.append_as_leader(make_batch(2, producer_id=9, producer_epoch=0, base_sequence=0), leader_epoch=0)
    log.flush()
    log.close()
    log = Log.open(tmp_path / "topic-0", config(), clock=clock, had_clean_shutdown=True)
    retry = log.append_as_leader(make_batch(2, producer_id=9, producer_epoch=0, base_sequence=0),
                                 leader_epoch=0)
    assert retry.duplicate
    log.close()
    log = Log.open(tmp_path / "topic-0", config(), clock=clock, had_clean_shutdown=False)
    with pytest.raises(OutOfOrderSequenceNumberError):
        log.append_as_leader(make_batch(1, producer_id=9, producer_epoch=0, base_sequence=7),
                             leader_epoch=0)


# --- rolling -------------------------------------------------------------------------------


def test_roll_on_segment_bytes_names_segments_by_next_offset(tmp_path, clock):
    one = len(make_batch(1))
    log = open_log(tmp_path, clock, segment_bytes=3 * one)
    for _ in range(7):
        log.append_as_leader(make_batch(1), leader_epoch=0)
    assert [s.base_offset for s in log.segments] == [0, 3, 6]
    assert all(s.size <= 3 * one for s in log.segments)
    names = sorted(p.name for p in (tmp_path / "topic-0").glob("*.log"))
    assert names == ["00000000000000000000.log", "00000000000000000003.log", "00000000000000000006.log"]
    assert len(read_all(log)) == 7


def test_roll_on_segment_ms(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_ms=HOUR)
    log.append_as_leader(make_batch(ts=clock.time_ms()), leader_epoch=0)
    clock.advance(HOUR)
    log.append_as_leader(make_batch(ts=clock.time_ms()), leader_epoch=0)
    assert len(log.segments) == 1  # exactly segment.ms later: not yet
    clock.advance(1)
    log.append_as_leader(make_batch(ts=clock.time_ms()), leader_epoch=0)
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_rolled_segment_gets_final_time_index_entry_and_the_flush_after_the_roll_trims_its_indexes(tmp_path, clock):
    one = len(make_batch(1))
    log = open_log(tmp_path, clock, segment_bytes=2 * one)
    for i in range(3):
        log.append_as_leader(make_batch(ts=NOW + i), leader_epoch=0)
    old = log.segments[0]
    assert old.time_index.last_entry.timestamp == NOW + 1
    index = tmp_path / "topic-0" / "00000000000000000000.index"
    time_index = tmp_path / "topic-0" / "00000000000000000000.timeindex"
    # The roll retires the indexes (no more entries) and leaves their trim to the flush.
    assert old.offset_index.is_full and old.time_index.is_full
    assert index.stat().st_size > 0
    assert log.needs_flush(clock.time_ms())
    log.flush_if_needed(clock.time_ms())
    assert index.stat().st_size == 0
    assert time_index.stat().st_size == 12
    assert old.time_index.length == 12 and old.time_index.last_entry.timestamp == NOW + 1
    assert log.read(0, max_bytes=1 << 20).region is not None  # lookups after the remap


def test_rolled_segment_closed_before_its_flush_has_its_indexes_trimmed(tmp_path, clock):
    one = len(make_batch(1))
    log = open_log(tmp_path, clock, segment_bytes=2 * one)
    for i in range(3):
        log.append_as_leader(make_batch(ts=NOW + i), leader_epoch=0)
    log.close()
    assert (tmp_path / "topic-0" / "00000000000000000000.index").stat().st_size == 0
    assert (tmp_path / "topic-0" / "00000000000000000000.timeindex").stat().st_size == 12


def test_segment_truncated_back_into_before_its_flush_keeps_full_indexes(tmp_path, clock):
    # A follower truncating into the segment it just rolled: the segment is active again, and
    # the flush that follows must not cut the indexes it now appends to.
    one = len(make_batch(1))
    log = open_log(tmp_path, clock, segment_bytes=3 * one, index_interval_bytes=1)
    for i in range(4):
        log.append_as_leader(make_batch(ts=NOW + i), leader_epoch=0)
    assert [s.base_offset for s in log.segments] == [0, 3]
    log.truncate_to(2)
    assert [s.base_offset for s in log.segments] == [0]
    log.flush_if_needed(clock.time_ms())
    log.flush()
    index = tmp_path / "topic-0" / "00000000000000000000.index"
    assert index.stat().st_size == log.active_segment.offset_index.max_index_size // 8 * 8
    assert not log.active_segment.offset_index.is_full and not log.active_segment.time_index.is_full
    log.append_as_leader(make_batch(ts=NOW + 9), leader_epoch=0)
    assert [s.base_offset for s in log.segments] == [0]  # it took the batch: no roll
    assert log.log_end_offset == 3 and len(read_all(log)) == 3


def test_untrimmed_rolled_segment_after_a_crash_opens_with_its_entries(tmp_path, clock):
    one = len(make_batch(1))
    log = open_log(tmp_path, clock, segment_bytes=2 * one, index_interval_bytes=1)
    for i in range(3):
        log.append_as_leader(make_batch(ts=NOW + i), leader_epoch=0)
    entries = log.segments[0].offset_index.entries
    log.close_handles()  # a crash: the rolled segment's indexes were never trimmed
    assert (tmp_path / "topic-0" / "00000000000000000000.index").stat().st_size > 8 * entries
    again = open_log(tmp_path, clock, segment_bytes=2 * one, index_interval_bytes=1)
    assert again.segments[0].offset_index.entries == entries
    assert [len(b) for b in read_all(again)] == [one] * 3


def test_explicit_roll_and_empty_active_segment_replaced(tmp_path, clock):
    log = open_log(tmp_path, clock)
    log.append_as_leader(make_batch(2), leader_epoch=0)
    new = log.roll()
    assert new.base_offset == 2
    again = log.roll()  # empty active segment at the same offset: replaced, not duplicated
    assert again.base_offset == 2 and [s.base_offset for s in log.segments] == [0, 2]


def test_index_entries_map_each_batch_last_offset_to_its_position(tmp_path, clock):
    log = open_log(tmp_path, clock, index_interval_bytes=100)
    for i in range(30):
        log.append_as_leader(make_batch(1 + i % 3, value_size=30), leader_epoch=0)
    segment = log.active_segment
    positions = {pos: h for pos, h in segment.log.batches(0)}
    entries = segment.offset_index.all_entries()
    assert entries
    for entry in entries:
        assert positions[entry.position].last_offset == entry.offset


# --- reads ---------------------------------------------------------------------------------


def test_read_returns_the_whole_batch_containing_the_offset(tmp_path, clock):
    log = open_log(tmp_path, clock)
    log.append_as_leader(make_batch(5), leader_epoch=0)
    second = make_batch(5)
    log.append_as_leader(second, leader_epoch=0)
    for offset in range(5, 10):
        info = log.read(offset, max_bytes=1 << 20)
        assert region_bytes(info) == bytes(second)
        assert info.fetch_offset == offset


def test_read_at_log_end_is_empty(tmp_path, clock):
    log = open_log(tmp_path, clock)
    log.append_as_leader(make_batch(2), leader_epoch=0)
    info = log.read(2, max_bytes=1000)
    assert info.region is None and info.size == 0


def test_read_between_high_watermark_and_log_end_is_empty(tmp_path, clock):
    log = open_log(tmp_path, clock)
    batches = [make_batch(2) for _ in range(3)]
    for b in batches:
        log.append_as_leader(b, leader_epoch=0)
    log.update_high_watermark(4)
    assert log.read(4, max_bytes=1 << 20, max_offset=4).region is None
    assert log.read(5, max_bytes=1 << 20, max_offset=4).region is None
    info = log.read(0, max_bytes=1 << 20, max_offset=log.high_watermark)
    assert region_bytes(info) == bytes(batches[0]) + bytes(batches[1])


def test_read_caps_at_the_batch_holding_max_offset(tmp_path, clock):
    log = open_log(tmp_path, clock)
    batches = [make_batch(3) for _ in range(3)]
    for b in batches:
        log.append_as_leader(b, leader_epoch=0)
    # max_offset 4 lies inside the second batch [3, 5]: only the first batch may go.
    assert region_bytes(log.read(0, max_bytes=1 << 20, max_offset=4)) == bytes(batches[0])
    assert log.read(3, max_bytes=1 << 20, max_offset=4).size == 0


def test_read_respects_max_bytes_but_returns_one_batch_with_min_one_message(tmp_path, clock):
    log = open_log(tmp_path, clock)
    big = make_batch(2, value_size=500)
    log.append_as_leader(big, leader_epoch=0)
    log.append_as_leader(make_batch(2), leader_epoch=0)
    info = log.read(0, max_bytes=10)
    assert region_bytes(info) == bytes(big)
    partial = log.read(0, max_bytes=10, min_one_message=False)
    assert partial.size == 10 and partial.first_entry_incomplete


def test_read_crosses_into_the_next_segment_when_the_first_has_nothing(tmp_path, clock):
    one = len(make_batch(1))
    log = open_log(tmp_path, clock, segment_bytes=2 * one)
    for _ in range(4):
        log.append_as_leader(make_batch(1), leader_epoch=0)
    info = log.read(2, max_bytes=1 << 20)
    assert info.region.fd == log.segments[1].log.fd


def test_offset_out_of_range_only_outside_start_and_end(tmp_path, clock):
    log = open_log(tmp_path, clock)
    for _ in range(3):
        log.append_as_leader(make_batch(2), leader_epoch=0)
    log.update_high_watermark(6)
    log.maybe_increment_log_start_offset(2)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(1, max_bytes=100)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(7, max_bytes=100)
    for offset in range(2, 7):
        log.read(offset, max_bytes=100)


def test_fetch_offset_by_timestamp(tmp_path, clock):
    log = open_log(tmp_path, clock, index_interval_bytes=1)
    for i, ts in enumerate([NOW + 10, NOW + 30, NOW + 20, NOW + 40]):
        log.append_as_leader(make_batch(2, ts=ts), leader_epoch=i)
    assert log.fetch_offset_by_timestamp(-2).offset == 0
    assert log.fetch_offset_by_timestamp(-2).leader_epoch == 0
    latest = log.fetch_offset_by_timestamp(-1)
    assert (latest.offset, latest.leader_epoch) == (8, 3)
    found = log.fetch_offset_by_timestamp(NOW + 25)
    assert (found.offset, found.timestamp) == (2, NOW + 30)
    assert log.fetch_offset_by_timestamp(NOW + 41) is None
    assert log.fetch_offset_by_timestamp(NOW).offset == 0
    max_ts = log.fetch_offset_by_timestamp(-3)
    assert (max_ts.timestamp, max_ts.offset, max_ts.leader_epoch) == (NOW + 40, 6, 3)


def test_max_timestamp_lookup_finds_the_record_in_its_batch(tmp_path, clock):
    log = open_log(tmp_path, clock)
    records = [(b"a", b"1", (), NOW + 1), (b"b", b"2", (), NOW + 9), (b"c", b"3", (), NOW + 2)]
    log.append_as_leader(bytearray(build_batch(records)), leader_epoch=0)
    found = log.fetch_offset_by_timestamp(-3)
    assert (found.timestamp, found.offset) == (NOW + 9, 1)


# --- followers -----------------------------------------------------------------------------


def leader_batches(specs, *, start=0):
    """Batches as a leader stored them: [(records, epoch), ...] from offset `start`."""
    out = bytearray()
    offset = start
    for n, epoch in specs:
        out += build_batch([(b"k", b"v")] * n, base_offset=offset, partition_leader_epoch=epoch, now_ms=NOW)
        offset += n
    return out


def test_follower_append_keeps_offsets_and_learns_epochs(tmp_path, clock):
    log = open_log(tmp_path, clock)
    data = leader_batches([(2, 0), (3, 0), (1, 4)])
    info = log.append_as_follower(data)
    assert (info.first_offset, info.last_offset, info.record_count) == (0, 5, 6)
    assert log.log_end_offset == 6
    assert b"".join(read_all(log)) == bytes(data)
    assert [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries] == [(0, 0), (4, 5)]


def test_follower_append_drops_a_partial_last_batch(tmp_path, clock):
    log = open_log(tmp_path, clock)
    data = leader_batches([(2, 0), (3, 0)])
    info = log.append_as_follower(data[:-7])
    assert (info.first_offset, info.last_offset) == (0, 1)
    assert log.log_end_offset == 2
    assert log.append_as_follower(b"").first_offset == -1


def test_follower_append_below_log_end_is_refused(tmp_path, clock):
    log = open_log(tmp_path, clock)
    log.append_as_follower(leader_batches([(2, 0)]))
    with pytest.raises(UnexpectedAppendOffsetError):
        log.append_as_follower(leader_batches([(2, 0)], start=1))
    assert log.log_end_offset == 2


def test_follower_append_with_gap_is_accepted(tmp_path, clock):
    log = open_log(tmp_path, clock)
    log.append_as_follower(leader_batches([(2, 0)]))
    log.append_as_follower(leader_batches([(2, 0)], start=10))
    assert log.log_end_offset == 12
    assert region_bytes(log.read(5, max_bytes=1 << 20))[:8] == (10).to_bytes(8, "big")


def test_follower_multi_batch_append_indexes_like_recovery(tmp_path, clock):
    log = open_log(tmp_path, clock, index_interval_bytes=150)
    log.append_as_follower(leader_batches([(2, 0)] * 40))
    segment = log.active_segment
    live = segment.offset_index.all_entries()
    segment.recover()
    assert segment.offset_index.all_entries() == live


# --- truncation ----------------------------------------------------------------------------


def test_truncate_to_removes_batches_at_and_after(tmp_path, clock):
    one = len(make_batch(2))
    log = open_log(tmp_path, clock, segment_bytes=2 * one)
    batches = []
    for epoch in range(6):
        b = make_batch(2)
        log.append_as_leader(b, leader_epoch=epoch)
        batches.append(bytes(b))
    log.update_high_watermark(12)
    assert log.truncate_to(5)  # inside batch [4, 5]: it goes whole
    assert log.log_end_offset == 4
    assert read_all(log) == batches[:2]
    assert log.high_watermark == 4
    assert log.leader_epoch_cache.latest_epoch == 1
    assert [s.base_offset for s in log.segments] == [0, 4]  # segment 4 stays, emptied
    log.append_as_leader(make_batch(2), leader_epoch=9)
    assert log.log_end_offset == 6
    assert not log.truncate_to(100)


def test_truncate_to_below_first_segment_truncates_fully(tmp_path, clock):
    log = open_log(tmp_path, clock)
    log.truncate_fully_and_start_at(100)
    log.append_as_leader(make_batch(2), leader_epoch=0)
    log.truncate_to(50)
    assert (log.log_start_offset, log.log_end_offset) == (50, 50)


def test_truncate_fully_and_start_at(tmp_path, clock):
    log = open_log(tmp_path, clock)
    for _ in range(3):
        log.append_as_leader(make_batch(2), leader_epoch=1)
    log.truncate_fully_and_start_at(500)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark, log.recovery_point) == (500, 500, 500, 500)
    assert log.leader_epoch_cache.entries == []
    assert [s.base_offset for s in log.segments] == [500]
    info = log.append_as_follower(leader_batches([(2, 3)], start=500))
    assert info.first_offset == 500
    log.truncate_fully_and_start_at(500)  # again at the same offset
    assert [s.base_offset for s in log.segments] == [500] and log.log_end_offset == 500


# --- retention and DeleteRecords -----------------------------------------------------------


def segment_files(tmp_path, name="topic-0"):
    return sorted(p.name for p in (tmp_path / name).iterdir() if ".log" in p.name)


def test_retention_by_time_renames_then_deletes_after_delay(tmp_path, clock):
    one = len(make_batch(1))
    log = open_log(tmp_path, clock, segment_bytes=one, retention_ms=HOUR, file_delete_delay_ms=60_000)
    for i in range(3):
        log.append_as_leader(make_batch(ts=NOW + i * HOUR), leader_epoch=0)
    log.update_high_watermark(3)
    clock.advance(2 * HOUR + 1)  # the first two segments are older than an hour
    assert log.delete_old_segments() == 2
    assert log.log_start_offset == 2
    assert segment_files(tmp_path) == ["00000000000000000000.log.deleted",
                                       "00000000000000000001.log.deleted",
                                       "00000000000000000002.log"]
    clock.advance(59_999)
    assert log.delete_pending_files() == 0
    clock.advance(1)
    assert log.delete_pending_files() == 2
    assert segment_files(tmp_path) == ["00000000000000000002.log"]


def test_retention_never_deletes_past_the_high_watermark(tmp_path, clock):
    one = len(make_batch(1))
    log = open_log(tmp_path, clock, segment_bytes=one, retention_ms=HOUR, file_delete_delay_ms=0)
    for _ in range(3):
        log.append_as_leader(make_batch(ts=NOW), leader_epoch=0)
    log.update_high_watermark(1)
    clock.advance(2 * HOUR)
    assert log.delete_old_segments() == 1
    assert [s.base_offset for s in log.segments] == [1, 2]


def test_retention_rolls_an_expired_active_segment(tmp_path, clock):
    log = open_log(tmp_path, clock, retention_ms=HOUR, file_delete_delay_ms=0)
    log.append_as_leader(make_batch(2, ts=NOW), leader_epoch=0)
    log.update_high_watermark(2)
    clock.advance(HOUR + 1)
    assert log.delete_old_segments() == 1
    assert [s.base_offset for s in log.segments] == [2]
    assert (log.log_start_offset, log.log_end_offset) == (2, 2)
    assert log.delete_old_segments() == 0  # the empty active segment stays


def test_retention_by_bytes(tmp_path, clock):
    one = len(make_batch(1))
    log = open_log(tmp_path, clock, segment_bytes=one, retention_bytes=2 * one, file_delete_delay_ms=0)
    for _ in range(5):
        log.append_as_leader(make_batch(), leader_epoch=0)
    log.update_high_watermark(5)
    assert log.delete_old_segments() == 3
    assert [s.base_offset for s in log.segments] == [3, 4]
    assert log.size_in_bytes == 2 * one
    assert segment_files(tmp_path) == ["00000000000000000003.log", "00000000000000000004.log"]


def test_compacted_topic_is_not_subject_to_time_retention(tmp_path, clock):
    one = len(make_batch(1))
    log = open_log(tmp_path, clock, segment_bytes=one, retention_ms=HOUR, cleanup_policy="compact")
    for _ in range(3):
        log.append_as_leader(make_batch(), leader_epoch=0)
    log.update_high_watermark(3)
    clock.advance(10 * HOUR)
    assert log.delete_old_segments() == 0


def test_empty_cleanup_policy_keeps_everything_but_what_delete_records_drops(tmp_path, clock):
    # KAFKA-19112: no retention by time or size, no compaction; the log start moves only when
    # asked (DeleteRecords), and the segments wholly below it go.
    one = len(make_batch(1))
    log = open_log(tmp_path, clock, segment_bytes=one, retention_ms=HOUR, retention_bytes=one,
                   cleanup_policy="", file_delete_delay_ms=0)
    assert not log.config.delete and not log.config.compact
    for _ in range(4):
        log.append_as_leader(make_batch(), leader_epoch=0)
    log.update_high_watermark(4)
    clock.advance(10 * HOUR)
    assert log.delete_old_segments() == 0
    assert log.maybe_increment_log_start_offset(2)
    assert log.delete_old_segments() == 0
    assert (log.log_start_offset, [s.base_offset for s in log.segments]) == (2, [2, 3])


def test_retention_truncates_epoch_cache_from_start(tmp_path, clock):
    one = len(make_batch(1))
    log = open_log(tmp_path, clock, segment_bytes=one, retention_ms=HOUR, file_delete_delay_ms=0)
    for epoch in range(3):
        log.append_as_leader(make_batch(ts=NOW + epoch * HOUR), leader_epoch=epoch)
    log.update_high_watermark(3)
    clock.advance(2 * HOUR + 1)
    assert log.delete_old_segments() == 2
    assert log.log_start_offset == 2
    assert [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries] == [(2, 2)]


def test_delete_records_moves_log_start_and_deletes_whole_segments(tmp_path, clock):
    one = len(make_batch(2))
    log = open_log(tmp_path, clock, segment_bytes=one, file_delete_delay_ms=0)
    for _ in range(4):
        log.append_as_leader(make_batch(2), leader_epoch=0)
    log.update_high_watermark(6)
    with pytest.raises(OffsetOutOfRangeError):
        log.maybe_increment_log_start_offset(7)
    assert log.maybe_increment_log_start_offset(5)
    assert log.log_start_offset == 5
    assert [s.base_offset for s in log.segments] == [4, 6]
    assert not log.maybe_increment_log_start_offset(3)
    info = log.read(5, max_bytes=1 << 20)  # inside batch [4, 5]: the whole batch comes back
    assert read_header(region_bytes(info)).base_offset == 4
    assert log.fetch_offset_by_timestamp(-2).offset == 5


def test_log_start_offset_survives_reopen_via_argument(tmp_path, clock):
    log = open_log(tmp_path, clock)
    for _ in range(3):
        log.append_as_leader(make_batch(2), leader_epoch=0)
    log.update_high_watermark(6)
    log.maybe_increment_log_start_offset(3)
    log.flush()
    log.close()
    log = Log.open(tmp_path / "topic-0", config(), clock=clock, log_start_offset=3,
                   had_clean_shutdown=True, high_watermark=6)
    assert (log.log_start_offset, log.high_watermark, log.log_end_offset) == (3, 6, 6)


# --- flushing --------------------------------------------------------------------------------


def test_flush_advances_recovery_point(tmp_path, clock):
    log = open_log(tmp_path, clock)
    log.append_as_leader(make_batch(3), leader_epoch=0)
    assert log.recovery_point == 0 and log.num_unflushed_messages == 3
    log.flush()
    assert log.recovery_point == 3 and log.num_unflushed_messages == 0


def test_needs_flush_after_roll_and_by_policy(tmp_path, clock):
    one = len(make_batch(1))
    log = open_log(tmp_path, clock, segment_bytes=one)
    log.append_as_leader(make_batch(), leader_epoch=0)
    assert not log.needs_flush(clock.time_ms())
    log.append_as_leader(make_batch(), leader_epoch=0)  # rolls
    assert log.needs_flush(clock.time_ms())
    assert log.flush_if_needed(clock.time_ms())
    assert log.recovery_point == 1  # the rolled segment only
    assert not log.needs_flush(clock.time_ms())

    log = open_log(tmp_path, clock, name="topic-1", flush_messages=3, flush_ms=HOUR)
    log.append_as_leader(make_batch(2), leader_epoch=0)
    assert not log.needs_flush(clock.time_ms())
    log.append_as_leader(make_batch(1), leader_epoch=0)
    assert log.needs_flush(clock.time_ms())
    log.flush_if_needed(clock.time_ms())
    assert log.recovery_point == 3
    log.append_as_leader(make_batch(1), leader_epoch=0)
    assert not log.needs_flush(clock.time_ms())
    clock.advance(HOUR)
    assert log.needs_flush(clock.time_ms())


def test_flush_up_to_offset(tmp_path, clock):
    log = open_log(tmp_path, clock)
    log.append_as_leader(make_batch(3), leader_epoch=0)
    log.flush(2)
    assert log.recovery_point == 2
    log.flush(1)
    assert log.recovery_point == 2


# --- reopening -------------------------------------------------------------------------------


def test_clean_reopen_keeps_everything(tmp_path, clock):
    one = len(make_batch(2))
    log = open_log(tmp_path, clock, segment_bytes=3 * one)
    written = []
    for epoch in range(7):
        b = make_batch(2)
        log.append_as_leader(b, leader_epoch=epoch // 3)
        written.append(bytes(b))
    log.flush()
    log.close()
    log = Log.open(tmp_path / "topic-0", config(segment_bytes=3 * one), clock=clock, had_clean_shutdown=True)
    assert log.log_end_offset == 14 and log.recovery_point == 14
    assert read_all(log) == written
    assert [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries] == [(0, 0), (1, 6), (2, 12)]
    log.append_as_leader(make_batch(1), leader_epoch=2)
    assert log.log_end_offset == 15
    # the reopened active segment got its full index size back: no roll on the next append
    assert [s.base_offset for s in log.segments] == [0, 6, 12]


def test_open_removes_stray_leftovers(tmp_path, clock):
    log = open_log(tmp_path, clock)
    log.append_as_leader(make_batch(2), leader_epoch=0)
    log.close()
    d = tmp_path / "topic-0"
    (d / "00000000000000000050.log.deleted").write_bytes(b"x")
    (d / "00000000000000000060.log.cleaned").write_bytes(b"x")
    (d / "00000000000000000070.log.swap").write_bytes(b"")  # after a .cleaned offset: invalid
    (d / "00000000000000000099.index").write_bytes(b"")  # orphan index
    (d / "leader-epoch-checkpoint.tmp").write_bytes(b"garbage")
    log = Log.open(d, config(), clock=clock, had_clean_shutdown=True)
    names = sorted(p.name for p in d.iterdir())
    assert not [n for n in names if n.endswith((".deleted", ".cleaned", ".swap", ".tmp"))]
    assert "00000000000000000099.index" not in names
    assert log.log_end_offset == 2


def test_open_completes_an_interrupted_swap(tmp_path, clock):
    log = open_log(tmp_path, clock)
    for _ in range(3):
        log.append_as_leader(make_batch(2), leader_epoch=0)
    log.close()
    d = tmp_path / "topic-0"
    # A compaction that replaced segment 0 by a swap holding only the last batch.
    data = (d / "00000000000000000000.log").read_bytes()
    last = data[-len(make_batch(2)):]
    (d / "00000000000000000000.log.swap").write_bytes(last)
    log = Log.open(d, config(), clock=clock, had_clean_shutdown=True)
    assert read_header(read_all(log, start=4)[0]).base_offset == 4
    assert log.log_end_offset == 6
    assert not list(d.glob("*.swap"))


def test_topic_id_written_and_checked(tmp_path, clock):
    topic_id = uuid.uuid4()
    log = Log.open(tmp_path / "topic-0", config(), clock=clock, topic_id=topic_id)
    assert (tmp_path / "topic-0" / "partition.metadata").exists()
    log.close()
    log = Log.open(tmp_path / "topic-0", config(), clock=clock, had_clean_shutdown=True)
    assert log.topic_id == topic_id
    log.close()
    with pytest.raises(InconsistentTopicIdError):
        Log.open(tmp_path / "topic-0", config(), clock=clock, topic_id=uuid.uuid4())


def test_topic_partition_from_directory_name(tmp_path, clock):
    log = Log.open(tmp_path / "my-topic-with-dashes-12", config(), clock=clock)
    assert log.topic_partition == TopicPartition("my-topic-with-dashes", 12)


def test_closed_log_refuses_appends(tmp_path, clock):
    log = open_log(tmp_path, clock)
    log.close()
    with pytest.raises(KafkaStorageError):
        log.append_as_leader(make_batch(), leader_epoch=0)


def test_delete_removes_the_directory(tmp_path, clock):
    log = open_log(tmp_path, clock)
    log.append_as_leader(make_batch(), leader_epoch=0)
    log.delete()
    assert not (tmp_path / "topic-0").exists()


def test_flush_in_a_worker_thread_beside_appends_rolls_and_retention(tmp_path, clock):
    import threading

    one = len(make_batch(1))
    log = open_log(tmp_path, clock, segment_bytes=4 * one, retention_bytes=20 * one,
                   file_delete_delay_ms=0)
    errors = []
    stop = threading.Event()

    def flusher():
        while not stop.is_set():
            try:
                log.flush()
            except Exception as e:  # pragma: no cover - the failure being tested for
                errors.append(e)

    thread = threading.Thread(target=flusher)
    thread.start()
    try:
        for i in range(400):
            log.append_as_leader(make_batch(1), leader_epoch=0)
            log.update_high_watermark(log.log_end_offset)
            if i % 50 == 0:
                log.delete_old_segments()
            if i % 97 == 96:
                log.truncate_to(log.log_end_offset - 2)
    finally:
        stop.set()
        thread.join()
    assert not errors
    log.flush()
    assert log.recovery_point == log.log_end_offset
    assert len(read_all(log)) == (log.log_end_offset - log.log_start_offset)


def test_writeback_of_the_active_segment_keeps_blocks_only_ahead_of_it(tmp_path, clock):
    """The writeback step (Log.writeback_due / start_writeback, which the broker runs in a worker
    thread) allocates blocks ahead of the active segment only, within segment.bytes; a roll gives
    the old segment's back, and every file's size stays its batches."""
    log = open_log(tmp_path, clock, **{"segment.bytes": 20 << 20, "max.message.bytes": 2 << 20})
    batch = make_batch(1, value_size=1 << 20)
    due = 0
    for _ in range(30):  # 30 MiB: one roll at 20 MiB
        log.append_as_leader(bytearray(batch), leader_epoch=0)
        if log.writeback_due():
            due += 1
            log.start_writeback()
    assert due >= 2 and len(log.segments) == 2
    old, active = (s.log for s in log.segments)
    blocks = [os.stat(r.path).st_blocks * 512 for r in (old, active)]
    assert [os.path.getsize(r.path) for r in (old, active)] == [old.size_in_bytes, active.size_in_bytes]
    assert blocks[0] < old.size_in_bytes + (1 << 20)  # trimmed on roll
    if blocks[1] > active.size_in_bytes + (1 << 20):  # preallocated (the file system can)
        assert blocks[1] <= (20 << 20) + (1 << 20)  # never past segment.bytes
    log.close()
    assert os.stat(active.path).st_blocks * 512 < active.size_in_bytes + (1 << 20)


def test_a_rolled_segment_gives_its_blocks_ahead_back_in_the_flush_after_the_roll(tmp_path, clock):
    """A roll by segment.ms leaves a segment far from segment.bytes, with blocks allocated ahead
    of it: the roll (on the event loop) keeps them, the flush that follows it (a worker thread)
    gives them back — on a `discard` mount that truncate waits for the device."""
    log = open_log(tmp_path, clock, **{"segment.ms": 60_000, "max.message.bytes": 2 << 20})
    batch = make_batch(1, value_size=1 << 20)
    for _ in range(9):  # past one writeback step: blocks allocated ahead
        log.append_as_leader(bytearray(batch), leader_epoch=0)
    assert log.writeback_due()
    log.start_writeback()
    old = log.segments[0].log
    if os.stat(old.path).st_blocks * 512 < old.size_in_bytes + (8 << 20):
        pytest.skip("this file system does not preallocate (fallocate KEEP_SIZE)")
    clock.advance(61_000)
    log.append_as_leader(make_batch(1, ts=NOW + 61_000), leader_epoch=0)  # rolls by time
    assert len(log.segments) == 2 and os.path.getsize(old.path) == old.size_in_bytes
    assert os.stat(old.path).st_blocks * 512 > old.size_in_bytes + (8 << 20)  # the roll kept them
    log.flush_if_needed(clock.time_ms())
    assert os.stat(old.path).st_blocks * 512 < old.size_in_bytes + (1 << 20)
    assert [h.base_offset for _, h in old.batches()] == list(range(9))
    log.close()
