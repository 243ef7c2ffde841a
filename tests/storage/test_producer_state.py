"""ProducerStateManager: Kafka's idempotent-producer rules, and its `.snapshot` files."""

from __future__ import annotations

import struct
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logbroker.clock import ManualClock
from logbroker.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceNumberError,
)
from logbroker.records.batch import (
    CONTROL_FLAG_MASK,
    TRANSACTIONAL_FLAG_MASK,
    BatchHeader,
)
from logbroker.storage.producer_snapshot import (
    decode_snapshot,
    encode_snapshot,
    flush_snapshot,
    snapshot_file_name,
)
from logbroker.storage.producer_state import ProducerStateManager
from logbroker.storage.producer_state_entry import INT32_MAX, BatchMetadata, ProducerStateEntry

PID = 1000
T0 = 1_700_000_000_000


def header(*, pid: int = PID, epoch: int = 0, seq: int = 0, count: int = 1,
           base_offset: int = 0, ts: int = T0, attributes: int = 0) -> BatchHeader:
    return BatchHeader(base_offset=base_offset, batch_length=49 + 10 * count,
                       partition_leader_epoch=0, magic=2, crc=0, attributes=attributes,
                       last_offset_delta=count - 1, base_timestamp=ts, max_timestamp=ts,
                       producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                       records_count=count)


class Log:
    """The smallest leader log: assigns offsets, remembers what it wrote, drives the manager."""

    def __init__(self, psm: ProducerStateManager, log_end_offset: int = 0) -> None:
        self.psm = psm
        self.log_end_offset = log_end_offset
        self.batches: list[tuple[BatchHeader, int]] = []

    def append(self, h: BatchHeader) -> tuple[str, int, int]:
        duplicate = self.psm.check(h)
        if duplicate is not None:
            return ("duplicate", duplicate.first_offset, duplicate.last_offset)
        base = self.log_end_offset
        written = h._replace(base_offset=base)
        self.batches.append((written, base))
        self.log_end_offset = written.next_offset
        self.psm.update(written, base)
        return ("appended", base, written.last_offset)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def psm(tmp_path: Path, clock: ManualClock) -> ProducerStateManager:
    return ProducerStateManager(tmp_path, clock=clock)


@pytest.fixture
def log(psm: ProducerStateManager) -> Log:
    return Log(psm)


# --- validation on the leader --------------------------------------------------------------


def test_batch_without_producer_id_is_not_tracked(log: Log) -> None:
    h = header(pid=-1, epoch=-1, seq=-1, count=3)
    assert log.append(h) == ("appended", 0, 2)
    assert log.append(h) == ("appended", 3, 5)
    assert log.psm.is_empty
    assert log.psm.map_end_offset == 6


def test_in_sequence_batches_are_recorded(log: Log) -> None:
    assert log.append(header(seq=0, count=3)) == ("appended", 0, 2)
    assert log.append(header(seq=3, count=2)) == ("appended", 3, 4)
    entry = log.psm.last_entry(PID)
    assert entry.producer_epoch == 0
    assert (entry.first_seq, entry.last_seq) == (0, 4)
    assert (entry.first_data_offset, entry.last_data_offset) == (0, 4)
    assert list(entry.batch_metadata) == [BatchMetadata(2, 2, 2, T0), BatchMetadata(4, 4, 1, T0)]
    assert log.psm.map_end_offset == 5


def test_duplicate_of_each_of_last_five_batches_returns_original_offsets(log: Log) -> None:
    log.append(header(pid=7, epoch=0, seq=0, count=4))  # another producer's data in between
    sent = []
    for i in range(8):
        h = header(seq=2 * i, count=2)
        sent.append((h, log.append(h)))
        log.append(header(pid=7, seq=4 + i, count=1))
    end = log.log_end_offset
    for h, (_, first, last) in sent[-5:]:
        assert log.append(h) == ("duplicate", first, last)
    assert log.log_end_offset == end


def test_retry_older_than_last_five_batches_is_out_of_order(log: Log) -> None:
    batches = [header(seq=i, count=1) for i in range(6)]
    for h in batches:
        log.append(h)
    # Kafka 3.x answers OUT_OF_ORDER_SEQUENCE_NUMBER: DUPLICATE_SEQUENCE_NUMBER is no longer used.
    with pytest.raises(OutOfOrderSequenceNumberError):
        log.psm.check(batches[0])
    assert log.psm.check(batches[1]) is not None


def test_sequence_gap_is_out_of_order(log: Log) -> None:
    log.append(header(seq=0, count=5))
    with pytest.raises(OutOfOrderSequenceNumberError):
        log.psm.check(header(seq=6))
    with pytest.raises(OutOfOrderSequenceNumberError):
        log.psm.check(header(seq=3, count=2))  # inside a written batch, not a retry of one
    with pytest.raises(OutOfOrderSequenceNumberError):
        log.psm.check(header(seq=0, count=4))  # same start, different end
    assert log.psm.check(header(seq=5)) is None


def test_older_epoch_is_fenced(log: Log) -> None:
    first = header(epoch=3, seq=0)
    log.append(first)
    log.append(header(epoch=4, seq=0))
    with pytest.raises(InvalidProducerEpochError):
        log.psm.check(header(epoch=3, seq=1))
    with pytest.raises(InvalidProducerEpochError):
        log.psm.check(first)  # a retry from the fenced epoch is not a duplicate
    assert InvalidProducerEpochError.code == 47


def test_epoch_bump_must_restart_at_sequence_zero(log: Log) -> None:
    log.append(header(epoch=0, seq=0, count=10))
    with pytest.raises(OutOfOrderSequenceNumberError):
        log.psm.check(header(epoch=1, seq=10))
    assert log.append(header(epoch=1, seq=0, count=2)) == ("appended", 10, 11)
    entry = log.psm.last_entry(PID)
    assert entry.producer_epoch == 1
    assert list(entry.batch_metadata) == [BatchMetadata(1, 11, 1, T0)]
    # The old epoch's batch is gone from the cache: its retry is fenced, not a duplicate.
    with pytest.raises(InvalidProducerEpochError):
        log.psm.check(header(epoch=0, seq=0, count=10))


def test_sequence_wraps_at_int32_max(log: Log) -> None:
    assert log.append(header(seq=INT32_MAX - 2, count=3))[0] == "appended"
    assert log.psm.last_entry(PID).last_seq == INT32_MAX
    with pytest.raises(OutOfOrderSequenceNumberError):
        log.psm.check(header(seq=1))  # after 2^31-1 comes 0
    assert log.append(header(seq=0, count=1))[0] == "appended"
    # A batch that itself crosses the wrap: sequences MAX-1, MAX, 0, 1.
    log2 = Log(ProducerStateManager(log.psm.partition_dir / "x", clock=ManualClock()))
    log2.append(header(seq=INT32_MAX - 5, count=4))
    crossing = header(seq=INT32_MAX - 1, count=4)
    assert crossing.last_sequence == 1
    assert log2.append(crossing) == ("appended", 4, 7)
    assert log2.psm.last_entry(PID).batch_metadata[-1].first_seq == INT32_MAX - 1
    assert log2.append(crossing) == ("duplicate", 4, 7)
    assert log2.append(header(seq=2))[0] == "appended"


def test_unknown_producer_with_nonzero_sequence_is_accepted(log: Log) -> None:
    assert log.append(header(epoch=5, seq=1234, count=2)) == ("appended", 0, 1)
    assert log.append(header(epoch=5, seq=1236)) == ("appended", 2, 2)


def test_check_changes_nothing(log: Log) -> None:
    log.append(header(seq=0, count=2))
    before = repr(log.psm.last_entry(PID))
    log.psm.check(header(seq=2))
    log.psm.check(header(seq=0, count=2))
    log.psm.check(header(epoch=1, seq=0))
    log.psm.check(header(pid=99, seq=0))
    assert repr(log.psm.last_entry(PID)) == before
    assert log.psm.last_entry(99) is None
    assert log.psm.map_end_offset == 2


def test_non_transactional_write_inside_open_transaction_is_invalid(log: Log) -> None:
    log.append(header(seq=0, count=2, attributes=TRANSACTIONAL_FLAG_MASK))
    log.append(header(seq=2, attributes=TRANSACTIONAL_FLAG_MASK))
    assert log.psm.last_entry(PID).current_txn_first_offset == 0
    with pytest.raises(InvalidTxnStateError):
        log.psm.check(header(seq=3))
    # A marker (written by the coordinator, here replicated) ends the transaction.
    marker = header(seq=-1, base_offset=3, ts=T0 + 5,
                    attributes=TRANSACTIONAL_FLAG_MASK | CONTROL_FLAG_MASK)
    log.psm.load_from_batch(marker)
    entry = log.psm.last_entry(PID)
    assert entry.current_txn_first_offset == -1
    assert entry.last_seq == 2  # a marker carries no sequence
    assert entry.last_timestamp == T0 + 5
    assert log.psm.map_end_offset == 4
    assert log.psm.check(header(seq=3)) is None


def test_load_from_batch_does_not_validate(psm: ProducerStateManager) -> None:
    psm.load_from_batch(header(epoch=2, seq=0, count=2, base_offset=0))
    psm.load_from_batch(header(epoch=2, seq=50, base_offset=2))  # a gap: taken as it is
    psm.load_from_batch(header(epoch=1, seq=7, base_offset=3))  # an older epoch: taken too
    entry = psm.last_entry(PID)
    assert entry.producer_epoch == 1
    assert list(entry.batch_metadata) == [BatchMetadata(7, 3, 0, T0)]
    assert psm.map_end_offset == 4


def test_empty_control_batch_is_ignored(psm: ProducerStateManager) -> None:
    h = header(seq=-1, count=1, attributes=CONTROL_FLAG_MASK)._replace(records_count=0)
    psm.load_from_batch(h)
    assert psm.is_empty


# --- expiry --------------------------------------------------------------------------------


def test_producers_expire_after_idle_time_but_not_in_a_transaction(
        tmp_path: Path, clock: ManualClock) -> None:
    psm = ProducerStateManager(tmp_path, max_producer_id_expiration_ms=1000, clock=clock)
    log = Log(psm)
    log.append(header(pid=1, ts=T0))
    log.append(header(pid=2, ts=T0 + 500))
    log.append(header(pid=3, ts=T0, attributes=TRANSACTIONAL_FLAG_MASK))
    psm.remove_expired_producers(T0 + 999)
    assert set(psm.active_producers) == {1, 2, 3}
    psm.remove_expired_producers(T0 + 1000)
    assert set(psm.active_producers) == {2, 3}
    # Once forgotten, the producer may continue with any sequence.
    assert log.append(header(pid=1, seq=77))[0] == "appended"


def test_expired_producers_are_skipped_on_load(tmp_path: Path, clock: ManualClock) -> None:
    psm = ProducerStateManager(tmp_path, max_producer_id_expiration_ms=1000, clock=clock)
    log = Log(psm)
    log.append(header(pid=1, ts=T0 - 2000))
    log.append(header(pid=2, ts=T0))
    psm.take_snapshot()
    reloaded = ProducerStateManager(tmp_path, max_producer_id_expiration_ms=1000, clock=clock)
    assert reloaded.load(0, 2) == 2
    assert set(reloaded.active_producers) == {2}


# --- snapshot files ------------------------------------------------------------------------


def test_snapshot_file_is_kafkas_format_byte_for_byte(log: Log) -> None:
    log.append(header(pid=5, epoch=2, seq=0, count=3, ts=T0 + 1))
    log.append(header(pid=5, epoch=2, seq=3, count=2, ts=T0 + 2))
    log.append(header(pid=3, epoch=0, seq=10, count=1, ts=T0 + 3,
                      attributes=TRANSACTIONAL_FLAG_MASK))
    path = log.psm.take_snapshot()
    assert path == log.psm.partition_dir / "00000000000000000006.snapshot"
    assert sorted(p.name for p in log.psm.partition_dir.iterdir()) == [path.name]

    data = path.read_bytes()
    assert len(data) == 2 + 4 + 4 + 2 * 46
    version, crc, count = struct.unpack_from(">hIi", data, 0)
    assert (version, count) == (1, 2)
    assert crc == crc32c.crc32c(data[6:])
    entries = [struct.unpack_from(">qhiqiqiq", data, 10 + 46 * i) for i in range(count)]
    # producer_id, epoch, last_sequence, last_offset, offset_delta, timestamp,
    # coordinator_epoch, current_txn_first_offset (ordered by producer id)
    assert entries == [
        (3, 0, 10, 5, 0, T0 + 3, -1, 5),
        (5, 2, 4, 4, 1, T0 + 2, -1, -1),
    ]


def test_snapshot_round_trip_keeps_the_last_batch_of_each_producer(log: Log) -> None:
    for i in range(4):
        log.append(header(epoch=1, seq=2 * i, count=2, ts=T0 + i))
    log.psm.take_snapshot()
    reloaded = ProducerStateManager(log.psm.partition_dir, clock=ManualClock(T0))
    assert reloaded.load(0, log.log_end_offset) == 8
    entry = reloaded.last_entry(PID)
    assert entry == ProducerStateEntry(PID, producer_epoch=1, last_timestamp=T0 + 3,
                                       batch_metadata=[BatchMetadata(7, 7, 1, T0 + 3)])
    # The last batch is still recognised as a retry; the next batch follows it.
    assert reloaded.check(header(epoch=1, seq=6, count=2)) == BatchMetadata(7, 7, 1, T0 + 3)
    assert reloaded.check(header(epoch=1, seq=8)) is None
    assert encode_snapshot(reloaded.active_producers.values()) == \
        encode_snapshot(log.psm.active_producers.values())  # one producer: order is moot


def test_take_snapshot_skips_an_offset_already_snapshotted(log: Log) -> None:
    log.append(header(seq=0))
    assert log.psm.take_snapshot() is not None
    assert log.psm.take_snapshot() is None
    assert log.psm.take_snapshot(1) is None
    log.append(header(seq=1))
    assert log.psm.take_snapshot(5).name == snapshot_file_name(5)  # roll: new segment at 5
    assert log.psm.map_end_offset == 5
    assert log.psm.snapshot_offsets() == [1, 5]
    with pytest.raises(ValueError):
        log.psm.take_snapshot(4)


def test_unsynced_snapshot_is_complete_and_can_be_flushed_later(log: Log) -> None:
    log.append(header(seq=0))
    path = log.psm.take_snapshot(sync=False)
    flush_snapshot(path)
    flush_snapshot(path.with_name("gone.snapshot"))
    assert len(decode_snapshot(path.read_bytes())) == 1


def test_leftover_temporary_snapshot_is_removed_at_startup(tmp_path: Path) -> None:
    (tmp_path / "00000000000000000042.snapshot.tmp").write_bytes(b"torn")
    (tmp_path / "00000000000000000042.log").write_bytes(b"")
    psm = ProducerStateManager(tmp_path, clock=ManualClock())
    assert psm.snapshot_offsets() == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["00000000000000000042.log"]


def test_corrupt_snapshot_is_deleted_and_the_older_one_used(log: Log) -> None:
    log.append(header(seq=0, count=2))
    older = log.psm.take_snapshot()
    log.append(header(seq=2, count=2))
    newer = log.psm.take_snapshot()
    data = bytearray(newer.read_bytes())
    data[-1] ^= 0xFF
    newer.write_bytes(bytes(data))

    reloaded = ProducerStateManager(log.psm.partition_dir, clock=ManualClock(T0))
    assert reloaded.load(0, 4) == 2
    assert not newer.exists() and older.exists()
    assert reloaded.last_entry(PID).last_seq == 1
    for h, base in log.batches:
        if base >= 2:
            reloaded.load_from_batch(h)
    assert reloaded.last_entry(PID).last_seq == 3


def test_load_without_snapshot_starts_at_log_start(psm: ProducerStateManager) -> None:
    assert psm.load(17, 40) == 17
    assert psm.map_end_offset == 17
    assert psm.is_empty


def test_load_deletes_snapshots_past_log_end_and_at_or_before_log_start(log: Log) -> None:
    for offset in (3, 5, 8, 12):
        log.psm.take_snapshot(offset)
    reloaded = ProducerStateManager(log.psm.partition_dir, clock=ManualClock(T0))
    assert reloaded.snapshot_offsets() == [3, 5, 8, 12]
    assert reloaded.load(5, 10) == 8
    assert reloaded.snapshot_offsets() == [8]
    assert sorted(p.name for p in log.psm.partition_dir.iterdir()) == [snapshot_file_name(8)]


def test_reload_from_snapshot_and_refeed_equals_original_state(log: Log) -> None:
    pids = [11, 12, 13]
    seqs = dict.fromkeys(pids, 0)
    snapshot_at = None
    for i in range(40):
        pid = pids[i % 3 if i % 7 else 0]
        count = 1 + i % 3
        log.append(header(pid=pid, seq=seqs[pid], count=count, ts=T0 + i))
        seqs[pid] += count
        if i == 20:
            snapshot_at = log.log_end_offset
            log.psm.take_snapshot(snapshot_at)

    reloaded = ProducerStateManager(log.psm.partition_dir, clock=ManualClock(T0))
    start = reloaded.load(0, log.log_end_offset)
    assert start == snapshot_at
    for h, base in log.batches:
        if base >= start:
            reloaded.load_from_batch(h)
    reloaded.update_map_end_offset(log.log_end_offset)
    # Every producer wrote five or more batches after the snapshot: the whole state is back.
    for pid in pids:
        assert reloaded.last_entry(pid) == log.psm.last_entry(pid)
    assert reloaded.map_end_offset == log.psm.map_end_offset


def test_truncate_and_reload_rebuilds_state_below_the_truncation_point(log: Log) -> None:
    for i in range(6):
        log.append(header(seq=i))
        if i in (1, 3):
            log.psm.take_snapshot()
    assert log.psm.snapshot_offsets() == [2, 4]
    # A follower truncates to offset 3 (KIP-101): the snapshot at 4 describes data now gone.
    start = log.psm.truncate_and_reload(0, 3)
    assert start == 2
    assert log.psm.snapshot_offsets() == [2]
    for h, base in log.batches:
        if start <= base < 3:
            log.psm.load_from_batch(h)
    assert log.psm.last_entry(PID).last_seq == 2
    assert log.psm.map_end_offset == 3
    assert log.psm.check(header(seq=3)) is None


def test_truncate_and_reload_keeps_state_when_log_end_is_unchanged(log: Log) -> None:
    for i in range(4):
        log.append(header(seq=i))
    before = repr(log.psm.last_entry(PID))
    assert log.psm.truncate_and_reload(2, 4) == 4
    assert repr(log.psm.last_entry(PID)) == before


def test_truncate_fully_forgets_everything(log: Log) -> None:
    log.append(header(seq=0))
    log.psm.take_snapshot()
    log.psm.truncate_fully_and_start_at(100)
    assert log.psm.is_empty and log.psm.snapshot_offsets() == []
    assert log.psm.map_end_offset == 100
    assert list(log.psm.partition_dir.iterdir()) == []


def test_delete_snapshots_before_is_exclusive(psm: ProducerStateManager) -> None:
    for offset in (1, 2, 3):
        psm.take_snapshot(offset)
    psm.delete_snapshots_before(3)
    assert psm.snapshot_offsets() == [3]
    assert [p.name for p in psm.partition_dir.iterdir()] == [snapshot_file_name(3)]


def test_remove_and_mark_snapshot_for_deletion(psm: ProducerStateManager) -> None:
    psm.take_snapshot(4)
    path = psm.remove_and_mark_snapshot_for_deletion(4)
    assert path.name == "00000000000000000004.snapshot.deleted" and path.exists()
    assert psm.snapshot_offsets() == []
    assert psm.remove_and_mark_snapshot_for_deletion(4) is None


def test_remove_stray_snapshots_keeps_the_clean_shutdown_one(psm: ProducerStateManager) -> None:
    for offset in (3, 10, 12, 20):
        psm.take_snapshot(offset)
    (psm.partition_dir / snapshot_file_name(0)).write_bytes(encode_snapshot([]))  # not listed yet
    psm.remove_stray_snapshots([0, 10, 15])
    assert psm.snapshot_offsets() == [0, 10, 20]
    psm.remove_stray_snapshots([0, 10, 25])
    assert psm.snapshot_offsets() == [0, 10]


# --- a reference model of the rules, under random interleavings of sends and retries -------


def by_pid(entry: ProducerStateEntry) -> int:
    return entry.producer_id


@dataclass
class ModelProducer:
    epoch: int
    batches: list[tuple[int, int, int, int]] = field(default_factory=list)  # seqs and offsets


def model_append(model: dict[int, ModelProducer], pid: int, epoch: int, seq: int, count: int,
                 log_end: int) -> tuple[str, int, int] | type[Exception]:
    """What Kafka 3.x answers, restated directly: last five batches, epochs, wrapping sequences."""
    last_seq = (seq + count - 1) % 2**31
    producer = model.get(pid)
    if producer is not None:
        if epoch == producer.epoch:
            for first_s, last_s, first_o, last_o in producer.batches[-5:]:
                if (first_s, last_s) == (seq, last_seq):
                    return ("duplicate", first_o, last_o)
        if epoch < producer.epoch:
            return InvalidProducerEpochError
        if epoch > producer.epoch and seq != 0:
            return OutOfOrderSequenceNumberError
        if epoch == producer.epoch and seq != (producer.batches[-1][1] + 1) % 2**31:
            return OutOfOrderSequenceNumberError
    if producer is None or producer.epoch != epoch:
        producer = model[pid] = ModelProducer(epoch)
    producer.batches.append((seq, last_seq, log_end, log_end + count - 1))
    return ("appended", log_end, log_end + count - 1)


@dataclass
class Client:
    pid: int
    epoch: int = 0
    next_seq: int = 0
    sent: list[tuple[int, int, int]] = field(default_factory=list)  # (epoch, seq, count)


PRODUCER = st.integers(0, 2)
OPERATION = st.one_of(
    # Sends and retries dominate; fencing, gaps and restarts are rarer, as in life.
    st.tuples(st.just("send"), PRODUCER, st.integers(1, 4)),
    st.tuples(st.just("send"), PRODUCER, st.integers(1, 4)),
    st.tuples(st.just("send"), PRODUCER, st.integers(1, 4)),
    st.tuples(st.just("retry"), PRODUCER, st.integers(0, 7)),
    st.tuples(st.just("retry"), PRODUCER, st.integers(0, 7)),
    st.tuples(st.just("bump"), PRODUCER, st.just(0)),
    st.tuples(st.just("gap"), PRODUCER, st.integers(1, 3)),
    st.tuples(st.just("zombie"), PRODUCER, st.just(0)),
    st.tuples(st.just("reload"), st.just(0), st.just(0)),
)
operations = st.lists(OPERATION, min_size=20, max_size=80)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=operations, start_seqs=st.lists(st.sampled_from([0, 5, INT32_MAX - 6]),
                                           min_size=3, max_size=3))
def test_random_sends_and_retries_match_the_reference_model(
        ops: list[tuple[str, int, int]], start_seqs: list[int]) -> None:
    with tempfile.TemporaryDirectory() as d:
        clock = ManualClock(T0)
        log = Log(ProducerStateManager(Path(d), clock=clock))
        model: dict[int, ModelProducer] = {}
        clients = [Client(pid=100 + i, next_seq=s) for i, s in enumerate(start_seqs)]

        def send(client: Client, epoch: int, seq: int, count: int) -> None:
            expected = model_append(model, client.pid, epoch, seq, count, log.log_end_offset)
            h = header(pid=client.pid, epoch=epoch, seq=seq, count=count)
            if isinstance(expected, tuple):
                assert log.append(h) == expected
            else:
                with pytest.raises(expected):
                    log.append(h)

        for op, i, n in ops:
            client = clients[i]
            if op == "send":
                client.sent.append((client.epoch, client.next_seq, n))
                send(client, client.epoch, client.next_seq, n)
                client.next_seq = (client.next_seq + n) % 2**31
            elif op == "retry" and client.sent:
                send(client, *client.sent[-1 - n % len(client.sent)])
            elif op == "bump":
                client.epoch += 1
                client.next_seq = 0
            elif op == "gap":
                client.next_seq = (client.next_seq + n) % 2**31
            elif op == "zombie" and client.epoch > 0:
                send(client, client.epoch - 1, client.next_seq, 1)
            elif op == "reload":
                # Restart: snapshot at the log end, load it. Only each last batch survives.
                log.psm.take_snapshot(log.log_end_offset)
                psm = ProducerStateManager(Path(d), clock=clock)
                assert psm.load(0, log.log_end_offset) == log.log_end_offset
                log.psm = psm
                for producer in model.values():
                    del producer.batches[:-1]

        # Rebuilding from the log alone reproduces the state (apart from batches a reload
        # dropped from the cache: the rebuilt one remembers more, never less).
        with tempfile.TemporaryDirectory() as d2:
            rebuilt = ProducerStateManager(Path(d2), clock=clock)
            assert rebuilt.load(0, log.log_end_offset) == 0
            for h, _ in log.batches:
                rebuilt.load_from_batch(h)
            assert set(rebuilt.active_producers) == set(log.psm.active_producers)
            for pid, entry in log.psm.active_producers.items():
                again = rebuilt.last_entry(pid)
                assert again.producer_epoch == entry.producer_epoch
                kept = list(entry.batch_metadata)
                assert list(again.batch_metadata)[-len(kept):] == kept
            assert encode_snapshot(sorted(rebuilt.active_producers.values(), key=by_pid)) == \
                encode_snapshot(sorted(log.psm.active_producers.values(), key=by_pid))


# --- transactions -----------------------------------------------------------------------------

from logbroker.records.control import ABORT, COMMIT, EndTransactionMarker  # noqa: E402
from logbroker.storage.producer_state import CompletedTxn  # noqa: E402

TXN = TRANSACTIONAL_FLAG_MASK
MARKER = TRANSACTIONAL_FLAG_MASK | CONTROL_FLAG_MASK


def test_first_unstable_offset_follows_ongoing_then_unreplicated_txns(tmp_path):
    psm = ProducerStateManager(tmp_path, clock=ManualClock(T0))
    psm.update(header(pid=1, attributes=TXN), 0)
    psm.update(header(pid=2, attributes=TXN), 1)
    assert psm.first_unstable_offset() == 0 and psm.first_undecided_offset() == 0
    completed = psm.update(header(pid=1, attributes=MARKER, seq=-1), 2, EndTransactionMarker(ABORT, 0))
    assert completed == CompletedTxn(1, 0, 2, True)
    assert psm.last_stable_offset(completed) == 1  # pid 2's transaction is still open
    psm.complete_txn(completed)
    assert psm.first_unstable_offset() == 0 and psm.first_undecided_offset() == 1
    psm.on_high_watermark_updated(2)  # the marker is not below the high watermark yet
    assert psm.first_unstable_offset() == 0
    psm.on_high_watermark_updated(3)
    assert psm.first_unstable_offset() == 1


def test_marker_without_transaction_data_completes_nothing(tmp_path):
    psm = ProducerStateManager(tmp_path, clock=ManualClock(T0))
    assert psm.update(header(pid=1, attributes=MARKER, seq=-1), 0, EndTransactionMarker(COMMIT, 3)) is None
    assert psm.last_entry(1).coordinator_epoch == 3
    assert psm.first_unstable_offset() is None


def test_open_transaction_comes_back_from_a_snapshot(tmp_path):
    psm = ProducerStateManager(tmp_path, clock=ManualClock(T0))
    psm.update(header(pid=1, attributes=TXN, count=2), 5)
    psm.take_snapshot(7)
    again = ProducerStateManager(tmp_path, clock=ManualClock(T0))
    assert again.load(0, 7) == 7
    assert again.first_unstable_offset() == 5
    assert again.last_entry(1).current_txn_first_offset == 5
