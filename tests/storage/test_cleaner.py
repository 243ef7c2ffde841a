"""Log compaction: storage/cleaner.py and storage/cleaner_manager.py."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logbroker.clock import ManualClock
from logbroker.records.batch import read_header
from logbroker.records.builder import build_batch
from logbroker.records.record_batch import RecordBatch
from logbroker.storage.checkpoints import CLEANER_OFFSET_CHECKPOINT_FILE, OffsetCheckpointFile
from logbroker.storage.cleaner import OffsetMap, SimulatedCrash, empty_batch, scan_records
from logbroker.storage.cleaner_manager import LogCleaner, log_to_clean
from logbroker.storage.log import Log
from logbroker.storage.log_config import LogConfig
from logbroker.types import TopicPartition

NOW = 1_700_000_000_000
DAY_MS = 86_400_000


def config(**overrides) -> LogConfig:
    base = {"cleanup.policy": "compact", "segment.bytes": 2048, "min.cleanable.dirty.ratio": 0.01,
            "file.delete.delay.ms": 0, "delete.retention.ms": DAY_MS}
    base.update(overrides)
    return LogConfig.defaults().with_overrides(base)


def open_log(path, clock, **overrides) -> Log:
    return Log.open(path / "topic-0", config(**overrides), clock=clock, had_clean_shutdown=True)


def append(lg: Log, items, *, ts: int | None = None, compression: str = "none", **kwargs) -> None:
    """One batch of (key, value) items; value None is a tombstone."""
    ts = lg._clock.time_ms() if ts is None else ts
    records = [(k if isinstance(k, bytes) else str(k).encode(),
                None if v is None else (v if isinstance(v, bytes) else str(v).encode()), (), ts)
               for k, v in items]
    lg.append_as_leader(bytearray(build_batch(records, compression=compression, **kwargs)),
                        leader_epoch=0)
    lg.update_high_watermark(lg.log_end_offset)


def all_batches(lg: Log):
    for segment in lg.segments:
        for _, header, data in segment.log.batches_with_data(0):
            yield header, RecordBatch(bytes(data))


def all_records(lg: Log):
    """(offset, key, value) of every record, in log order."""
    out = []
    for _, batch in all_batches(lg):
        batch.ensure_valid()
        out.extend((r.offset, r.key, r.value) for r in batch.records())
    return out


def latest_per_key(records):
    latest = {}
    for offset, key, value in records:
        latest[key] = (offset, value)
    return latest


def clean(lg: Log, now_ms: int, **kwargs) -> LogCleaner:
    cleaner = kwargs.pop("cleaner", None) or LogCleaner(**kwargs)
    cleaner.clean_logs([lg], now_ms)
    return cleaner


def fill(lg: Log, n_batches: int, keys: int, *, per_batch: int = 5, start: int = 0) -> None:
    i = start
    for _ in range(n_batches):
        append(lg, [(f"k{(i + j) % keys}", f"v{i + j}") for j in range(per_batch)])
        i += per_batch


# --- the result ----------------------------------------------------------------------------


def test_cleaning_keeps_latest_value_per_key_with_offsets(tmp_path):
    clock = ManualClock(NOW)
    lg = open_log(tmp_path, clock)
    fill(lg, 40, keys=7)
    lg.roll()
    before = all_records(lg)
    clean(lg, clock.time_ms())
    after = all_records(lg)
    expected = latest_per_key(before)
    assert sorted((o, k, v) for k, (o, v) in expected.items()) == after
    assert lg.log_end_offset == len(before)
    assert lg.log_start_offset == 0


def test_active_segment_is_never_cleaned(tmp_path):
    clock = ManualClock(NOW)
    lg = open_log(tmp_path, clock, **{"segment.bytes": 1 << 20})
    fill(lg, 20, keys=2)
    active_before = [bytes(d) for _, _, d in lg.active_segment.log.batches_with_data(0)]
    clean(lg, clock.time_ms())
    assert len(lg.segments) == 1
    assert [bytes(d) for _, _, d in lg.active_segment.log.batches_with_data(0)] == active_before


def test_records_above_the_high_watermark_are_not_cleaned(tmp_path):
    clock = ManualClock(NOW)
    lg = open_log(tmp_path, clock)
    fill(lg, 10, keys=1)
    lg.update_high_watermark(10)
    lg.roll()
    before = all_records(lg)
    clean(lg, clock.time_ms())
    after = all_records(lg)
    # Only offsets below 10 were deduplicated: key k0's copies at 10.. all survive.
    assert [r for r in after if r[0] >= 10] == [r for r in before if r[0] >= 10]
    assert [r for r in after if r[0] < 10] == [(9, b"k0", b"v9")]


def test_tombstones_get_a_delete_horizon_then_go_after_delete_retention(tmp_path):
    clock = ManualClock(NOW)
    lg = open_log(tmp_path, clock)
    append(lg, [("a", "1"), ("b", "1")])
    append(lg, [("a", None)])
    lg.roll()
    cleaner = clean(lg, clock.time_ms())
    assert [(k, v) for _, k, v in all_records(lg)] == [(b"b", b"1"), (b"a", None)]
    horizons = [h.base_timestamp for h, _ in all_batches(lg) if h.has_delete_horizon]
    assert horizons == [NOW + DAY_MS]
    clock.advance(DAY_MS - 1)
    clean(lg, clock.time_ms(), cleaner=cleaner)
    assert (2, b"a", None) in all_records(lg)
    clock.advance(1)
    clean(lg, clock.time_ms(), cleaner=cleaner)  # eligible because the horizon passed
    assert [(k, v) for _, k, v in all_records(lg)] == [(b"b", b"1")]


def test_min_compaction_lag_keeps_young_segments_dirty(tmp_path):
    clock = ManualClock(NOW)
    lg = open_log(tmp_path, clock, **{"min.compaction.lag.ms": 60_000})
    fill(lg, 10, keys=1)
    lg.roll()
    candidate = log_to_clean(lg, None, clock.time_ms())
    assert candidate.first_uncleanable_offset == 0
    before = all_records(lg)
    clean(lg, clock.time_ms())
    assert all_records(lg) == before
    clock.advance(60_001)
    clean(lg, clock.time_ms())
    assert [r[0] for r in all_records(lg)] == [49]


def test_dirty_ratio_below_threshold_is_not_cleaned(tmp_path):
    clock = ManualClock(NOW)
    lg = open_log(tmp_path, clock, **{"min.cleanable.dirty.ratio": 0.99})
    fill(lg, 10, keys=1)
    lg.roll()
    fill(lg, 1, keys=1, start=100)
    cleaner = clean(lg, clock.time_ms())
    lg.roll()
    cleaner.cleaner.offset_map.clear()
    before = all_records(lg)
    # First round cleaned everything (ratio 1.0 > 0.99); now 1 dirty segment of 2: not eligible.
    assert cleaner.grab_filthiest_log([lg], clock.time_ms()) is None
    clean(lg, clock.time_ms(), cleaner=cleaner)
    assert all_records(lg) == before


def test_a_log_whose_cleanup_policy_was_emptied_is_not_cleaned(tmp_path):
    # KAFKA-19112: an empty cleanup.policy means no compaction, even of a once-compacted log.
    clock = ManualClock(NOW)
    lg = open_log(tmp_path, clock)
    fill(lg, 40, keys=7)
    lg.roll()
    lg.update_config(config(**{"cleanup.policy": ""}))
    before = all_records(lg)
    cleaner = clean(lg, clock.time_ms())
    assert cleaner.grab_filthiest_log([lg], clock.time_ms()) is None
    assert all_records(lg) == before


def test_max_compaction_lag_forces_cleaning_below_the_ratio(tmp_path):
    clock = ManualClock(NOW)
    lg = open_log(tmp_path, clock, **{"min.cleanable.dirty.ratio": 0.99,
                                      "max.compaction.lag.ms": 1000})
    fill(lg, 10, keys=1)
    lg.roll()
    cleaner = clean(lg, clock.time_ms())
    fill(lg, 2, keys=1, start=100)
    lg.roll()
    assert cleaner.grab_filthiest_log([lg], clock.time_ms()) is None
    clock.advance(1001)
    assert cleaner.grab_filthiest_log([lg], clock.time_ms()) is not None
    clean(lg, clock.time_ms(), cleaner=cleaner)
    assert [r[2] for r in all_records(lg)] == [b"v109"]


def test_cleaner_checkpoint_written_in_kafkas_format(tmp_path):
    clock = ManualClock(NOW)
    lg = open_log(tmp_path, clock)
    fill(lg, 10, keys=3)
    lg.roll()
    clean(lg, clock.time_ms())
    text = (tmp_path / CLEANER_OFFSET_CHECKPOINT_FILE).read_text()
    assert text == f"0\n1\ntopic 0 {lg.active_segment.base_offset}\n"
    assert OffsetCheckpointFile(tmp_path / CLEANER_OFFSET_CHECKPOINT_FILE).read() == {
        TopicPartition("topic", 0): 50}


def test_offset_map_full_cleans_what_fits_and_resumes(tmp_path):
    clock = ManualClock(NOW)
    lg = open_log(tmp_path, clock, **{"segment.bytes": 1 << 20})
    for i in range(20):
        append(lg, [(f"k{i}-{j}", "x") for j in range(10)])
    for i in range(20):
        append(lg, [(f"k{i}-{j}", "y") for j in range(10)])
    lg.roll()
    # room for about 50 keys: each round indexes a few batches only
    cleaner = LogCleaner(dedupe_buffer_size=50 * 120, load_factor=1.0)
    rounds = 0
    while cleaner.grab_filthiest_log([lg], clock.time_ms()) is not None and rounds < 20:
        cleaner.clean_logs([lg], clock.time_ms())
        rounds += 1
    assert rounds > 1
    records = all_records(lg)
    assert len(records) == 200 and all(v == b"y" for _, _, v in records)
    assert [o for o, _, _ in records] == list(range(200, 400))


def test_compressed_batches_keep_their_codec(tmp_path):
    clock = ManualClock(NOW)
    lg = open_log(tmp_path, clock)
    for i in range(6):
        append(lg, [("a", f"a{i}"), ("b", f"b{i}"), (f"u{i}", "u")], compression="zstd")
    lg.roll()
    clean(lg, clock.time_ms())
    batches = list(all_batches(lg))
    assert all(h.compression_name == "zstd" for h, _ in batches)
    assert latest_per_key(all_records(lg))[b"a"] == (15, b"a5")
    assert len(all_records(lg)) == 8


def test_rebuilt_batch_keeps_offsets_producer_fields_and_last_offset(tmp_path):
    clock = ManualClock(NOW)
    lg = open_log(tmp_path, clock, **{"segment.bytes": 1 << 20})
    append(lg, [("a", "1"), ("b", "1"), ("c", "1")], producer_id=7, producer_epoch=2,
           base_sequence=0)
    append(lg, [("a", "2"), ("c", "2")], producer_id=7, producer_epoch=2, base_sequence=3)
    append(lg, [("a", "3"), ("c", "3")], producer_id=7, producer_epoch=2, base_sequence=5)
    lg.roll()
    clean(lg, clock.time_ms())
    batches = list(all_batches(lg))
    first, _ = batches[0]
    assert (first.base_offset, first.last_offset, first.records_count) == (0, 2, 1)
    assert (first.producer_id, first.producer_epoch, first.base_sequence) == (7, 2, 0)
    assert [(r.offset, r.sequence) for r in batches[0][1].records()] == [(1, 1)]
    # the middle batch lost everything and is not the producer's last: gone
    assert [h.base_offset for h, _ in batches] == [0, 5]
    assert lg.producer_state.last_entry(7).last_seq == 6


def test_last_batch_of_a_producer_is_kept_empty(tmp_path):
    clock = ManualClock(NOW)
    lg = open_log(tmp_path, clock, **{"segment.bytes": 1 << 20})
    append(lg, [("a", "1")], producer_id=7, producer_epoch=0, base_sequence=0)
    append(lg, [("a", "2")])
    lg.roll()
    clean(lg, clock.time_ms())
    headers = [h for h, _ in all_batches(lg)]
    assert [(h.base_offset, h.records_count, h.producer_id) for h in headers] == [(0, 0, 7), (1, 1, -1)]
    assert headers[0].base_sequence == 0
    reopened = Log.open(lg.dir, lg.config, clock=clock)
    assert reopened.producer_state.last_entry(7).last_seq == 0
    reopened.close()


def test_an_open_transaction_stops_cleaning_at_its_first_offset(tmp_path):
    clock = ManualClock(NOW)
    lg = open_log(tmp_path, clock, **{"segment.bytes": 1 << 20})
    append(lg, [("a", "old")])
    append(lg, [("a", "txn")], producer_id=3, producer_epoch=0, base_sequence=0, transactional=True)
    append(lg, [("a", "plain")])
    append(lg, [("a", "newest")])
    lg.roll()
    assert lg.first_unstable_offset == 1
    clean(lg, clock.time_ms())
    # Nothing at or after the first unstable offset is cleaned, and nothing it could shadow.
    assert [(o, v) for o, _, v in all_records(lg)] == [(0, b"old"), (1, b"txn"), (2, b"plain"),
                                                      (3, b"newest")]


def test_empty_batch_header_is_valid():
    header = read_header(build_batch([(b"k", b"v")], base_offset=10, producer_id=5,
                                     producer_epoch=1, base_sequence=9))
    batch = RecordBatch(empty_batch(header))
    batch.ensure_valid()
    assert batch.records() == []
    assert (batch.base_offset, batch.header.producer_id, batch.header.base_sequence) == (10, 5, 9)


def test_scan_records_matches_decoding():
    records = [(b"k1", b"v"), (None, b"x"), (b"k3", None), (b"k" * 300, b"y" * 1000)]
    data = build_batch(records, base_offset=5, now_ms=NOW)
    scanned = scan_records(data[61:], 4)
    assert [(s[4], s[5]) for s in scanned] == [(b"k1", True), (None, True), (b"k3", False),
                                               (b"k" * 300, True)]
    assert [s[2] for s in scanned] == [0, 1, 2, 3]


def test_offset_map_refuses_a_batch_when_full_but_always_takes_the_first():
    m = OffsetMap(300, load_factor=1.0)
    assert m.put_all([(b"a", 1), (b"b", 2), (b"c", 3)], 3)  # over budget, but the map was empty
    assert not m.put_all([(b"d", 4)], 4)
    assert m.latest_offset == 3 and m.get(b"c") == 3 and m.get(b"d") == -1


def test_consumer_offsets_like_usage(tmp_path):
    """Group metadata and offset commits: many updates of few keys, some deleted."""
    clock = ManualClock(NOW)
    lg = Log.open(tmp_path / "__consumer_offsets-0", config(**{"segment.bytes": 4096}),
                  clock=clock, had_clean_shutdown=True)
    for i in range(300):
        append(lg, [(f"group{i % 3}/t/{i % 4}", f"offset={i}")])
        clock.advance(10)
    append(lg, [("group0/t/0", None)])
    lg.roll()
    before = all_records(lg)
    clean(lg, clock.time_ms())
    after = all_records(lg)
    expected = latest_per_key(before)
    assert {k: (o, v) for o, k, v in after} == expected
    # Groups are formed from the source sizes (as Kafka): full segments are cleaned one by one,
    # and the small results merge on the next cleaning.
    append(lg, [("group1/t/1", "offset=again")])
    lg.roll()
    clean(lg, clock.time_ms())
    assert len(lg.segments) == 2
    expected[b"group1/t/1"] = (301, b"offset=again")
    assert {k: (o, v) for o, k, v in all_records(lg)} == expected


# --- property: random keyed writes with deletes ---------------------------------------------

ops = st.lists(st.tuples(st.integers(0, 12), st.one_of(st.none(), st.binary(min_size=0, max_size=30)),
                         st.booleans()), min_size=1, max_size=120)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=ops, segment_bytes=st.sampled_from([300, 700, 4096]),
       compression=st.sampled_from(["none", "lz4"]), hw_back=st.integers(0, 5))
def test_random_keyed_writes_clean_to_latest_value_per_key(tmp_path_factory, ops, segment_bytes,
                                                           compression, hw_back):
    path = tmp_path_factory.mktemp("prop")
    clock = ManualClock(NOW)
    lg = open_log(path, clock, **{"segment.bytes": segment_bytes})
    batch = []
    for key, value, flush in ops:
        batch.append((f"key{key}", value))
        if flush:
            append(lg, batch, compression=compression)
            batch = []
    if batch:
        append(lg, batch, compression=compression)
    lg.roll()
    lg.update_high_watermark(max(0, lg.log_end_offset - hw_back))
    before = all_records(lg)
    cleaner = clean(lg, clock.time_ms())
    after = all_records(lg)
    # The cleaned bound is the checkpoint: at most the high watermark, never in the active
    # segment. Below it the latest record of each key (among those below it) survives; from it
    # on, everything does.
    bound = cleaner.read_checkpoint(path).get(TopicPartition("topic", 0), 0)
    assert bound <= min(lg.high_watermark, lg.active_segment.base_offset)
    latest_below = latest_per_key([r for r in before if r[0] < bound])
    tail = [r for r in before if r[0] >= bound]
    assert after == sorted([(o, k, v) for k, (o, v) in latest_below.items()] + tail)
    assert latest_per_key(after) == latest_per_key(before)
    assert lg.log_end_offset == len(before)
    # Tombstones below the bound go once their delete horizon passes.
    clock.advance(DAY_MS)
    clean(lg, clock.time_ms(), cleaner=cleaner)
    final = all_records(lg)
    bound2 = cleaner.read_checkpoint(path).get(TopicPartition("topic", 0), 0)
    assert bound2 >= bound
    assert all(v is not None for o, _, v in final if o < bound)
    latest_below = latest_per_key([r for r in before if r[0] < bound2])
    expected = sorted([(o, k, v) for k, (o, v) in latest_below.items()
                       if v is not None or o >= bound]
                      + [r for r in before if r[0] >= bound2])
    assert final == expected
    lg.close()


# --- crash safety ----------------------------------------------------------------------------


@pytest.mark.parametrize("step", ["cleaned", "swap", "deleted", "swapped", "checkpoint"])
def test_crash_at_each_step_of_the_swap_loses_nothing(tmp_path, step):
    clock = ManualClock(NOW)
    lg = open_log(tmp_path, clock, **{"file.delete.delay.ms": 60_000})
    fill(lg, 30, keys=4)
    append(lg, [("k1", None)])
    lg.roll()
    fill(lg, 2, keys=4, start=1000)
    before = all_records(lg)
    expected = latest_per_key(before)

    def crash(at: str) -> None:
        if at == step:
            raise SimulatedCrash(at)

    cleaner = LogCleaner(crash_hook=crash)
    if step == "checkpoint":
        cleaner._update_checkpoint = lambda *a: crash("checkpoint")
    with pytest.raises(SimulatedCrash):
        cleaner.clean_logs([lg], clock.time_ms())
    lg.close_handles()  # the process dies: nothing flushed or renamed from here on
    names = os.listdir(lg.dir)
    reopened = Log.open(lg.dir, lg.config, clock=clock, had_clean_shutdown=False)
    try:
        after = all_records(reopened)
        assert latest_per_key(after) == expected
        assert set(after) <= set(before)
        assert reopened.log_end_offset == lg.log_end_offset
        leftovers = [n for n in os.listdir(reopened.dir)
                     if n.endswith((".cleaned", ".swap", ".deleted"))]
        assert leftovers == []
        if step in ("deleted", "swapped", "checkpoint"):
            assert len(after) < len(before)  # the swap completed, in memory or at load
        if step == "cleaned":
            assert any(n.endswith(".cleaned") for n in names)
            assert after == before
        # cleaning again after the restart works and ends clean
        LogCleaner().clean_logs([reopened], clock.time_ms())
        assert latest_per_key(all_records(reopened)) == expected
    finally:
        reopened.close()


def test_retention_meanwhile_aborts_the_swap(tmp_path):
    clock = ManualClock(NOW)
    lg = open_log(tmp_path, clock)
    fill(lg, 20, keys=3)
    lg.roll()
    cleaner = LogCleaner()
    first = lg.segments[0]

    def delete_first(at: str) -> None:
        if at == "cleaned" and first in lg.segments:
            lg.maybe_increment_log_start_offset(lg.segments[1].base_offset)

    cleaner.cleaner.crash_hook = delete_first
    cleaner.clean_logs([lg], clock.time_ms())
    assert not [n for n in os.listdir(lg.dir) if n.endswith((".cleaned", ".swap"))]
    assert TopicPartition("topic", 0) not in cleaner.read_checkpoint(tmp_path)
    cleaner.cleaner.crash_hook = None
    cleaner.clean_logs([lg], clock.time_ms())
    records = all_records(lg)
    assert len(records) == 3 and records[0][0] >= lg.log_start_offset


def marker(lg: Log, pid: int, commit: bool) -> None:
    from logbroker.records.control import build_end_txn_marker_batch

    lg.append_as_leader(build_end_txn_marker_batch(commit=commit, producer_id=pid, producer_epoch=0,
                                                   coordinator_epoch=0, timestamp_ms=lg._clock.time_ms()),
                        leader_epoch=0, is_from_client=False)
    lg.update_high_watermark(lg.log_end_offset)


def txn_append(lg: Log, pid: int, seq: int, items) -> None:
    append(lg, items, producer_id=pid, producer_epoch=0, base_sequence=seq, transactional=True)


def markers(lg: Log) -> list[tuple[int, bool]]:
    """(offset, has delete horizon) of each control batch with its record."""
    return [(h.base_offset, h.has_delete_horizon) for h, _ in all_batches(lg)
            if h.is_control and h.records_count]


def test_cleaner_drops_aborted_data_then_markers_after_delete_retention(tmp_path):
    clock = ManualClock(NOW)
    lg = open_log(tmp_path, clock, **{"segment.bytes": 1 << 20})
    txn_append(lg, 3, 0, [("a", "aborted")])     # 0
    marker(lg, 3, commit=False)                   # 1
    txn_append(lg, 4, 0, [("a", "committed")])   # 2
    marker(lg, 4, commit=True)                    # 3
    txn_append(lg, 3, 1, [("d", "p2")])          # 4
    marker(lg, 3, commit=True)                    # 5
    append(lg, [("b", "x")])                      # 6
    lg.roll()
    assert [(t.producer_id, t.first_offset, t.last_offset)
            for s in lg.segments for t in s.txn_index.all_aborted_txns()] == [(3, 0, 1)]

    clean(lg, clock.time_ms())
    data = [(o, v) for o, _, v in all_records(lg) if v not in (None,) and not v.startswith(b"\x00\x00")]
    assert data == [(2, b"committed"), (4, b"p2"), (6, b"x")]
    # The abort marker stays while the cleaning saw its data, and so does its index entry.
    assert markers(lg) == [(1, False), (3, False), (5, False)]
    assert [(t.producer_id, t.first_offset, t.last_offset)
            for t in lg.segments[0].txn_index.all_aborted_txns()] == [(3, 0, 1)]
    assert lg.segments[0].txn_index.path.name == "00000000000000000000.txnindex"

    append(lg, [("c", "y")])                      # 7
    lg.roll()
    clean(lg, clock.time_ms())
    # No data of the aborted transaction is left: its marker gets a delete horizon, no entry.
    assert markers(lg)[0] == (1, True)
    assert lg.segments[0].txn_index.all_aborted_txns() == []

    clock.advance(DAY_MS + 1)
    append(lg, [("e", "z")])
    lg.roll()
    clean(lg, clock.time_ms())
    assert 1 not in [o for o, _ in markers(lg)]
    info = lg.read(0, max_bytes=1 << 20, max_offset=lg.last_stable_offset, include_aborted_txns=True)
    assert info.aborted_transactions == ()


def test_aborted_records_never_shadow_older_committed_ones(tmp_path):
    clock = ManualClock(NOW)
    lg = open_log(tmp_path, clock, **{"segment.bytes": 1 << 20})
    append(lg, [("k", "kept")])                   # 0
    txn_append(lg, 3, 0, [("k", "aborted")])     # 1
    marker(lg, 3, commit=False)                   # 2
    txn_append(lg, 3, 1, [("z", "last")])        # 3
    marker(lg, 3, commit=True)                    # 4
    lg.roll()
    clean(lg, clock.time_ms())
    values = [v for _, _, v in all_records(lg) if not v.startswith(b"\x00\x00")]
    assert values == [b"kept", b"last"]


@pytest.mark.parametrize("step", ["cleaned", "swap", "deleted", "swapped"])
def test_crash_during_a_swap_keeps_the_txn_index(tmp_path, step):
    clock = ManualClock(NOW)
    lg = open_log(tmp_path, clock, **{"file.delete.delay.ms": 60_000, "segment.bytes": 1 << 20})
    txn_append(lg, 3, 0, [("a", "aborted")])     # 0
    marker(lg, 3, commit=False)                   # 1
    txn_append(lg, 3, 1, [("d", "kept")])        # 2
    marker(lg, 3, commit=True)                    # 3
    append(lg, [("d", "newer")])                  # 4
    lg.roll()
    entries = [(t.producer_id, t.first_offset, t.last_offset)
               for s in lg.segments for t in s.txn_index.all_aborted_txns()]
    assert entries == [(3, 0, 1)]

    def crash(at: str) -> None:
        if at == step:
            raise SimulatedCrash(at)

    with pytest.raises(SimulatedCrash):
        LogCleaner(crash_hook=crash).clean_logs([lg], clock.time_ms())
    lg.close_handles()
    reopened = Log.open(lg.dir, lg.config, clock=clock, had_clean_shutdown=False)
    try:
        # Whichever side of the swap the crash fell on, aborted data and its index entry go
        # together: before the swap both are there; after it the data is gone, and recovery,
        # rebuilding the index from the log as Kafka's does, finds no transaction to index.
        aborted = [(t.producer_id, t.first_offset, t.last_offset)
                   for s in reopened.segments for t in s.txn_index.all_aborted_txns()]
        values = [v for _, _, v in all_records(reopened)]
        assert (b"aborted" in values) == (aborted == entries)
        if step != "cleaned":
            assert b"aborted" not in values and aborted == []
        committed = [(k, v) for o, k, v in all_records(reopened)
                     if not v.startswith(b"\x00\x00")
                     and not any(f <= o <= last for _, f, last in aborted)]
        assert dict(committed) == {b"d": b"newer"}
        assert [n for n in os.listdir(reopened.dir) if n.endswith((".cleaned", ".swap", ".deleted"))] == []
    finally:
        reopened.close()
