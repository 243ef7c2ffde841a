"""LeaderEpochFileCache: Kafka's assign/endOffsetFor/truncate semantics and its file format."""

from __future__ import annotations

import pytest

from logbroker.errors import KafkaStorageError
from logbroker.storage.leader_epoch_cache import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochEntry,
    LeaderEpochFileCache,
)


@pytest.fixture
def path(tmp_path):
    return tmp_path / "leader-epoch-checkpoint"


def cache_with(path, *pairs):
    cache = LeaderEpochFileCache(path)
    for epoch, offset in pairs:
        cache.assign(epoch, offset)
    return cache


def test_file_is_kafka_format(path):
    cache_with(path, (0, 0), (3, 1200))
    assert path.read_bytes() == b"0\n2\n0 0\n3 1200\n"


def test_reloads_from_file(path):
    cache_with(path, (0, 0), (2, 10), (5, 30))
    assert LeaderEpochFileCache(path).entries == [EpochEntry(0, 0), EpochEntry(2, 10), EpochEntry(5, 30)]


def test_missing_file_is_empty_cache(path):
    cache = LeaderEpochFileCache(path)
    assert cache.entries == [] and cache.latest_epoch is None and not path.exists()


def test_malformed_file_is_a_storage_error_naming_it(path):
    path.write_text("0\n1\nnot numbers\n")
    with pytest.raises(KafkaStorageError, match="leader-epoch-checkpoint"):
        LeaderEpochFileCache(path)


def test_assign_same_epoch_later_offset_is_ignored(path):
    cache = cache_with(path, (1, 5))
    assert not cache.assign(1, 10)
    assert cache.entries == [EpochEntry(1, 5)]


def test_assign_same_epoch_earlier_offset_replaces(path):
    cache = cache_with(path, (1, 5))
    assert cache.assign(1, 3)
    assert cache.entries == [EpochEntry(1, 3)]


def test_assign_lower_epoch_truncates_conflicting_entries(path):
    cache = cache_with(path, (1, 5), (3, 10), (4, 20))
    cache.assign(2, 8)
    assert cache.entries == [EpochEntry(1, 5), EpochEntry(2, 8)]


def test_assign_higher_epoch_at_lower_offset_truncates(path):
    cache = cache_with(path, (1, 5), (2, 10))
    cache.assign(3, 7)
    assert cache.entries == [EpochEntry(1, 5), EpochEntry(3, 7)]


def test_assign_negative_is_refused(path):
    with pytest.raises(ValueError):
        LeaderEpochFileCache(path).assign(-1, 0)


def test_latest_earliest_and_previous(path):
    cache = cache_with(path, (1, 5), (2, 10), (4, 20))
    assert cache.latest_epoch == 4
    assert cache.latest_entry == EpochEntry(4, 20)
    assert cache.earliest_entry == EpochEntry(1, 5)
    assert cache.previous_epoch() == 2
    assert cache.epoch_entry(2) == EpochEntry(2, 10)
    assert cache.epoch_entry(3) is None


@pytest.mark.parametrize("offset, epoch", [(0, None), (4, None), (5, 1), (9, 1), (10, 2), (19, 2), (20, 4), (99, 4)])
def test_epoch_for_offset(path, offset, epoch):
    assert cache_with(path, (1, 5), (2, 10), (4, 20)).epoch_for_offset(offset) == epoch


# KIP-101 / Kafka's LeaderEpochFileCache.endOffsetFor
@pytest.mark.parametrize("requested, expected", [
    (UNDEFINED_EPOCH, (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)),
    (4, (4, 50)),                                          # latest: the log end offset
    (2, (2, 20)),                                          # known: start of the next epoch
    (3, (2, 20)),                                          # gap: the epoch below, next start
    (1, (1, 10)),
    (0, (0, 5)),                                           # below all: first start offset
    (5, (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)),        # above all
])
def test_end_offset_for(path, requested, expected):
    cache = cache_with(path, (1, 5), (2, 10), (4, 20))
    assert cache.end_offset_for(requested, 50) == expected


def test_end_offset_for_on_empty_cache(path):
    assert LeaderEpochFileCache(path).end_offset_for(3, 10) == (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)


def test_truncate_from_end_removes_entries_at_or_after(path):
    cache = cache_with(path, (1, 5), (2, 10), (4, 20))
    cache.truncate_from_end(10)
    assert cache.entries == [EpochEntry(1, 5)]
    assert LeaderEpochFileCache(path).entries == [EpochEntry(1, 5)]


def test_truncate_from_end_past_latest_is_noop(path):
    cache = cache_with(path, (1, 5), (2, 10))
    cache.truncate_from_end(11)
    assert cache.entries == [EpochEntry(1, 5), EpochEntry(2, 10)]


def test_truncate_from_start_moves_the_covering_entry_up(path):
    cache = cache_with(path, (1, 5), (2, 10), (4, 20))
    cache.truncate_from_start(15)
    assert cache.entries == [EpochEntry(2, 15), EpochEntry(4, 20)]
    assert LeaderEpochFileCache(path).entries == cache.entries


def test_truncate_from_start_at_an_entry_start(path):
    cache = cache_with(path, (1, 5), (2, 10), (4, 20))
    cache.truncate_from_start(20)
    assert cache.entries == [EpochEntry(4, 20)]


def test_truncate_from_start_before_first_is_noop(path):
    cache = cache_with(path, (1, 5))
    cache.truncate_from_start(3)
    assert cache.entries == [EpochEntry(1, 5)]


def test_clear_and_flush(path):
    cache = cache_with(path, (1, 5))
    cache.clear_and_flush()
    assert cache.entries == []
    assert path.read_bytes() == b"0\n0\n"


def test_assign_marks_dirty_until_flush(path):
    cache = cache_with(path, (1, 5))
    assert cache.pop_dirty()
    assert not cache.pop_dirty()
    cache.assign(2, 9)
    cache.flush()
    assert not cache.pop_dirty()
