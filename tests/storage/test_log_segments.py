"""LogSegments: the sorted segment list of a log, found by offset."""

from __future__ import annotations

import pytest

from logbroker.clock import ManualClock
from logbroker.storage.log_config import LogConfig
from logbroker.storage.log_loader import open_segment
from logbroker.storage.log_segments import LogSegments


@pytest.fixture
def open_at(tmp_path):
    """Opens an empty segment at a base offset, in `tmp_path` or a subdirectory of it."""
    opened = []

    def open_(base_offset: int, subdir: str = ""):
        directory = tmp_path / subdir
        directory.mkdir(exist_ok=True)
        segment = open_segment(directory, base_offset, LogConfig.defaults(), clock=ManualClock(0),
                               file_already_exists=False)
        opened.append(segment)
        return segment
    yield open_
    for segment in opened:
        segment.close_handlers()


def test_floor_index_finds_the_segment_holding_an_offset(open_at):
    segments = LogSegments(open_at(base) for base in (0, 100, 200))
    assert [segments.floor_index(o) for o in (0, 99, 100, 150, 200, 10_000)] == [0, 0, 1, 1, 2, 2]
    assert [s.base_offset for s in segments.from_offset(150)] == [100, 200]
    assert [s.base_offset for s in segments.from_offset(5)] == [0, 100, 200]


def test_offset_below_the_first_segment_has_no_floor_but_reads_from_the_first(open_at):
    segments = LogSegments([open_at(50), open_at(80)])
    assert segments.floor_index(10) == -1
    assert [s.base_offset for s in segments.from_offset(10)] == [50, 80]


def test_add_keeps_base_offsets_in_order_and_the_last_is_active(open_at):
    segments = LogSegments([open_at(100)])
    segments.add(open_at(300))
    segments.add(open_at(0))
    segments.add(open_at(200))
    assert [s.base_offset for s in segments] == [0, 100, 200, 300]
    assert [segments.base_offset_at(i) for i in range(len(segments))] == [0, 100, 200, 300]
    assert segments.active.base_offset == 300


def test_remove_and_contains_go_by_the_segment_object_not_its_base_offset(open_at):
    kept = open_at(0)
    segments = LogSegments([kept])
    same_base = open_at(0, "other")
    assert segments.contains(kept) and not segments.contains(same_base)
    segments.remove(same_base)
    assert list(segments) == [kept]
    segments.remove(kept)
    assert len(segments) == 0


def test_replace_range_puts_one_segment_in_place_of_a_run(open_at):
    a, b, c, d = (open_at(base) for base in (0, 10, 20, 30))
    segments = LogSegments([a, b, c, d])
    cleaned = open_at(10, "cleaned")  # the cleaner's segment takes the first one's base offset
    segments.replace_range(b, c, cleaned)
    assert list(segments) == [a, cleaned, d]
    assert segments.floor_index(25) == 1


def test_snapshot_does_not_change_with_the_list(open_at):
    segments = LogSegments([open_at(0)])
    before = segments.snapshot()
    segments.add(open_at(10))
    assert len(before) == 1 and len(segments) == 2
