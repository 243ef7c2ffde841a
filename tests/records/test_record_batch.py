"""The batch view and the batch walk, against batches written byte by byte from the spec."""

import struct

import crc32c
import pytest

from logbroker.errors import CorruptRecordError
from logbroker.records.batch import read_header
from logbroker.records.builder import build_batch
from logbroker.records.record import Record, decode_record, decode_records
from logbroker.records.record_batch import (
    RecordBatch,
    iter_batches,
    iter_record_batches,
    set_log_append_time,
)

# Two records, encoded by hand (zigzag varints: 0 -> 00, 1 -> 02, 5 -> 0a, -1 -> 01, 8 -> 10).
RECORD_0 = bytes([
    0x20,                    # length 16
    0x00,                    # attributes
    0x00,                    # timestampDelta 0
    0x00,                    # offsetDelta 0
    0x02, *b"k",             # key "k"
    0x0a, *b"hello",         # value "hello"
    0x02,                    # 1 header
    0x02, *b"h", 0x02, *b"x",  # "h": b"x"
])
RECORD_1 = bytes([
    0x10,                    # length 8
    0x00,                    # attributes
    0x0a,                    # timestampDelta +5
    0x02,                    # offsetDelta 1
    0x01,                    # null key
    0x01,                    # null value
    0x02,                    # 1 header
    0x00, 0x01,              # "": null
])
RECORDS = RECORD_0 + RECORD_1


def spec_batch(records: bytes = RECORDS, *, attributes: int = 0, count: int = 2, crc: int | None = None) -> bytes:
    after_crc = struct.pack(">hiqqqhii", attributes, 1, 1000, 1005, 42, 1, 7, count) + records
    if crc is None:
        crc = crc32c.crc32c(after_crc)
    return (struct.pack(">qiib", 100, 4 + 1 + 4 + len(after_crc), 3, 2) + struct.pack(">I", crc)
            + after_crc)


EXPECTED = [
    Record(offset=100, timestamp=1000, key=b"k", value=b"hello", headers=(("h", b"x"),), sequence=7),
    Record(offset=101, timestamp=1005, key=None, value=None, headers=(("", None),), sequence=8),
]


def test_spec_batch_reads_back_field_by_field():
    raw = spec_batch()
    batch = RecordBatch(raw)
    h = batch.header
    assert (h.base_offset, h.batch_length, h.partition_leader_epoch, h.magic) == (100, len(raw) - 12, 3, 2)
    assert h.crc == crc32c.crc32c(raw[21:])
    assert (h.attributes, h.last_offset_delta, h.base_timestamp, h.max_timestamp) == (0, 1, 1000, 1005)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.records_count) == (42, 1, 7, 2)
    assert (batch.size_in_bytes, batch.last_offset, batch.next_offset) == (len(raw), 101, 102)
    assert batch.timestamp_type == "CreateTime"
    assert batch.delete_horizon_ms is None
    assert batch.is_valid()
    batch.ensure_valid()
    assert batch.records() == EXPECTED
    assert list(batch) == EXPECTED
    assert bytes(batch.records_section()) == RECORDS
    assert bytes(batch.buffer()) == raw


def test_builder_writes_the_spec_batch_byte_for_byte():
    built = build_batch(
        [(b"k", b"hello", [("h", b"x")], 1000), (None, None, [("", None)], 1005)],
        base_offset=100, partition_leader_epoch=3, producer_id=42, producer_epoch=1, base_sequence=7)
    assert built == spec_batch()


def test_record_size_accessors():
    assert (EXPECTED[0].key_size, EXPECTED[0].value_size) == (1, 5)
    assert (EXPECTED[1].key_size, EXPECTED[1].value_size) == (-1, -1)


def test_log_append_time_gives_every_record_the_max_timestamp():
    raw = bytearray(spec_batch())
    set_log_append_time(raw, 0, 7777)
    batch = RecordBatch(raw)
    assert batch.header.is_log_append_time
    assert batch.header.max_timestamp == 7777
    assert batch.timestamp_type == "LogAppendTime"
    assert batch.is_valid()  # the CRC was recomputed
    assert [r.timestamp for r in batch.records()] == [7777, 7777]
    assert batch.header.base_timestamp == 1000  # deltas and base untouched


def test_set_log_append_time_in_a_larger_buffer_leaves_neighbours_alone():
    first, second = spec_batch(), build_batch([(b"a", b"b", (), 5)])
    buf = bytearray(first + second)
    set_log_append_time(memoryview(buf), len(first), 99)
    assert buf[:len(first)] == first
    batch = RecordBatch(buf, len(first))
    assert batch.is_valid() and batch.records()[0].timestamp == 99


def test_set_log_append_time_needs_a_whole_batch():
    with pytest.raises(CorruptRecordError):
        set_log_append_time(bytearray(spec_batch()[:-1]), 0, 1)


def test_flipped_crc_covered_byte_is_detected():
    raw = spec_batch()
    for position in (21, 30, 61, len(raw) - 1):  # attributes, deltas, first record byte, last byte
        corrupt = bytearray(raw)
        corrupt[position] ^= 0x01
        batch = RecordBatch(corrupt)
        assert not batch.is_valid()
        with pytest.raises(CorruptRecordError, match="stored crc"):
            batch.ensure_valid()


def test_stored_crc_altered_is_detected():
    batch = RecordBatch(spec_batch(crc=0xDEADBEEF))
    assert not batch.is_valid()


def test_base_offset_and_leader_epoch_lie_outside_the_crc():
    raw = bytearray(spec_batch())
    raw[0:8] = struct.pack(">q", 12345)
    raw[12:16] = struct.pack(">i", 99)
    assert RecordBatch(raw).is_valid()
    assert RecordBatch(raw).records()[1].offset == 12346


def test_control_and_transactional_attribute_bits():
    batch = RecordBatch(spec_batch(attributes=0x30))
    assert batch.header.is_control and batch.header.is_transactional
    assert not batch.header.is_log_append_time


def test_compressed_spec_batch():
    import gzip
    batch = RecordBatch(spec_batch(gzip.compress(RECORDS), attributes=1))
    assert batch.header.compression_name == "gzip"
    assert batch.records() == EXPECTED


# --- malformed records sections -------------------------------------------------------------

@pytest.mark.parametrize("count, message", [
    (3, "declares 3 records"),       # a record missing
    (1, "remain after them"),        # bytes left over
])
def test_record_count_mismatch_is_corrupt(count, message):
    with pytest.raises(CorruptRecordError, match=message):
        RecordBatch(spec_batch(count=count)).records()


@pytest.mark.parametrize("record, message", [
    (bytes([0x20]) + RECORD_0[1:-1], "claims 16 bytes"),                          # cut short
    (bytes([0x1e]) + RECORD_0[1:-1], "header value"),                             # length too small
    (bytes([0x22]) + RECORD_0[1:] + b"\x00", "expected to read 17 bytes"),         # length too large
    (bytes([0x10, 0, 0, 0, 0x02, *b"k", 0x02, *b"v", 0x01]), "negative header count"),
    (bytes([0x0e, 0, 0, 0, 0x01, 0x01, 0x02, 0x01]), "negative header key"),
    (bytes([0x08, 0, 0, 0, 0x14, *b"abc"]), "key of 10 bytes runs past"),
    (bytes([0x01]), "claims -1 bytes"),
])
def test_malformed_record_is_corrupt(record, message):
    with pytest.raises(CorruptRecordError, match=message):
        decode_records(record, 1, base_offset=0, base_timestamp=0)


def test_decode_record_returns_the_next_position():
    record, position = decode_record(RECORDS, len(RECORD_0), base_offset=10, base_timestamp=50)
    assert position == len(RECORDS)
    assert (record.offset, record.timestamp, record.sequence) == (11, 55, -1)


def test_sequence_wraps_at_int32_max():
    (record,) = decode_records(RECORD_1, 1, base_offset=0, base_timestamp=0, base_sequence=0x7FFFFFFF)
    assert record.sequence == 0


def test_invalid_utf8_header_key_is_replaced_not_fatal():
    record = bytes([0x14, 0, 0, 0, 0x01, 0x01, 0x02, 0x04, 0xff, 0xfe, 0x01])
    (decoded,) = decode_records(record, 1, base_offset=0, base_timestamp=0)
    assert decoded.headers == (("\ufffd\ufffd", None),)


# --- the batch walk ---------------------------------------------------------------------------

def three_batches() -> tuple[bytes, list[int]]:
    batches = [build_batch([(b"k%d" % i, b"v" * i, (), i)], base_offset=i) for i in range(3)]
    positions = [0, len(batches[0]), len(batches[0]) + len(batches[1])]
    return b"".join(batches), positions


def test_iter_batches_yields_each_position_and_header():
    buf, positions = three_batches()
    walked = list(iter_batches(buf))
    assert [p for p, _ in walked] == positions
    assert [h.base_offset for _, h in walked] == [0, 1, 2]
    assert [h for _, h in walked] == [read_header(buf, p) for p in positions]
    assert [b.base_offset for b in iter_record_batches(buf)] == [0, 1, 2]


def test_iter_batches_from_a_start_position_to_an_end():
    buf, positions = three_batches()
    assert [p for p, _ in iter_batches(buf, positions[1])] == positions[1:]
    assert [p for p, _ in iter_batches(buf, 0, positions[2])] == positions[:2]


def test_iter_batches_stops_cleanly_at_every_torn_tail():
    buf, positions = three_batches()
    for cut in range(positions[2], len(buf)):
        walked = list(iter_batches(buf[:cut]))
        assert [p for p, _ in walked] == positions[:2], cut
        last_position, last_header = walked[-1]
        assert last_position + last_header.size_in_bytes == positions[2]


def test_iter_batches_of_empty_buffer_yields_nothing():
    assert list(iter_batches(b"")) == []


@pytest.mark.parametrize("length", [0, -1, 48])
def test_impossible_batch_length_is_corrupt(length):
    buf, positions = three_batches()
    bad = bytearray(buf)
    bad[positions[1] + 8:positions[1] + 12] = struct.pack(">i", length)
    walk = iter_batches(bad)
    assert next(walk)[0] == 0
    with pytest.raises(CorruptRecordError, match=f"position {positions[1]} has length {length}"):
        next(walk)


def test_zero_filled_tail_is_corrupt_not_torn():
    buf, _ = three_batches()
    with pytest.raises(CorruptRecordError):
        list(iter_batches(buf + bytes(100)))


def test_wrong_magic_is_corrupt():
    bad = bytearray(spec_batch())
    bad[16] = 1
    with pytest.raises(CorruptRecordError, match="magic 1"):
        list(iter_batches(bad))
    assert not RecordBatch(bad).is_valid()


def test_batch_over_max_size_is_corrupt():
    raw = spec_batch()
    assert len(list(iter_batches(raw, max_batch_size=len(raw)))) == 1
    with pytest.raises(CorruptRecordError, match="larger than the maximum"):
        list(iter_batches(raw, max_batch_size=len(raw) - 1))


def test_record_batch_refuses_an_incomplete_batch():
    raw = spec_batch()
    with pytest.raises(CorruptRecordError, match="only"):
        RecordBatch(raw[:-1])
    with pytest.raises(CorruptRecordError, match="header needs 61"):
        RecordBatch(raw[:60])


# --- garbage in, typed error out ----------------------------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=300, deadline=None)
@given(codec=st.sampled_from(["none", "gzip", "snappy", "lz4", "zstd"]),
       flips=st.lists(st.tuples(st.integers(61, 10_000), st.integers(1, 255)), min_size=1, max_size=4),
       cut=st.integers(0, 40))
def test_damaged_records_section_raises_only_corrupt_record(codec, flips, cut):
    raw = bytearray(build_batch([(b"key%d" % i, b"value %d" % i * 5, [("h", b"v")], 1000 + i) for i in range(8)],
                                compression=codec))
    for position, mask in flips:
        raw[61 + position % (len(raw) - 61)] ^= mask
    raw = raw[:len(raw) - cut]
    raw[8:12] = struct.pack(">i", len(raw) - 12)  # keep the batch walkable
    batch = RecordBatch(raw)
    try:
        batch.records()
    except CorruptRecordError:
        pass


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.integers(0, 5))
def test_random_records_section_raises_only_corrupt_record(data, count):
    try:
        decode_records(data, count, base_offset=0, base_timestamp=0)
    except CorruptRecordError:
        pass
