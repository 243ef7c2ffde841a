"""Log: transactions — producer state rules, LSO, .txnindex on abort, recovery, truncation,
retention and follower appends (Kafka's UnifiedLog/ProducerStateManager semantics)."""

from __future__ import annotations

import pytest

from logbroker.clock import ManualClock
from logbroker.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    TransactionCoordinatorFencedError,
)
from logbroker.records.builder import build_batch
from logbroker.records.control import build_end_txn_marker_batch
from logbroker.storage.log import Log
from logbroker.storage.log_config import LogConfig
from logbroker.storage.transaction_index import AbortedTxn

NOW = 1_700_000_000_000


@pytest.fixture
def clock():
    return ManualClock(NOW)


def config(**overrides) -> LogConfig:
    return LogConfig.defaults().with_overrides({k.replace("_", "."): v for k, v in overrides.items()})


def open_log(path, clock, **overrides) -> Log:
    return Log.open(path, config(**overrides), clock=clock)


class Producer:
    """Builds one producer's batches with the right sequences."""

    def __init__(self, pid: int, epoch: int = 0) -> None:
        self.pid, self.epoch, self.seq = pid, epoch, 0

    def batch(self, n: int = 1, *, transactional: bool = True) -> bytearray:
        data = build_batch([(b"k", b"v%d" % i) for i in range(n)], producer_id=self.pid,
                           producer_epoch=self.epoch, base_sequence=self.seq,
                           transactional=transactional, now_ms=NOW)
        self.seq += n
        return bytearray(data)

    def marker(self, commit: bool, coordinator_epoch: int = 0, epoch: int | None = None) -> bytes:
        return build_end_txn_marker_batch(commit=commit, producer_id=self.pid,
                                          producer_epoch=self.epoch if epoch is None else epoch,
                                          coordinator_epoch=coordinator_epoch, timestamp_ms=NOW)


def append(log: Log, data, *, marker: bool = False):
    info = log.append_as_leader(data, leader_epoch=0, is_from_client=not marker)
    log.update_high_watermark(log.log_end_offset)
    return info


def txn_index_entries(log: Log) -> list[AbortedTxn]:
    return [t for s in log.segments for t in s.txn_index.all_aborted_txns()]


def test_open_transaction_holds_the_lso_at_its_first_offset(tmp_path, clock):
    log = open_log(tmp_path / "t-0", clock)
    p = Producer(1)
    append(log, build_batch([(None, b"plain")], now_ms=NOW))  # offset 0
    append(log, p.batch(2))                                   # 1-2
    append(log, build_batch([(None, b"plain")], now_ms=NOW))  # 3
    assert log.high_watermark == 4 and log.first_unstable_offset == 1
    assert log.last_stable_offset == 1
    log.append_as_leader(p.marker(commit=True), leader_epoch=0, is_from_client=False)  # 4
    # Decided, but the marker is not below the high watermark yet: still unstable.
    assert log.last_stable_offset == 1
    log.update_high_watermark(5)
    assert log.first_unstable_offset is None and log.last_stable_offset == 5


def test_lso_never_passes_the_high_watermark(tmp_path, clock):
    log = open_log(tmp_path / "t-0", clock)
    log.append_as_leader(build_batch([(None, b"x")] * 3, now_ms=NOW), leader_epoch=0)
    log.append_as_leader(Producer(1).batch(), leader_epoch=0)
    log.update_high_watermark(2)
    assert log.last_stable_offset == 2


def test_abort_writes_kafkas_entry_into_the_segment_holding_the_marker(tmp_path, clock):
    log = open_log(tmp_path / "t-0", clock)
    a, b = Producer(1), Producer(2)
    append(log, a.batch(2))                 # 0-1, a's txn from 0
    append(log, b.batch(1))                 # 2, b's txn from 2
    log.roll()
    append(log, a.marker(commit=False), marker=True)  # 3: abort a
    # LSO stored: b's open transaction starts at 2.
    assert txn_index_entries(log) == [AbortedTxn(1, 0, 3, 2)]
    assert log.segments[0].txn_index.all_aborted_txns() == []
    assert not log.segments[0].txn_index.path.exists()
    path = log.segments[1].txn_index.path
    assert path.name == "00000000000000000003.txnindex"
    assert path.read_bytes() == (b"\x00\x00" + (1).to_bytes(8, "big") + (0).to_bytes(8, "big")
                                 + (3).to_bytes(8, "big") + (2).to_bytes(8, "big"))
    append(log, b.marker(commit=False), marker=True)  # 4: abort b, nothing else open
    assert txn_index_entries(log)[-1] == AbortedTxn(2, 2, 4, 5)


def test_commit_writes_no_entry(tmp_path, clock):
    log = open_log(tmp_path / "t-0", clock)
    p = Producer(1)
    append(log, p.batch())
    append(log, p.marker(commit=True), marker=True)
    assert txn_index_entries(log) == []


def test_read_committed_gets_the_aborted_transactions_of_the_range(tmp_path, clock):
    log = open_log(tmp_path / "t-0", clock)
    a, b = Producer(1), Producer(2)
    append(log, a.batch(2))                           # 0-1
    append(log, a.marker(commit=False), marker=True)  # 2
    append(log, b.batch(1))                           # 3
    append(log, b.marker(commit=True), marker=True)   # 4
    append(log, a.batch(1))                           # 5
    append(log, a.marker(commit=False), marker=True)  # 6
    info = log.read(0, max_bytes=1 << 20, max_offset=log.last_stable_offset,
                    include_aborted_txns=True)
    assert [(t.producer_id, t.first_offset) for t in info.aborted_transactions] == [(1, 0), (1, 5)]
    info = log.read(3, max_bytes=1 << 20, max_offset=log.last_stable_offset,
                    include_aborted_txns=True)
    assert [(t.producer_id, t.first_offset) for t in info.aborted_transactions] == [(1, 5)]
    assert log.read(0, max_bytes=1 << 20).aborted_transactions is None


def test_non_transactional_batch_inside_an_open_transaction_is_refused(tmp_path, clock):
    log = open_log(tmp_path / "t-0", clock)
    p = Producer(1)
    append(log, p.batch())
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(p.batch(transactional=False), leader_epoch=0)
    assert log.log_end_offset == 1


def test_marker_from_an_older_producer_epoch_is_refused(tmp_path, clock):
    log = open_log(tmp_path / "t-0", clock)
    p = Producer(1, epoch=3)
    append(log, p.batch())
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(p.marker(commit=True, epoch=2), leader_epoch=0, is_from_client=False)
    assert log.log_end_offset == 1 and log.first_unstable_offset == 0


def test_marker_from_an_older_coordinator_epoch_is_fenced(tmp_path, clock):
    log = open_log(tmp_path / "t-0", clock)
    p = Producer(1)
    append(log, p.batch())
    append(log, p.marker(commit=True, coordinator_epoch=5), marker=True)
    append(log, p.batch())
    with pytest.raises(TransactionCoordinatorFencedError):
        log.append_as_leader(p.marker(commit=False, coordinator_epoch=4), leader_epoch=0,
                             is_from_client=False)
    assert log.producer_state.last_entry(1).coordinator_epoch == 5
    assert log.producer_state.last_entry(1).current_txn_first_offset == 2


def test_control_batch_from_a_client_is_refused(tmp_path, clock):
    log = open_log(tmp_path / "t-0", clock)
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(Producer(1).marker(commit=True), leader_epoch=0)


def test_state_survives_a_clean_reopen(tmp_path, clock):
    log = open_log(tmp_path / "t-0", clock)
    a, b = Producer(1), Producer(2)
    append(log, a.batch())
    append(log, a.marker(commit=False), marker=True)
    append(log, b.batch())
    log.flush()
    log.close()
    log = Log.open(tmp_path / "t-0", config(), clock=clock, had_clean_shutdown=True,
                   recovery_point=3, high_watermark=3)
    assert log.last_stable_offset == 2
    assert log.producer_state.last_entry(2).current_txn_first_offset == 2
    assert txn_index_entries(log) == [AbortedTxn(1, 0, 1, 2)]
    append(log, b.marker(commit=True), marker=True)
    assert log.last_stable_offset == 4


def build_aborting_log(path, clock, **overrides) -> Log:
    log = open_log(path, clock, **overrides)
    a, b = Producer(1), Producer(2)
    for _ in range(3):
        append(log, a.batch(2))
        append(log, b.batch(1))
        append(log, a.marker(commit=False), marker=True)
        append(log, b.marker(commit=True), marker=True)
    append(log, a.batch(1))  # left open
    return log


def test_unclean_recovery_rebuilds_the_txn_index_and_the_open_transaction(tmp_path, clock):
    log = build_aborting_log(tmp_path / "t-0", clock, segment_bytes=400)
    expected = txn_index_entries(log)
    expected_files = {s.txn_index.path.name: s.txn_index.path.read_bytes()
                      for s in log.segments if s.txn_index.path.exists()}
    assert len(expected) == 3 and len(log.segments) > 2
    end = log.log_end_offset
    log.close_handles()
    for s in log.segments:
        s.txn_index.path.unlink(missing_ok=True)
    for snapshot in (tmp_path / "t-0").glob("*.snapshot"):
        snapshot.unlink()
    log = Log.open(tmp_path / "t-0", config(segment_bytes=400), clock=clock, recovery_point=0,
                   high_watermark=end)
    assert txn_index_entries(log) == expected
    assert {s.txn_index.path.name: s.txn_index.path.read_bytes()
            for s in log.segments if s.txn_index.path.exists()} == expected_files
    assert log.first_unstable_offset == end - 1 == log.last_stable_offset


def test_recovery_after_a_torn_marker_drops_its_entry(tmp_path, clock):
    log = open_log(tmp_path / "t-0", clock)
    p = Producer(1)
    append(log, p.batch())
    append(log, p.marker(commit=False), marker=True)
    log.close_handles()
    seg = tmp_path / "t-0" / "00000000000000000000.log"
    seg.write_bytes(seg.read_bytes()[:-5])  # the marker is torn
    log = Log.open(tmp_path / "t-0", config(), clock=clock, recovery_point=0)
    assert log.log_end_offset == 1
    assert txn_index_entries(log) == []
    assert log.producer_state.last_entry(1).current_txn_first_offset == 0


def test_follower_builds_the_same_txn_index(tmp_path, clock):
    leader = build_aborting_log(tmp_path / "leader" / "t-0", clock)
    follower = open_log(tmp_path / "follower" / "t-0", clock)
    data = b"".join(bytes(f.read_bytes()) for f in sorted((tmp_path / "leader" / "t-0").glob("*.log")))
    follower.append_as_follower(data)
    follower.update_high_watermark(leader.high_watermark)
    assert txn_index_entries(follower) == txn_index_entries(leader)
    assert follower.last_stable_offset == leader.last_stable_offset


def test_follower_truncation_removes_entries_and_reopens_the_transaction(tmp_path, clock):
    log = open_log(tmp_path / "t-0", clock)
    p = Producer(1)
    append(log, p.batch(2))
    append(log, p.marker(commit=False), marker=True)  # 2
    assert txn_index_entries(log) == [AbortedTxn(1, 0, 2, 3)]
    log.truncate_to(2)
    assert txn_index_entries(log) == []
    assert log.producer_state.last_entry(1).current_txn_first_offset == 0
    assert log.first_unstable_offset == 0
    assert log.segments[0].txn_index.path.read_bytes() == b""


def test_retention_deletes_the_txn_index_with_its_segment(tmp_path, clock):
    log = build_aborting_log(tmp_path / "t-0", clock, segment_bytes=400, retention_bytes=0,
                             file_delete_delay_ms=0)
    first = log.segments[0]
    had_index = [s.txn_index.path for s in log.segments[:-1] if s.txn_index.path.exists()]
    assert had_index
    log.delete_old_segments()
    # Retention stops at the open transaction? No: Kafka deletes below the high watermark only.
    for path in had_index:
        if int(path.name.split(".")[0]) < log.log_start_offset:
            assert not path.exists()
    assert not first.txn_index.path.exists()
    assert log.first_unstable_offset is None or log.first_unstable_offset >= log.log_start_offset


def test_producer_with_an_open_transaction_does_not_expire(tmp_path, clock):
    log = open_log(tmp_path / "t-0", clock)
    a, b = Producer(1), Producer(2)
    append(log, a.batch())
    append(log, b.batch(transactional=False))
    clock.advance(86_400_000 * 2)
    log.remove_expired_producers()
    assert log.producer_state.last_entry(1) is not None
    assert log.producer_state.last_entry(2) is None


# --- a reference model -------------------------------------------------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

OPS = st.lists(st.one_of(
    st.tuples(st.just("data"), st.integers(1, 3), st.integers(1, 3)),
    st.tuples(st.just("commit"), st.integers(1, 3)),
    st.tuples(st.just("abort"), st.integers(1, 3)),
    st.tuples(st.just("plain"), st.integers(1, 2)),
    st.tuples(st.just("roll"),),
), max_size=40)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_lso_and_txn_index_match_a_reference_model_and_survive_recovery(tmp_path_factory, ops):
    clock = ManualClock(NOW)
    path = tmp_path_factory.mktemp("model") / "t-0"
    log = open_log(path, clock)
    producers = {pid: Producer(pid) for pid in (1, 2, 3)}
    ongoing: dict[int, int] = {}  # pid → first offset
    expected: list[AbortedTxn] = []
    for op in ops:
        end = log.log_end_offset
        if op[0] == "data":
            _, pid, n = op
            append(log, producers[pid].batch(n))
            ongoing.setdefault(pid, end)
        elif op[0] in ("commit", "abort"):
            pid = op[1]
            append(log, producers[pid].marker(commit=op[0] == "commit"), marker=True)
            first = ongoing.pop(pid, None)
            if op[0] == "abort" and first is not None:
                others = [f for p, f in ongoing.items()]
                expected.append(AbortedTxn(pid, first, end, min(others) if others else end + 1))
        elif op[0] == "plain":
            append(log, build_batch([(None, b"p")] * op[1], now_ms=NOW))
        elif log.active_segment.size:
            log.roll()
        assert log.first_unstable_offset == min(ongoing.values(), default=None)
    assert log.last_stable_offset == min(ongoing.values(), default=log.high_watermark)
    assert txn_index_entries(log) == expected

    end = log.log_end_offset
    log.close_handles()
    for s in log.segments:
        s.txn_index.path.unlink(missing_ok=True)
    for snapshot in path.glob("*.snapshot"):
        snapshot.unlink()
    log = Log.open(path, config(), clock=clock, recovery_point=0, high_watermark=end)
    assert txn_index_entries(log) == expected
    assert log.first_unstable_offset == min(ongoing.values(), default=None)
    log.close_handles()
