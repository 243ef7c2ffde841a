from __future__ import annotations

import bisect
import os
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logbroker.storage.abstract_index import CorruptIndexError, IndexFullError, InvalidOffsetError
from logbroker.storage.time_index import TimeIndex
from logbroker.storage.values import TimestampOffset

BASE = 500
T0 = 1_700_000_000_000


def test_new_time_index_size_is_a_multiple_of_12(tmp_path):
    index = TimeIndex(tmp_path / "a.timeindex", BASE, max_index_size=10 * 1024 * 1024)
    assert os.path.getsize(index.path) == 10 * 1024 * 1024 // 12 * 12
    assert index.entries == 0
    assert index.last_entry == TimestampOffset(-1, BASE)
    assert index.lookup(T0) == TimestampOffset(-1, BASE)


def test_entries_are_big_endian_timestamp_and_relative_offset(tmp_path):
    index = TimeIndex(tmp_path / "a.timeindex", BASE, max_index_size=120)
    index.maybe_append(T0, BASE + 7)
    index.maybe_append(T0 + 5, BASE + 9)
    raw = index.path.read_bytes()
    assert raw[:24] == struct.pack(">qiqi", T0, 7, T0 + 5, 9)
    assert index.all_entries() == [TimestampOffset(T0, BASE + 7), TimestampOffset(T0 + 5, BASE + 9)]
    assert index.entry(0) == TimestampOffset(T0, BASE + 7)


def test_maybe_append_adds_only_larger_timestamps(tmp_path):
    index = TimeIndex(tmp_path / "a.timeindex", BASE, max_index_size=120)
    index.maybe_append(T0, BASE + 1)
    index.maybe_append(T0, BASE + 4)   # same timestamp: ignored
    index.maybe_append(T0, BASE + 1)   # the same entry again (close after roll): ignored
    assert index.entries == 1
    with pytest.raises(ValueError):
        index.maybe_append(T0 - 1, BASE + 5)
    with pytest.raises(InvalidOffsetError):
        index.maybe_append(T0 + 1, BASE)
    index.maybe_append(T0 + 1, BASE + 1)  # a larger timestamp at the same offset is allowed
    assert index.last_entry == TimestampOffset(T0 + 1, BASE + 1)


def test_no_timestamp_never_makes_an_entry(tmp_path):
    index = TimeIndex(tmp_path / "a.timeindex", BASE, max_index_size=120)
    index.maybe_append(-1, BASE + 3)
    assert index.entries == 0


def test_last_slot_is_kept_for_the_final_entry(tmp_path):
    index = TimeIndex(tmp_path / "a.timeindex", BASE, max_index_size=36)  # 3 slots
    index.maybe_append(T0 + 1, BASE + 1)
    index.maybe_append(T0 + 2, BASE + 2)
    assert index.is_full
    with pytest.raises(IndexFullError):
        index.maybe_append(T0 + 3, BASE + 3)
    index.maybe_append(T0 + 3, BASE + 3, skip_full_check=True)
    assert index.entries == 3
    with pytest.raises(IndexFullError):
        index.maybe_append(T0 + 4, BASE + 4, skip_full_check=True)


@settings(max_examples=50, deadline=None)
@given(gaps=st.lists(st.tuples(st.integers(1, 1000), st.integers(0, 5)), min_size=1, max_size=2000),
       targets=st.lists(st.integers(T0 - 10, T0 + 2_000_000), max_size=30))
def test_lookup_agrees_with_bisect(tmp_path_factory, gaps, targets):
    path = tmp_path_factory.mktemp("tidx") / "a.timeindex"
    index = TimeIndex(path, BASE, max_index_size=(len(gaps) + 1) * 12)
    timestamps, offsets = [], []
    ts, offset = T0, BASE
    for dt, doff in gaps:
        ts += dt
        offset += doff
        index.maybe_append(ts, offset)
        timestamps.append(ts)
        offsets.append(offset)
    for target in targets + timestamps[:2] + timestamps[-2:]:
        slot = bisect.bisect_right(timestamps, target) - 1
        expected = (TimestampOffset(-1, BASE) if slot < 0
                    else TimestampOffset(timestamps[slot], offsets[slot]))
        assert index.lookup(target) == expected
    index.close_handler()


@pytest.mark.parametrize("offset, kept", [(BASE + 20, 1), (BASE + 25, 2), (BASE, 0), (BASE + 99, 3)])
def test_truncate_to_removes_entries_at_or_after_offset(tmp_path, offset, kept):
    index = TimeIndex(tmp_path / "a.timeindex", BASE, max_index_size=120)
    for i in range(1, 4):
        index.maybe_append(T0 + i, BASE + i * 10)
    index.truncate_to(offset)
    assert index.entries == kept
    assert index.last_entry == (TimestampOffset(T0 + kept, BASE + kept * 10) if kept
                                else TimestampOffset(-1, BASE))
    assert index.path.read_bytes()[kept * 12:] == bytes(120 - kept * 12)


def test_reopen_trimmed_and_untrimmed(tmp_path):
    trimmed, untrimmed = tmp_path / "t.timeindex", tmp_path / "u.timeindex"
    for path in (trimmed, untrimmed):
        index = TimeIndex(path, BASE, max_index_size=1200)
        for i in range(1, 21):
            index.maybe_append(T0 + i * 100, BASE + i)
        if path is trimmed:
            index.close()
        else:
            index.close_handler()
    assert os.path.getsize(trimmed) == 240 and os.path.getsize(untrimmed) == 1200
    for path in (trimmed, untrimmed):
        index = TimeIndex(path, BASE, max_index_size=1200)
        assert index.entries == 20
        assert index.last_entry == TimestampOffset(T0 + 2000, BASE + 20)
        assert index.lookup(T0 + 550) == TimestampOffset(T0 + 500, BASE + 5)
        index.sanity_check()


def test_single_zero_entry_survives_reopen(tmp_path):
    # Timestamp 0 at the base offset encodes as twelve zero bytes; a trimmed file of one entry
    # must still count it.
    path = tmp_path / "a.timeindex"
    index = TimeIndex(path, BASE, max_index_size=120)
    index.maybe_append(0, BASE)
    index.close()
    assert TimeIndex(path, BASE).last_entry == TimestampOffset(0, BASE)


def test_resize_keeps_last_entry(tmp_path):
    index = TimeIndex(tmp_path / "a.timeindex", BASE, max_index_size=120)
    index.maybe_append(T0, BASE + 1)
    index.trim_to_valid_size()
    assert index.length == 12 and index.is_full
    index.resize(120)
    assert index.last_entry == TimestampOffset(T0, BASE + 1) and not index.is_full


def test_sanity_check_rejects_out_of_order_last_entry(tmp_path):
    path = tmp_path / "a.timeindex"
    path.write_bytes(struct.pack(">qiqi", T0, 1, T0 - 1, 2))
    with pytest.raises(CorruptIndexError, match="a.timeindex"):
        TimeIndex(path, BASE).sanity_check()
    path.write_bytes(struct.pack(">qi", T0, -3))
    with pytest.raises(CorruptIndexError, match="less than the first offset"):
        TimeIndex(path, BASE).sanity_check()
    path.write_bytes(struct.pack(">qi", T0, 1) + b"\x01")
    with pytest.raises(CorruptIndexError, match="multiple of 12"):
        TimeIndex(path, BASE).sanity_check()
