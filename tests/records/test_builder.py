import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logbroker.records.builder import build_batch
from logbroker.records.control import (
    ABORT,
    COMMIT,
    EndTransactionMarker,
    build_end_txn_marker_batch,
    control_record_type,
    control_type_name,
)
from logbroker.records.record import Record
from logbroker.records.record_batch import RecordBatch, iter_batches

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]

maybe_bytes = st.none() | st.binary(max_size=60)
headers = st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=20)), max_size=3)
timestamps = st.integers(0, 1 << 42)
record_inputs = st.lists(st.tuples(maybe_bytes, maybe_bytes, headers, timestamps), min_size=1, max_size=12)


@settings(max_examples=150, deadline=None)
@given(records=record_inputs, codec=st.sampled_from(CODECS), base_offset=st.integers(0, 1 << 50),
       producer=st.sampled_from([(-1, -1, -1), (7, 0, 0), (1 << 40, 3, 0x7FFFFFF0)]))
def test_build_then_read_round_trips(records, codec, base_offset, producer):
    producer_id, producer_epoch, base_sequence = producer
    raw = build_batch(records, base_offset=base_offset, compression=codec, producer_id=producer_id,
                      producer_epoch=producer_epoch, base_sequence=base_sequence)
    batch = RecordBatch(raw)
    h = batch.header
    assert batch.is_valid()
    assert batch.size_in_bytes == len(raw)
    assert h.compression_name == codec
    assert (h.base_offset, h.records_count) == (base_offset, len(records))
    assert h.last_offset == base_offset + len(records) - 1
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == producer
    assert h.base_timestamp == records[0][3]
    assert h.max_timestamp == max(r[3] for r in records)
    decoded = batch.records()
    assert [(r.key, r.value, r.headers, r.timestamp) for r in decoded] == [
        (k, v, tuple(hs), ts) for k, v, hs, ts in records]
    assert [r.offset for r in decoded] == list(range(base_offset, base_offset + len(records)))
    if base_sequence >= 0:
        assert [r.sequence for r in decoded] == [(base_sequence + i) % (1 << 31) for i in range(len(records))]
    else:
        assert all(r.sequence == -1 for r in decoded)


@pytest.mark.parametrize("codec", CODECS)
def test_records_read_back_can_be_rebuilt_identically(codec):
    raw = build_batch([(b"k%d" % i, b"value %d" % i * 10, [("i", b"%d" % i)], 1000 + i) for i in range(50)],
                      base_offset=10, compression=codec)
    again = build_batch(RecordBatch(raw).records(), base_offset=10, compression=codec)
    assert again == raw


def test_records_accepted_as_objects_and_short_tuples():
    raw = build_batch([Record(0, 5, b"k", b"v", (("h", b"x"),)), (b"a", b"b"), (b"c",)], now_ms=9)
    records = RecordBatch(raw).records()
    assert [(r.key, r.value, r.headers, r.timestamp) for r in records] == [
        (b"k", b"v", (("h", b"x"),), 5), (b"a", b"b", (), 9), (b"c", None, (), 9)]


def test_missing_timestamps_are_stamped_now():
    raw = build_batch([(b"k", b"v", (), None)], now_ms=1234)
    assert RecordBatch(raw).records()[0].timestamp == 1234
    assert RecordBatch(build_batch([(b"k", b"v")])).header.max_timestamp > 1_600_000_000_000


def test_header_keys_may_be_bytes():
    raw = build_batch([(None, b"v", [(b"bytes-key", b"1")], 0)])
    assert RecordBatch(raw).records()[0].headers == (("bytes-key", b"1"),)


def test_base_timestamp_is_the_first_records_and_later_deltas_may_be_negative():
    raw = build_batch([(b"a", b"1", (), 5000), (b"b", b"2", (), 3000), (b"c", b"3", (), 4000)])
    batch = RecordBatch(raw)
    assert (batch.header.base_timestamp, batch.header.max_timestamp) == (5000, 5000)
    assert [r.timestamp for r in batch.records()] == [5000, 3000, 4000]


def test_explicit_base_timestamp():
    batch = RecordBatch(build_batch([(b"a", b"1", (), 5000)], base_timestamp=4000))
    assert batch.header.base_timestamp == 4000
    assert batch.records()[0].timestamp == 5000


def test_delete_horizon_is_stored_in_base_timestamp():
    batch = RecordBatch(build_batch([(b"a", None, (), 5000)], delete_horizon_ms=86_400_000))
    assert batch.header.has_delete_horizon
    assert batch.delete_horizon_ms == 86_400_000
    assert batch.records()[0].timestamp == 5000


def test_preserve_offsets_keeps_gaps():
    kept = [Record(12, 1, b"a", b"1"), Record(15, 2, b"b", b"2")]
    batch = RecordBatch(build_batch(kept, base_offset=10, preserve_offsets=True))
    assert batch.header.last_offset_delta == 5
    assert [r.offset for r in batch.records()] == [12, 15]


@pytest.mark.parametrize("offsets", [[12, 12], [15, 12], [9, 12]])
def test_preserve_offsets_refuses_offsets_out_of_order(offsets):
    with pytest.raises(ValueError):
        build_batch([Record(o, 1, b"a", b"1") for o in offsets], base_offset=10, preserve_offsets=True)


def test_empty_batch_is_refused():
    with pytest.raises(ValueError):
        build_batch([])


def test_attribute_flags():
    h = RecordBatch(build_batch([(b"k", b"v", (), 1)], compression="zstd", log_append_time=True,
                                transactional=True, producer_id=3, producer_epoch=0, base_sequence=0)).header
    assert h.attributes == 4 | 0x08 | 0x10
    assert h.is_log_append_time and h.is_transactional and not h.is_control


def test_partition_leader_epoch_is_written():
    assert RecordBatch(build_batch([(b"k", b"v", (), 1)], partition_leader_epoch=9)).header.partition_leader_epoch == 9


def test_batches_concatenate_into_a_walkable_buffer():
    buf = b"".join(build_batch([(b"k", b"v" * i, (), i)], base_offset=i, compression=CODECS[i % 5])
                   for i in range(10))
    assert [h.base_offset for _, h in iter_batches(buf)] == list(range(10))


@pytest.mark.parametrize("commit", [True, False])
def test_end_txn_marker_batch(commit):
    raw = build_end_txn_marker_batch(commit=commit, producer_id=77, producer_epoch=2, coordinator_epoch=5,
                                     timestamp_ms=123, base_offset=40)
    batch = RecordBatch(raw)
    h = batch.header
    assert h.is_control and h.is_transactional and batch.is_valid()
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.records_count) == (77, 2, -1, 1)
    (record,) = batch.records()
    assert record.key == bytes([0, 0, 0, 1 if commit else 0])
    assert record.value == bytes([0, 0, 0, 0, 0, 5])
    assert control_type_name(control_record_type(record.key)) == ("COMMIT" if commit else "ABORT")
    marker = EndTransactionMarker.decode(record.key, record.value)
    assert marker == EndTransactionMarker(COMMIT if commit else ABORT, 5)
    assert marker.is_commit == commit
