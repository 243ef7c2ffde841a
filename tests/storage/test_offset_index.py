from __future__ import annotations

import bisect
import os
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logbroker.storage.abstract_index import (
    CorruptIndexError,
    IndexFullError,
    IndexOffsetOverflowError,
    InvalidOffsetError,
)
from logbroker.storage.offset_index import OffsetIndex
from logbroker.storage.values import OffsetPosition

BASE = 1000


def test_new_index_is_preallocated_and_empty(tmp_path):
    index = OffsetIndex(tmp_path / "a.index", BASE, max_index_size=1003)
    assert os.path.getsize(index.path) == 1000  # rounded down to a multiple of 8
    assert index.entries == 0
    assert index.max_entries == 125
    assert index.last_offset == BASE
    assert index.lookup(5000) == OffsetPosition(BASE, 0)
    assert index.all_entries() == []


def test_entries_are_big_endian_relative_offset_and_position(tmp_path):
    index = OffsetIndex(tmp_path / "a.index", BASE, max_index_size=64)
    index.append(1003, 100)
    index.append(1010, 4200)
    index.flush()
    raw = (tmp_path / "a.index").read_bytes()
    assert raw[:16] == struct.pack(">iiii", 3, 100, 10, 4200)
    assert raw[16:] == bytes(48)
    assert index.entry(1) == OffsetPosition(1010, 4200)
    assert index.last_entry == OffsetPosition(1010, 4200)
    with pytest.raises(IndexError):
        index.entry(2)


def test_lookup_returns_largest_entry_at_or_below_target(tmp_path):
    index = OffsetIndex(tmp_path / "a.index", BASE, max_index_size=4096)
    for i in range(1, 50):
        index.append(BASE + i * 10, i * 100)
    assert index.lookup(BASE) == OffsetPosition(BASE, 0)
    assert index.lookup(BASE + 9) == OffsetPosition(BASE, 0)
    assert index.lookup(BASE + 10) == OffsetPosition(BASE + 10, 100)
    assert index.lookup(BASE + 15) == OffsetPosition(BASE + 10, 100)
    assert index.lookup(BASE + 490) == OffsetPosition(BASE + 490, 4900)
    assert index.lookup(10**12) == OffsetPosition(BASE + 490, 4900)
    assert index.lookup(0) == OffsetPosition(BASE, 0)


@settings(max_examples=60, deadline=None)
@given(gaps=st.lists(st.integers(1, 50), min_size=1, max_size=3000),
       targets=st.lists(st.integers(-10, 160_000), min_size=1, max_size=50))
def test_lookup_agrees_with_bisect_across_warm_and_cold_sections(tmp_path_factory, gaps, targets):
    # More than 1024 entries puts the warm/cold split (8 KiB of entries) in play.
    path = tmp_path_factory.mktemp("idx") / "a.index"
    index = OffsetIndex(path, 0, max_index_size=len(gaps) * 8)
    offsets, offset = [], 0
    for i, gap in enumerate(gaps):
        offset += gap
        index.append(offset, i * 7)
        offsets.append(offset)
    assert index.is_full
    for target in targets + offsets[-3:] + offsets[:3]:
        slot = bisect.bisect_right(offsets, target) - 1
        expected = OffsetPosition(0, 0) if slot < 0 else OffsetPosition(offsets[slot], slot * 7)
        assert index.lookup(target) == expected
    index.close_handler()


def test_append_rejects_offsets_that_do_not_increase(tmp_path):
    index = OffsetIndex(tmp_path / "a.index", BASE, max_index_size=64)
    index.append(BASE + 5, 10)
    with pytest.raises(InvalidOffsetError):
        index.append(BASE + 5, 20)
    with pytest.raises(InvalidOffsetError):
        index.append(BASE + 4, 20)
    assert index.entries == 1


def test_append_rejects_offsets_that_do_not_fit_int32(tmp_path):
    index = OffsetIndex(tmp_path / "a.index", BASE, max_index_size=64)
    assert not index.can_append_offset(BASE - 1)
    assert index.can_append_offset(BASE + 2**31 - 1)
    assert not index.can_append_offset(BASE + 2**31)
    with pytest.raises(IndexOffsetOverflowError):
        index.append(BASE + 2**31, 10)
    assert index.entries == 0


def test_append_to_full_index_fails(tmp_path):
    index = OffsetIndex(tmp_path / "a.index", BASE, max_index_size=16)
    index.append(BASE + 1, 1)
    assert not index.is_full
    index.append(BASE + 2, 2)
    assert index.is_full
    with pytest.raises(IndexFullError):
        index.append(BASE + 3, 3)


@pytest.mark.parametrize("target, kept", [
    (BASE + 30, 2),   # an entry for exactly this offset: it goes, with everything after
    (BASE + 35, 3),   # no entry for it: keep up to the next smaller one
    (BASE + 5, 0),    # below every entry: empty
    (BASE + 500, 5),  # past the end: nothing changes
])
def test_truncate_to(tmp_path, target, kept):
    index = OffsetIndex(tmp_path / "a.index", BASE, max_index_size=80)
    for i in range(1, 6):
        index.append(BASE + i * 10, i * 100)
    index.truncate_to(target)
    assert index.entries == kept
    assert index.last_offset == (BASE + kept * 10 if kept else BASE)
    # dropped entries are zeroed so that a crash cannot bring them back
    raw = index.path.read_bytes()
    assert raw[kept * 8:] == bytes(80 - kept * 8)
    index.append(BASE + 1000, 9999)
    assert index.entries == kept + 1


def test_close_trims_and_reopen_reads_trimmed_file(tmp_path):
    path = tmp_path / "a.index"
    index = OffsetIndex(path, BASE, max_index_size=4096)
    for i in range(1, 11):
        index.append(BASE + i, i * 50)
    index.close()
    assert os.path.getsize(path) == 80
    reopened = OffsetIndex(path, BASE, max_index_size=4096)
    assert reopened.entries == 10
    assert reopened.is_full  # trimmed: the active segment must be resized to append again
    assert reopened.lookup(BASE + 7) == OffsetPosition(BASE + 7, 350)
    reopened.sanity_check()
    assert reopened.resize(4096)
    assert not reopened.is_full and reopened.entries == 10
    reopened.append(BASE + 11, 600)
    assert reopened.lookup(BASE + 100) == OffsetPosition(BASE + 11, 600)


def test_reopen_untrimmed_file_counts_entries_up_to_the_zeros(tmp_path):
    path = tmp_path / "a.index"
    index = OffsetIndex(path, BASE, max_index_size=1 << 20)
    for i in range(1, 3001):
        index.append(BASE + i, i * 50)
    index.truncate_to(BASE + 2001)
    index.close_handler()  # a crash: no trim
    assert os.path.getsize(path) == 1 << 20
    reopened = OffsetIndex(path, BASE, max_index_size=1 << 20)
    assert reopened.entries == 2000
    assert reopened.last_offset == BASE + 2000
    assert reopened.lookup(BASE + 2500) == OffsetPosition(BASE + 2000, 100_000)
    reopened.sanity_check()


def test_empty_trimmed_index_reopens(tmp_path):
    path = tmp_path / "a.index"
    OffsetIndex(path, BASE, max_index_size=4096).close()
    assert os.path.getsize(path) == 0
    reopened = OffsetIndex(path, BASE, max_index_size=4096)
    assert reopened.entries == 0 and reopened.lookup(BASE + 5) == OffsetPosition(BASE, 0)
    reopened.resize(4096)
    reopened.append(BASE + 5, 10)
    assert reopened.entries == 1


def test_reset_empties_and_restores_full_size(tmp_path):
    path = tmp_path / "a.index"
    index = OffsetIndex(path, BASE, max_index_size=4096)
    index.append(BASE + 1, 10)
    index.trim_to_valid_size()
    index.reset()
    assert index.entries == 0 and os.path.getsize(path) == 4096 and index.path.read_bytes() == bytes(4096)


def test_sanity_check_rejects_partial_entry(tmp_path):
    path = tmp_path / "a.index"
    path.write_bytes(struct.pack(">ii", 1, 10) + b"\x00\x00\x01")
    with pytest.raises(CorruptIndexError, match="a.index"):
        OffsetIndex(path, BASE).sanity_check()


def test_sanity_check_rejects_last_offset_below_base(tmp_path):
    path = tmp_path / "a.index"
    path.write_bytes(struct.pack(">iiii", 1, 10, -5, 20))
    with pytest.raises(CorruptIndexError, match="less than the base offset"):
        OffsetIndex(path, BASE).sanity_check()


def test_read_only_index_does_not_change_the_file(tmp_path):
    path = tmp_path / "a.index"
    index = OffsetIndex(path, BASE, max_index_size=4096)
    index.append(BASE + 3, 30)
    index.close_handler()
    ro = OffsetIndex(path, BASE, writable=False)
    assert ro.all_entries() == [OffsetPosition(BASE + 3, 30)]
    ro.close()
    assert os.path.getsize(path) == 4096
    with pytest.raises(FileNotFoundError):
        OffsetIndex(tmp_path / "missing.index", BASE, writable=False)


def test_rename_and_delete(tmp_path):
    index = OffsetIndex(tmp_path / "a.index", BASE, max_index_size=64)
    index.append(BASE + 1, 5)
    index.rename_to(tmp_path / "a.index.deleted")
    assert not (tmp_path / "a.index").exists()
    index.append(BASE + 2, 6)  # the mapping survives the rename
    assert index.lookup(BASE + 2) == OffsetPosition(BASE + 2, 6)
    assert index.delete()
    assert not (tmp_path / "a.index.deleted").exists()
    assert not index.delete()
