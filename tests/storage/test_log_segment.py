from __future__ import annotations

import os
import random
import shutil
import struct

import crc32c
import pytest
from batches import BASE_TIMESTAMP as T0
from batches import append_batch, expected_indexes, make_batch, offset_pairs, time_pairs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logbroker.clock import ManualClock
from logbroker.records.batch import read_header
from logbroker.storage.abstract_index import CorruptIndexError, IndexFullError
from logbroker.storage.log_segment import (
    LogSegment,
    LogSegmentOffsetOverflowError,
    log_file,
    offset_index_file,
    time_index_file,
)
from logbroker.storage.values import TimestampAndOffset

SMALL_INDEX = 64 * 1024


def open_segment(directory, base_offset=0, *, clock=None, **kwargs) -> LogSegment:
    kwargs.setdefault("max_index_size", SMALL_INDEX)
    return LogSegment.open(directory, base_offset, clock=clock or ManualClock(), **kwargs)


def random_batches(rng: random.Random, base_offset: int, n: int, *, max_value: int = 3000,
                   gaps: bool = True) -> list[bytes]:
    """n batches of 1-5 records, random sizes, occasional offset gaps and out-of-order timestamps."""
    out, offset = [], base_offset
    ts = T0
    for _ in range(n):
        count = rng.randint(1, 5)
        timestamps = [ts + rng.randint(-50, 100) for _ in range(count)]
        ts += rng.randint(-20, 60)
        out.append(make_batch(offset, count, timestamps=timestamps,
                              value_size=rng.randint(1, max_value) // count))
        offset += count + (rng.randint(0, 3) if gaps and rng.random() < 0.3 else 0)
    return out


def fill(segment: LogSegment, batches: list[bytes]) -> None:
    for data in batches:
        append_batch(segment, data)


def batch_at(log_bytes: bytes, position: int):
    return read_header(log_bytes, position)


# --- the format, byte by byte -------------------------------------------------------------------

def test_segment_files_match_the_spec_byte_by_byte(tmp_path):
    base = 1000
    batches = random_batches(random.Random(7), base, 80)
    segment = open_segment(tmp_path, base, index_interval_bytes=4096)
    fill(segment, batches)
    layout = expected_indexes(batches, 4096)
    assert len(layout.offset_entries) > 10

    # while active: one entry per append that starts more than 4096 bytes after the last entry
    assert offset_pairs(segment.offset_index) == layout.offset_entries
    assert time_pairs(segment.time_index) == layout.time_entries
    segment.close()

    log_bytes = log_file(tmp_path, base).read_bytes()
    assert log_bytes == b"".join(batches)
    # .log: v2 batches back to back, each length-prefixed, magic 2, CRC-32C over attributes..end
    position, offsets = 0, []
    while position < len(log_bytes):
        base_offset, batch_length, _, magic, crc = struct.unpack_from(">qiibI", log_bytes, position)
        end = position + 12 + batch_length
        assert magic == 2 and crc == crc32c.crc32c(log_bytes[position + 21:end])
        offsets.append(base_offset)
        position = end
    assert position == len(log_bytes) and offsets == [read_header(b).base_offset for b in batches]
    names = sorted(os.listdir(tmp_path))
    assert names == ["00000000000000001000.index", "00000000000000001000.log",
                     "00000000000000001000.timeindex"]

    # .index: trimmed, 8-byte big-endian (relative offset, position) entries
    raw_index = offset_index_file(tmp_path, base).read_bytes()
    assert raw_index == b"".join(struct.pack(">ii", o - base, p) for o, p in layout.offset_entries)
    for offset, position in layout.offset_entries:
        # what Kafka's dump-log checks: the entry's offset is the last offset of the batch there
        assert batch_at(log_bytes, position).last_offset == offset

    # .timeindex: trimmed, 12-byte (timestamp, relative offset), plus the final entry from close
    final = [layout.final_time_entry] if layout.final_time_entry else []
    time_entries = layout.time_entries + final
    raw_time = time_index_file(tmp_path, base).read_bytes()
    assert raw_time == b"".join(struct.pack(">qi", t, o - base) for t, o in time_entries)
    timestamps = [t for t, _ in time_entries]
    assert timestamps == sorted(set(timestamps))  # strictly increasing
    assert time_entries[-1][0] == max(read_header(b).max_timestamp for b in batches)


def test_first_append_never_gets_an_index_entry(tmp_path):
    segment = open_segment(tmp_path, index_interval_bytes=0)
    append_batch(segment, make_batch(0, 1))
    assert segment.offset_index.entries == 0
    append_batch(segment, make_batch(1, 1))
    first = len(make_batch(0, 1))
    assert offset_pairs(segment.offset_index) == [(1, first)]


def test_index_rule_is_strictly_more_than_the_interval(tmp_path):
    one = make_batch(0, 1)
    segment = open_segment(tmp_path, index_interval_bytes=len(one))
    append_batch(segment, one)
    append_batch(segment, make_batch(1, 1))  # exactly the interval since the start: no entry
    assert segment.offset_index.entries == 0
    append_batch(segment, make_batch(2, 1))
    assert offset_pairs(segment.offset_index) == [(2, 2 * len(one))]


def test_one_append_of_several_batches_maps_its_last_offset_to_its_start(tmp_path):
    segment = open_segment(tmp_path, index_interval_bytes=10)
    append_batch(segment, make_batch(0, 1))
    chunk = make_batch(1, 2) + make_batch(3, 2)
    segment.append(largest_offset=4, largest_timestamp=T0, offset_of_max_timestamp=4, records=chunk)
    assert offset_pairs(segment.offset_index) == [(4, len(make_batch(0, 1)))]


@pytest.mark.parametrize("trimmed", [True, False])
def test_reopen_gives_the_same_lookups(tmp_path, trimmed):
    base = 50
    batches = random_batches(random.Random(3), base, 60, max_value=600)
    segment = open_segment(tmp_path, base, index_interval_bytes=500)
    fill(segment, batches)
    next_offset = read_header(batches[-1]).next_offset
    offsets = range(base, next_offset + 2)
    before = [segment.read(o, 10**6) for o in offsets]
    targets = range(T0 - 60, T0 + 3000, 37)
    by_time = [segment.find_offset_by_timestamp(t) for t in targets]
    if trimmed:
        segment.close()
        assert os.path.getsize(offset_index_file(tmp_path, base)) == 8 * len(
            expected_indexes(batches, 500).offset_entries)
    else:
        segment.close_handlers()  # a crash: preallocated, untrimmed indexes
        assert os.path.getsize(offset_index_file(tmp_path, base)) == SMALL_INDEX
    reopened = open_segment(tmp_path, base, index_interval_bytes=500, file_already_exists=True)
    reopened.sanity_check()
    after = [reopened.read(o, 10**6) for o in offsets]
    assert [(d and d.region.position, d and d.region.size) for d in after] == \
           [(d and d.region.position, d and d.region.size) for d in before]
    assert [reopened.find_offset_by_timestamp(t) for t in targets] == by_time
    assert reopened.read_next_offset() == next_offset
    true_max = max(read_header(b).max_timestamp for b in batches)
    if trimmed:  # close wrote the final time index entry
        assert reopened.max_timestamp_so_far == true_max
    else:  # a crash loses it: the last entry is all a reopen knows (recovery would restore it)
        assert reopened.max_timestamp_so_far == expected_indexes(batches, 500).time_entries[-1][0]
    reopened.close()


# --- reads ---------------------------------------------------------------------------------------

@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(specs=st.lists(st.tuples(st.integers(1, 6), st.integers(0, 400), st.integers(0, 3)),
                      min_size=1, max_size=40),
       interval=st.sampled_from([0, 100, 700, 4096]),
       base=st.sampled_from([0, 17, 2**40]))
def test_any_offset_reads_from_the_batch_holding_it(tmp_path_factory, specs, interval, base):
    directory = tmp_path_factory.mktemp("seg")
    segment = open_segment(directory, base, index_interval_bytes=interval)
    expected = []  # (base, last, position, size)
    offset, position = base, 0
    for count, value_size, gap in specs:
        data = make_batch(offset, count, value_size=value_size)
        append_batch(segment, data)
        expected.append((offset, offset + count - 1, position, len(data)))
        position += len(data)
        offset += count + gap
    for target in range(base, offset + 2):
        info = segment.read(target, 10**6)
        holding = next((e for e in expected if e[1] >= target), None)
        if holding is None:
            assert info is None
        else:
            assert info.region.position == holding[2]
            assert info.region.size == position - holding[2]
            assert info.fetch_offset == target
        assert segment.translate_offset(target) == (holding and (holding[2], holding[3]))
    assert segment.read_next_offset() == expected[-1][1] + 1
    segment.close_handlers()
    shutil.rmtree(directory)


def test_read_limits(tmp_path):
    segment = open_segment(tmp_path)
    a, b, c = make_batch(0, 3), make_batch(3, 3), make_batch(6, 3)
    fill(segment, [a, b, c])
    info = segment.read(4, 10)  # inside b, max_size smaller than the batch
    assert (info.region.position, info.region.size, info.first_entry_incomplete) == (len(a), 10, True)
    info = segment.read(4, 10, min_one_message=True)
    assert (info.region.size, info.first_entry_incomplete) == (len(b), False)
    info = segment.read(0, 10**6, max_position=len(a) + len(b))
    assert (info.region.position, info.region.size) == (0, len(a) + len(b))
    info = segment.read(0, 0)
    assert info.region is None and info.size == 0 and info.fetch_offset == 0
    info = segment.read(6, 10**6, max_position=len(a) + len(b))  # at the high watermark
    assert info.region is None
    assert segment.read(9, 100) is None
    with pytest.raises(ValueError):
        segment.read(0, -1)


def test_region_bytes_are_the_batches(tmp_path):
    segment = open_segment(tmp_path)
    batches = [make_batch(i * 2, 2) for i in range(5)]
    fill(segment, batches)
    region = segment.read(5, 10**6).region
    assert os.pread(region.fd, region.size, region.position) == b"".join(batches[2:])


def test_find_offset_by_timestamp_matches_a_full_scan(tmp_path):
    rng = random.Random(11)
    batches = random_batches(rng, 0, 120, max_value=400)
    segment = open_segment(tmp_path, index_interval_bytes=300)
    fill(segment, batches)
    records = []  # (offset, timestamp) of every record, from the batches we wrote
    for data in batches:
        h = read_header(data)
        from logbroker.records.record import decode_records
        records += [(r.offset, r.timestamp) for r in decode_records(
            data[61:], h.records_count, base_offset=h.base_offset, base_timestamp=h.base_timestamp)]
    for target in range(T0 - 100, T0 + 3500, 13):
        for starting in (0, 77):
            hit = next(((o, t) for o, t in records if t >= target and o >= starting), None)
            found = segment.find_offset_by_timestamp(target, starting)
            assert found == (hit and TimestampAndOffset(hit[1], hit[0], 0))


# --- recovery ------------------------------------------------------------------------------------

INTERVAL = 200


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """A closed segment of small batches, and its files' bytes."""
    directory = tmp_path_factory.mktemp("reference")
    batches = random_batches(random.Random(5), 100, 14, max_value=120, gaps=False)
    segment = open_segment(directory, 100, index_interval_bytes=INTERVAL)
    fill(segment, batches)
    segment.close()
    return {
        "batches": batches,
        "log": log_file(directory, 100).read_bytes(),
        "index": offset_index_file(directory, 100).read_bytes(),
        "timeindex": time_index_file(directory, 100).read_bytes(),
    }


def expected_after_recovery(batches):
    layout = expected_indexes(batches, INTERVAL)
    final = [layout.final_time_entry] if layout.final_time_entry else []
    return layout.offset_entries, layout.time_entries + final


def write_segment_files(directory, reference, log_bytes, index_state):
    log_file(directory, 100).write_bytes(log_bytes)
    for name, path in (("index", offset_index_file(directory, 100)),
                       ("timeindex", time_index_file(directory, 100))):
        if index_state == "stale":
            path.write_bytes(reference[name])
        elif index_state == "zeroed":
            path.write_bytes(bytes(len(reference[name]) or 8))
        elif index_state == "garbage":
            path.write_bytes(random.Random(1).randbytes(SMALL_INDEX))
        else:
            path.unlink(missing_ok=True)


@pytest.mark.parametrize("index_state", ["stale", "zeroed", "garbage", "deleted"])
def test_recovery_keeps_exactly_the_complete_batches_at_every_cut(tmp_path, reference, index_state):
    batches = reference["batches"]
    full = reference["log"]
    ends = [sum(map(len, batches[:k])) for k in range(len(batches) + 1)]
    for cut in range(ends[-4], len(full) + 1):
        kept = max(k for k, end in enumerate(ends) if end <= cut)
        write_segment_files(tmp_path, reference, full[:cut], index_state)
        segment = open_segment(tmp_path, 100, index_interval_bytes=INTERVAL, file_already_exists=True)
        seen = []
        truncated = segment.recover(1 << 20, on_batch=lambda p, h: seen.append((p, h.base_offset)))
        assert truncated == cut - ends[kept]
        assert log_file(tmp_path, 100).read_bytes() == full[:ends[kept]]
        offset_entries, time_entries = expected_after_recovery(batches[:kept])
        assert offset_pairs(segment.offset_index) == offset_entries
        assert time_pairs(segment.time_index) == time_entries
        assert seen == [(ends[k], read_header(batches[k]).base_offset) for k in range(kept)]
        assert segment.read_next_offset() == read_header(batches[kept - 1]).next_offset
        if cut < len(full):
            segment.close_handlers()  # no fsync: keeps the loop fast
            continue
        segment.close()  # nothing lost: the files are the reference files
        assert offset_index_file(tmp_path, 100).read_bytes() == reference["index"]
        assert time_index_file(tmp_path, 100).read_bytes() == reference["timeindex"]


def test_recovery_truncates_appended_garbage(tmp_path, reference):
    for seed in range(20):
        garbage = random.Random(seed).randbytes(random.Random(seed).randint(1, 300))
        write_segment_files(tmp_path, reference, reference["log"] + garbage, "stale")
        segment = open_segment(tmp_path, 100, index_interval_bytes=INTERVAL, file_already_exists=True)
        assert segment.recover(1 << 20) == len(garbage)
        segment.close()
        assert log_file(tmp_path, 100).read_bytes() == reference["log"]
        assert offset_index_file(tmp_path, 100).read_bytes() == reference["index"]
        assert time_index_file(tmp_path, 100).read_bytes() == reference["timeindex"]


def corrupt_and_recover(tmp_path, reference, k, patch, **recover_kwargs):
    """Apply patch(bytearray, position) to batch k, recover, and check the cut is at batch k."""
    batches = reference["batches"]
    position = sum(map(len, batches[:k]))
    log_bytes = bytearray(reference["log"])
    patch(log_bytes, position)
    write_segment_files(tmp_path, reference, bytes(log_bytes), "stale")
    segment = open_segment(tmp_path, 100, index_interval_bytes=INTERVAL, file_already_exists=True)
    truncated = segment.recover(recover_kwargs.pop("max_message_size", 1 << 20), **recover_kwargs)
    assert truncated == len(log_bytes) - position
    assert log_file(tmp_path, 100).read_bytes() == reference["log"][:position]
    offset_entries, time_entries = expected_after_recovery(batches[:k])
    assert offset_pairs(segment.offset_index) == offset_entries
    assert time_pairs(segment.time_index) == time_entries
    segment.close()


def _flip_last_byte_of_batch(data, position):
    size = struct.unpack_from(">i", data, position + 8)[0] + 12
    data[position + size - 1] ^= 0x01


def test_recovery_truncates_at_a_bad_crc_in_the_middle(tmp_path, reference):
    corrupt_and_recover(tmp_path, reference, 6, _flip_last_byte_of_batch)


def test_recovery_truncates_at_a_bad_magic(tmp_path, reference):
    def patch(data, position):  # magic lies outside the CRC
        data[position + 16] = 1
    corrupt_and_recover(tmp_path, reference, 4, patch)


def test_recovery_truncates_at_offsets_that_go_back(tmp_path, reference):
    def patch(data, position):  # baseOffset lies outside the CRC too
        struct.pack_into(">q", data, position, 100)
    corrupt_and_recover(tmp_path, reference, 3, patch)


def test_recovery_truncates_at_a_batch_above_max_message_size(tmp_path, reference):
    sizes = [len(b) for b in reference["batches"]]
    k = max(range(2, len(sizes)), key=lambda i: sizes[i])
    limit = max(sizes[:k])
    assert sizes[k] > limit
    corrupt_and_recover(tmp_path, reference, k, lambda data, position: None, max_message_size=limit)


def test_recovery_of_a_preallocated_segment_after_a_crash(tmp_path):
    batches = [make_batch(i * 3, 3, value_size=200) for i in range(10)]
    segment = open_segment(tmp_path, index_interval_bytes=500, preallocate=True, init_file_size=1 << 16)
    fill(segment, batches)
    segment.close_handlers()
    assert os.path.getsize(log_file(tmp_path, 0)) == 1 << 16
    segment = open_segment(tmp_path, index_interval_bytes=500, file_already_exists=True, preallocate=True,
                           init_file_size=1 << 16)
    assert segment.size == 1 << 16
    assert segment.recover(1 << 20) == (1 << 16) - sum(map(len, batches))
    assert log_file(tmp_path, 0).read_bytes() == b"".join(batches)
    assert offset_pairs(segment.offset_index) == expected_indexes(batches, 500).offset_entries


def test_recovery_refuses_offsets_that_overflow_the_segment(tmp_path):
    log_file(tmp_path, 0).write_bytes(make_batch(0, 1) + make_batch(2**31, 1))
    segment = open_segment(tmp_path, file_already_exists=True)
    with pytest.raises(LogSegmentOffsetOverflowError):
        segment.recover(1 << 20)


def test_recovered_active_segment_accepts_appends_after_resize(tmp_path, reference):
    write_segment_files(tmp_path, reference, reference["log"], "deleted")
    segment = open_segment(tmp_path, 100, index_interval_bytes=INTERVAL, file_already_exists=True)
    segment.recover(1 << 20)
    assert segment.offset_index.is_full  # trimmed, as Kafka leaves it
    segment.resize_indexes(SMALL_INDEX)
    next_offset = segment.read_next_offset()
    append_batch(segment, make_batch(next_offset, 1))
    append_batch(segment, make_batch(next_offset + 1, 1))
    batches = reference["batches"] + [make_batch(next_offset, 1), make_batch(next_offset + 1, 1)]
    assert offset_pairs(segment.offset_index) == expected_indexes(batches, INTERVAL).offset_entries


# --- truncation ----------------------------------------------------------------------------------

def test_truncate_to_drops_the_batch_holding_the_offset_and_everything_after(tmp_path):
    batches = [make_batch(i * 3, 3, timestamps=[T0 + 10 * i, T0 + 10 * i + 500 * (i == 4), T0]) for i in range(8)]
    segment = open_segment(tmp_path, index_interval_bytes=100)
    fill(segment, batches)
    assert segment.max_timestamp_so_far == T0 + 540
    removed = segment.truncate_to(13)  # inside batch 4 (offsets 12-14)
    kept = batches[:4]
    assert removed == sum(map(len, batches[4:]))
    assert log_file(tmp_path, 0).read_bytes() == b"".join(kept)
    assert offset_pairs(segment.offset_index) == expected_indexes(kept, 100).offset_entries
    assert all(o < 13 for _, o in time_pairs(segment.time_index))
    assert segment.max_timestamp_so_far == T0 + 30
    assert segment.offset_of_max_timestamp_so_far == 11
    assert segment.read_next_offset() == 12
    assert segment.offset_index.length == SMALL_INDEX  # full size again: it is the active segment
    append_batch(segment, make_batch(12, 1))  # no entry right after truncation (counter reset)
    assert segment.offset_index.last_offset < 12


def test_batches_appended_after_a_truncation_are_found_where_they_now_lie(tmp_path):
    """The positions of the last batches appended are remembered by first offset; a truncation
    must forget them, or a fetch from an offset that a new, larger batch now holds would start
    at the old position, in the middle of that batch."""
    segment = open_segment(tmp_path, index_interval_bytes=10**6)  # no index entries: memory only
    fill(segment, [make_batch(0, 1, value_size=100), make_batch(1, 1, value_size=100),
                   make_batch(2, 1, value_size=100)])
    assert segment.translate_offset(2)[0] == 2 * len(make_batch(0, 1, value_size=100))
    segment.truncate_to(1)
    replacement = make_batch(1, 3, value_size=700)  # offsets 1-3 in one batch
    append_batch(segment, replacement)
    first = len(make_batch(0, 1, value_size=100))
    for offset in (1, 2, 3):
        assert segment.translate_offset(offset) == (first, len(replacement))
        info = segment.read(offset, 10**6)
        assert info.region.position == first and info.region.size == len(replacement)
    assert segment.translate_offset(4) is None


def test_batches_appended_after_recovery_are_found_where_they_now_lie(tmp_path):
    batches = [make_batch(0, 1, value_size=100), make_batch(1, 1, value_size=100), make_batch(2, 1, value_size=100)]
    segment = open_segment(tmp_path, index_interval_bytes=10**6)
    fill(segment, batches)
    with open(log_file(tmp_path, 0), "r+b") as f:  # corrupt the second batch: recovery cuts there
        f.seek(len(batches[0]) + 70)
        f.write(b"\xff")
    segment.recover()
    replacement = make_batch(1, 2, value_size=900)
    append_batch(segment, replacement)
    assert segment.translate_offset(2) == (len(batches[0]), len(replacement))


def test_truncate_to_beyond_the_end_changes_nothing(tmp_path):
    segment = open_segment(tmp_path, index_interval_bytes=10)
    fill(segment, [make_batch(0, 2), make_batch(2, 2)])
    entries = offset_pairs(segment.offset_index)
    assert segment.truncate_to(4) == 0
    assert offset_pairs(segment.offset_index) == entries and segment.read_next_offset() == 4


def test_truncate_to_base_empties_the_segment_and_restarts_its_clock(tmp_path):
    clock = ManualClock()
    segment = open_segment(tmp_path, 10, clock=clock)
    fill(segment, [make_batch(10, 2, timestamp=-1), make_batch(12, 2, timestamp=-1)])
    clock.advance(1000)
    assert segment.truncate_to(10) > 0 and segment.size == 0
    assert segment.read_next_offset() == 10
    append_batch(segment, make_batch(10, 1, timestamp=-1))
    clock.advance(999)
    roll = dict(incoming_size=10, incoming_max_timestamp=-1, incoming_max_offset=11,
                segment_bytes=1 << 30, segment_ms=999)
    assert not segment.should_roll(now_ms=clock.time_ms(), **roll)
    assert segment.should_roll(now_ms=clock.time_ms() + 1, **roll)


# --- rolling -------------------------------------------------------------------------------------

ROLL = dict(incoming_max_offset=10, segment_bytes=1 << 30, segment_ms=7 * 24 * 3600 * 1000)


def test_should_roll_when_the_segment_would_exceed_segment_bytes(tmp_path):
    segment = open_segment(tmp_path)
    append_batch(segment, make_batch(0, 1))
    size = segment.size
    kw = dict(ROLL, incoming_max_timestamp=T0, now_ms=T0)
    assert not segment.should_roll(incoming_size=100, **dict(kw, segment_bytes=size + 100))
    assert segment.should_roll(incoming_size=101, **dict(kw, segment_bytes=size + 100))


def test_should_roll_on_segment_ms_from_the_first_batch_timestamp(tmp_path):
    clock = ManualClock(T0)
    segment = open_segment(tmp_path, clock=clock, rolling_jitter_ms=100)
    kw = dict(ROLL, incoming_size=10, now_ms=T0, segment_ms=1000)
    assert not segment.should_roll(incoming_max_timestamp=T0 + 10**9, **kw)  # empty: never on time
    append_batch(segment, make_batch(0, 1, timestamp=T0 + 5))
    assert not segment.should_roll(incoming_max_timestamp=T0 + 5 + 900, **kw)
    assert segment.should_roll(incoming_max_timestamp=T0 + 5 + 901, **kw)
    # after a reopen the first batch's timestamp is read back from the file
    segment.close()
    reopened = open_segment(tmp_path, clock=clock, rolling_jitter_ms=100, file_already_exists=True)
    assert reopened.offset_index.is_full  # trimmed: the log resizes the active segment's indexes
    reopened.resize_indexes(SMALL_INDEX)
    assert not reopened.should_roll(incoming_max_timestamp=T0 + 5 + 900, **kw)
    assert reopened.should_roll(incoming_max_timestamp=T0 + 5 + 901, **kw)


def test_should_roll_on_wall_clock_when_batches_have_no_timestamp(tmp_path):
    clock = ManualClock(T0)
    segment = open_segment(tmp_path, clock=clock)
    append_batch(segment, make_batch(0, 1, timestamp=-1))
    kw = dict(ROLL, incoming_size=10, incoming_max_timestamp=-1, segment_ms=1000)
    clock.advance(1000)
    assert not segment.should_roll(now_ms=clock.time_ms(), **kw)
    clock.advance(1)
    assert segment.should_roll(now_ms=clock.time_ms(), **kw)


def test_should_roll_when_an_index_is_full(tmp_path):
    kw = dict(ROLL, incoming_size=10, incoming_max_timestamp=T0, now_ms=T0)
    # 24 bytes: the offset index has 3 slots; the time index 2, full at 1 (the last is kept)
    segment = open_segment(tmp_path, max_index_size=24, index_interval_bytes=0)
    fill(segment, [make_batch(0, 1, timestamp=T0), make_batch(1, 1, timestamp=T0)])
    assert segment.offset_index.entries == 1 and segment.time_index.is_full
    assert segment.should_roll(**kw)
    other = tmp_path / "other"
    other.mkdir()
    segment = open_segment(other, max_index_size=24, index_interval_bytes=0)
    fill(segment, [make_batch(i, 1, timestamp=-1) for i in range(4)])  # no time index entries
    assert segment.offset_index.is_full and not segment.time_index.is_full
    assert segment.should_roll(**kw)


def test_should_roll_when_the_offset_does_not_fit(tmp_path):
    segment = open_segment(tmp_path, 5)
    append_batch(segment, make_batch(5, 1))
    kw = dict(ROLL, incoming_size=10, incoming_max_timestamp=T0, now_ms=T0)
    assert not segment.should_roll(**dict(kw, incoming_max_offset=5 + 2**31 - 1))
    assert segment.should_roll(**dict(kw, incoming_max_offset=5 + 2**31))
    with pytest.raises(LogSegmentOffsetOverflowError):
        append_batch(segment, make_batch(5 + 2**31, 1))
    assert segment.size == len(make_batch(5, 1))


def test_on_become_inactive_adds_the_final_time_entry_and_the_rolled_flush_trims(tmp_path):
    batches = [make_batch(i, 1, timestamp=T0 + i) for i in range(6)]
    interval = len(batches[0]) + 10  # an entry every other batch; the last gets none
    segment = open_segment(tmp_path, index_interval_bytes=interval)
    fill(segment, batches)
    layout = expected_indexes(batches, interval)
    assert layout.final_time_entry == (T0 + 5, 5)
    assert time_pairs(segment.time_index) == layout.time_entries
    segment.on_become_inactive()
    assert time_pairs(segment.time_index) == layout.time_entries + [layout.final_time_entry]
    with pytest.raises(IndexFullError):  # retired: no more entries, and no file I/O yet
        segment.offset_index.append(6, 999)
    assert os.path.getsize(offset_index_file(tmp_path, 0)) > 8 * len(layout.offset_entries)
    segment.flush(rolled=True)  # off the event loop, in the flush that follows the roll
    assert os.path.getsize(offset_index_file(tmp_path, 0)) == 8 * len(layout.offset_entries)
    assert os.path.getsize(time_index_file(tmp_path, 0)) == 12 * (len(layout.time_entries) + 1)
    segment.remap_trimmed_indexes()
    assert segment.offset_index.length == 8 * len(layout.offset_entries)
    assert time_pairs(segment.time_index) == layout.time_entries + [layout.final_time_entry]
    assert segment.translate_offset(5) is not None
    assert os.path.getsize(time_index_file(tmp_path, 0)) == 12 * (len(layout.time_entries) + 1)
    segment.close()  # the final entry is not added twice
    assert os.path.getsize(time_index_file(tmp_path, 0)) == 12 * (len(layout.time_entries) + 1)


# --- files ---------------------------------------------------------------------------------------

def test_change_file_suffixes_renames_all_three_files(tmp_path):
    segment = open_segment(tmp_path, 7)
    fill(segment, [make_batch(7, 2)])
    segment.close()
    segment = open_segment(tmp_path, 7, file_already_exists=True)  # indexes not mapped yet
    region = segment.read(7, 1000).region
    segment.change_file_suffixes("", ".deleted")
    assert sorted(os.listdir(tmp_path)) == [f"00000000000000000007{s}.deleted"
                                            for s in (".index", ".log", ".timeindex")]
    assert os.pread(region.fd, region.size, region.position) == make_batch(7, 2)
    assert segment.read_next_offset() == 9
    segment.change_file_suffixes(".deleted", "")
    assert sorted(os.listdir(tmp_path)) == [f"00000000000000000007{s}" for s in (".index", ".log", ".timeindex")]
    with pytest.raises(ValueError):
        segment.change_file_suffixes(".swap", "")
    segment.delete()
    assert os.listdir(tmp_path) == []


def test_new_segment_replaces_stale_files(tmp_path):
    log_file(tmp_path, 0).write_bytes(make_batch(0, 1)[:30])
    offset_index_file(tmp_path, 0).write_bytes(struct.pack(">ii", 5, 100))
    time_index_file(tmp_path, 0).write_bytes(struct.pack(">qi", T0, 5))
    segment = open_segment(tmp_path)
    assert segment.size == 0
    assert segment.offset_index.entries == 0 and segment.time_index.entries == 0
    assert os.path.getsize(offset_index_file(tmp_path, 0)) == SMALL_INDEX


def test_last_modified_and_largest_timestamp(tmp_path):
    segment = open_segment(tmp_path)
    append_batch(segment, make_batch(0, 1, timestamp=-1))
    segment.set_last_modified_ms(1_600_000_000_123)
    assert segment.last_modified_ms == 1_600_000_000_123
    assert segment.largest_timestamp == 1_600_000_000_123  # no record timestamps
    append_batch(segment, make_batch(1, 1, timestamp=T0))
    assert segment.largest_timestamp == T0


def test_sanity_check(tmp_path):
    segment = open_segment(tmp_path, index_interval_bytes=10)
    fill(segment, [make_batch(i, 1) for i in range(4)])
    segment.close()
    offset_index_file(tmp_path, 0).unlink()
    with pytest.raises(FileNotFoundError):
        open_segment(tmp_path, file_already_exists=True).sanity_check()
    segment = open_segment(tmp_path, index_interval_bytes=10, file_already_exists=True)
    segment.recover(1 << 20)
    segment.close()
    with open(log_file(tmp_path, 0), "r+b") as f:
        f.truncate(len(make_batch(0, 1)))  # the log lost data the index still points at
    with pytest.raises(CorruptIndexError):
        open_segment(tmp_path, file_already_exists=True).sanity_check()


def test_has_overflow_is_false_for_normal_segments(tmp_path):
    segment = open_segment(tmp_path, 3)
    assert not segment.has_overflow()
    append_batch(segment, make_batch(3, 4))
    assert not segment.has_overflow()
