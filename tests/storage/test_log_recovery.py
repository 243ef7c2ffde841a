"""Crash tests: a log cut at every byte of its last batches, followed by garbage, with its
indexes deleted or zeroed, is reopened without a clean shutdown; exactly the complete valid
batches must remain, with indexes as the append rule builds them, and appends must go on."""

from __future__ import annotations

import os
import random
import shutil

import pytest

from logbroker.clock import ManualClock
from logbroker.records.builder import build_batch
from logbroker.records.record_batch import iter_batches
from logbroker.storage.log import Log
from logbroker.storage.log_config import LogConfig
from logbroker.storage.log_segment import LogSegment

NOW = 1_700_000_000_000
INDEX_INTERVAL = 150
CONFIG = LogConfig.defaults().with_overrides({
    "segment.bytes": 2000, "index.interval.bytes": INDEX_INTERVAL, "segment.index.bytes": 1200,
    "file.delete.delay.ms": 0})


def make_batch(i: int) -> bytearray:
    rng = random.Random(i)
    n = rng.randint(1, 4)
    records = [(b"key-%d" % i, bytes(rng.randrange(256) for _ in range(rng.randint(0, 60))), (), NOW + i)
               for _ in range(n)]
    return bytearray(build_batch(records, compression="gzip" if i % 5 == 4 else "none"))


def build_crashed_log(directory, clock, batches: int = 40) -> tuple[Log, list[bytes]]:
    """A log with several segments, left open as a crash would leave it (untrimmed indexes)."""
    log = Log.open(directory, CONFIG, clock=clock)
    written = []
    for i in range(batches):
        buf = make_batch(i)
        log.append_as_leader(buf, leader_epoch=i // 10)
        written.append(bytes(buf))
    assert batches < 40 or len(log.segments) >= 3
    return log, written


def stored_batches(log: Log) -> list[bytes]:
    out = []
    for segment in log.segments:
        data = segment.log.read(0, segment.size)
        for position, header in iter_batches(data):
            out.append(data[position:position + header.size_in_bytes])
    return out


def expected_index(segment: LogSegment) -> list[tuple[int, int]]:
    """The offset index the append rule builds, batch by batch (architecture.md §2)."""
    entries, since = [], 0
    for position, header in segment.log.batches(0):
        if since > INDEX_INTERVAL:
            entries.append((header.last_offset, position))
            since = 0
        since += header.size_in_bytes
    return entries


def check_indexes(log: Log) -> None:
    for segment in log.segments:
        actual = [(e.offset, e.position) for e in segment.offset_index.all_entries()]
        assert actual == expected_index(segment), f"offset index of segment {segment.base_offset}"
        last_offsets = {h.last_offset: h.max_timestamp for _, h in segment.log.batches(0)}
        times = segment.time_index.all_entries()
        assert [t.timestamp for t in times] == sorted({t.timestamp for t in times})
        for entry in times:
            assert entry.offset in last_offsets
        if last_offsets:
            assert segment.max_timestamp_so_far == max(last_offsets.values())


def check_lookups(log: Log, written: list[bytes]) -> None:
    for batch in written:
        first = int.from_bytes(batch[:8], "big")
        info = log.read(first, max_bytes=1)
        assert os.pread(info.region.fd, info.region.size, info.region.position) == batch


def reopen(directory, clock, *, recovery_point: int = 0) -> Log:
    return Log.open(directory, CONFIG, clock=clock, recovery_point=recovery_point, had_clean_shutdown=False)


@pytest.fixture
def clock():
    return ManualClock(NOW)


@pytest.fixture
def crashed(tmp_path, clock):
    log, written = build_crashed_log(tmp_path / "orig" / "t-0", clock)
    yield tmp_path, log, written
    log.close_handles()


def copy_of(tmp_path, name: str):
    target = tmp_path / name / "t-0"
    shutil.copytree(tmp_path / "orig" / "t-0", target)
    return target


def test_reopen_after_crash_without_damage_keeps_everything(crashed, clock):
    tmp_path, _log, written = crashed
    log = reopen(copy_of(tmp_path, "copy"), clock)
    assert stored_batches(log) == written
    check_indexes(log)
    check_lookups(log, written)
    assert [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries] == \
        [(0, 0), (1, int.from_bytes(written[10][:8], "big")), (2, int.from_bytes(written[20][:8], "big")),
         (3, int.from_bytes(written[30][:8], "big"))]
    log.close_handles()


def test_recovery_truncates_torn_write_at_every_byte_of_the_last_batches(crashed, clock):
    tmp_path, log, written = crashed
    active = log.active_segment
    batch_starts = [pos for pos, _ in active.log.batches(0)]
    cut_from = batch_starts[-3]
    size = active.size
    name = active.log.path.name
    in_active = len(batch_starts)
    before_active = len(written) - in_active
    for cut in range(cut_from, size + 1):
        directory = copy_of(tmp_path, f"cut{cut}")
        os.truncate(directory / name, cut)
        recovered = reopen(directory, clock, recovery_point=active.base_offset)
        complete = sum(1 for i, start in enumerate(batch_starts)
                       if start + len(written[before_active + i]) <= cut)
        expected = written[:before_active + complete]
        assert stored_batches(recovered) == expected, f"cut at {cut}"
        last = expected[-1]
        assert recovered.log_end_offset == int.from_bytes(last[:8], "big") + int.from_bytes(last[23:27], "big") + 1
        check_indexes(recovered)
        info = recovered.append_as_leader(make_batch(999), leader_epoch=9)
        assert info.first_offset == recovered.log_end_offset - info.record_count
        assert stored_batches(recovered)[-1][16:] == bytes(make_batch(999))[16:]
        recovered.close_handles()
        shutil.rmtree(directory.parent)


@pytest.mark.parametrize("garbage", [b"\x00" * 100, bytes(range(256)) * 3, b"\x00\x00\x00\x00\x00\x00\x00\x07"])
def test_recovery_drops_garbage_after_the_last_batch(crashed, clock, garbage):
    tmp_path, log, written = crashed
    directory = copy_of(tmp_path, "garbage")
    with open(directory / log.active_segment.log.path.name, "ab") as f:
        f.write(garbage)
    recovered = reopen(directory, clock)
    assert stored_batches(recovered) == written
    check_indexes(recovered)
    recovered.close_handles()


def test_recovery_drops_a_random_garbage_tail_that_looks_like_a_batch(crashed, clock):
    tmp_path, log, written = crashed
    directory = copy_of(tmp_path, "fake")
    fake = bytearray(written[-1])
    fake[-3] ^= 0x55  # a whole batch whose CRC fails
    with open(directory / log.active_segment.log.path.name, "ab") as f:
        f.write(fake)
    recovered = reopen(directory, clock)
    assert stored_batches(recovered) == written
    recovered.close_handles()


def test_corrupt_batch_in_an_older_segment_truncates_there_and_deletes_later_segments(crashed, clock):
    tmp_path, log, written = crashed
    directory = copy_of(tmp_path, "corrupt")
    second = log.segments[1]
    positions = [pos for pos, _ in second.log.batches(0)]
    target = positions[2]
    path = directory / second.log.path.name
    data = bytearray(path.read_bytes())
    data[target + 70] ^= 0xFF
    path.write_bytes(data)
    recovered = reopen(directory, clock)
    kept = len(list(log.segments[0].log.batches(0))) + 2
    assert stored_batches(recovered) == written[:kept]
    assert [s.base_offset for s in recovered.segments] == [0, second.base_offset]
    assert sorted(p.name for p in directory.glob("*.log")) == sorted(
        s.log.path.name for s in recovered.segments)
    check_indexes(recovered)
    recovered.close_handles()


def test_segments_below_the_recovery_point_are_trusted(crashed, clock):
    tmp_path, log, written = crashed
    directory = copy_of(tmp_path, "trusted")
    recovered = reopen(directory, clock, recovery_point=log.active_segment.base_offset)
    assert stored_batches(recovered) == written
    recovered.close_handles()


@pytest.mark.parametrize("damage", ["delete", "zero"])
@pytest.mark.parametrize("which", [".index", ".timeindex"])
def test_deleted_or_zeroed_indexes_are_rebuilt(crashed, clock, damage, which):
    tmp_path, log, written = crashed
    directory = copy_of(tmp_path, f"{damage}{which}")
    for path in directory.glob(f"*{which}"):
        if damage == "delete":
            path.unlink()
        else:
            path.write_bytes(bytes(path.stat().st_size))
    recovered = reopen(directory, clock)
    assert stored_batches(recovered) == written
    check_indexes(recovered)
    check_lookups(recovered, written)
    assert recovered.fetch_offset_by_timestamp(NOW + 25).timestamp == NOW + 25
    recovered.close_handles()


def test_deleted_index_is_rebuilt_even_after_a_clean_shutdown(tmp_path, clock):
    log, written = build_crashed_log(tmp_path / "t-0", clock)
    log.flush()
    log.close()
    for path in (tmp_path / "t-0").glob("*.index"):
        path.unlink()
    reopened = Log.open(tmp_path / "t-0", CONFIG, clock=clock, had_clean_shutdown=True)
    assert stored_batches(reopened) == written
    check_indexes(reopened)
    reopened.close()


def test_lost_leader_epoch_checkpoint_is_rebuilt_from_recovered_batches(crashed, clock):
    tmp_path, log, written = crashed
    directory = copy_of(tmp_path, "epochs")
    (directory / "leader-epoch-checkpoint").unlink()
    recovered = reopen(directory, clock)
    assert recovered.leader_epoch_cache.entries == log.leader_epoch_cache.entries
    recovered.close_handles()


def test_preallocated_segment_zeros_are_dropped(tmp_path, clock):
    config = CONFIG.with_overrides({"preallocate": "true"})
    log = Log.open(tmp_path / "t-0", config, clock=clock)
    written = []
    for i in range(5):
        buf = make_batch(i)
        log.append_as_leader(buf, leader_epoch=0)
        written.append(bytes(buf))
    assert (tmp_path / "t-0" / "00000000000000000000.log").stat().st_size == config.segment_bytes
    log.close_handles()
    recovered = Log.open(tmp_path / "t-0", config, clock=clock, had_clean_shutdown=False)
    assert stored_batches(recovered) == written
    recovered.close()


def test_log_end_below_checkpointed_log_start_restarts_the_log(tmp_path, clock):
    log, _ = build_crashed_log(tmp_path / "t-0", clock, batches=5)
    log.close_handles()
    recovered = Log.open(tmp_path / "t-0", CONFIG, clock=clock, log_start_offset=1000, had_clean_shutdown=False)
    assert (recovered.log_start_offset, recovered.log_end_offset) == (1000, 1000)
    assert [s.base_offset for s in recovered.segments] == [1000]
    recovered.close()
