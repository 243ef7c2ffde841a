"""Cross-checks with real client code: their builders → our reader, our builder → their readers,
and batches captured from librdkafka (see data/capture_librdkafka.py).

kafka-python finds no snappy, lz4 or zstd library in this environment; its own codec module is
given cramjam-backed stand-ins for python-snappy, lz4.frame and zstandard, so its batch layout and
its xerial snappy framing are exercised for every codec.
"""

import warnings
from pathlib import Path
from types import SimpleNamespace

import cramjam
import pytest
from aiokafka.record import default_records as aio_records

with warnings.catch_warnings():
    # kafka-python loads its protocol schemas with deprecated importlib.resources calls.
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.codec
    import kafka.record.default_records as kp_records
from hypothesis import given, settings
from hypothesis import strategies as st

from logbroker.records.builder import build_batch
from logbroker.records.compression import codec_id
from logbroker.records.record_batch import RecordBatch, iter_batches

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
DATA = Path(__file__).parent / "data"

SAMPLE = [
    (b"key-0", b"value zero " * 30, [("h1", b"v1"), ("null", None)], 1_700_000_000_000),
    (None, b"value one " * 30, [], 1_700_000_000_005),
    (b"", None, [("empty", b"")], 1_699_999_999_000),  # earlier than the first: negative delta
    ("ünïcode".encode(), "ünïcode value ".encode() * 20, [("ключ", "значение".encode())], 1_700_000_000_010),
]


@pytest.fixture
def kafka_python_codecs(monkeypatch):
    def lz4_frame(payload):
        compressor = cramjam.lz4.Compressor(block_linked=False)
        compressor.compress(payload)
        return bytes(compressor.finish())

    monkeypatch.setattr(kafka.codec, "snappy", SimpleNamespace(
        compress=lambda b: bytes(cramjam.snappy.compress_raw(b)),
        decompress=lambda b: bytes(cramjam.snappy.decompress_raw(b))))
    monkeypatch.setattr(kafka.codec, "lz4", SimpleNamespace())
    monkeypatch.setattr(kafka.codec, "zstd", SimpleNamespace())
    monkeypatch.setattr(kp_records, "lz4_encode", lz4_frame)
    monkeypatch.setattr(kp_records, "lz4_decode", lambda b: bytes(cramjam.lz4.decompress(b)))
    monkeypatch.setattr(kp_records, "zstd_encode", lambda b: bytes(cramjam.zstd.compress(b, level=3)))
    monkeypatch.setattr(kp_records, "zstd_decode", lambda b: bytes(cramjam.zstd.decompress(b)))


def _build_with(builder_cls, records, codec, *, producer=(-1, -1, -1)) -> bytes:
    producer_id, producer_epoch, base_sequence = producer
    builder = builder_cls(2, codec_id(codec), 0, producer_id, producer_epoch, base_sequence, 1 << 20)
    for offset, (key, value, headers, timestamp) in enumerate(records):
        assert builder.append(offset, timestamp, key, value, headers) is not None
    return bytes(builder.build())


def _assert_reads_as(raw: bytes, records, codec, base_offset=0):
    batch = RecordBatch(raw)
    assert batch.is_valid()
    assert batch.header.compression_name == codec
    decoded = batch.records()
    assert [(r.offset, r.key, r.value, r.headers, r.timestamp) for r in decoded] == [
        (base_offset + i, k, v, tuple(h), ts) for i, (k, v, h, ts) in enumerate(records)]
    assert batch.header.max_timestamp == max(r[3] for r in records)


def _their_view(batch) -> list:
    return [(r.offset, r.key, r.value, list(r.headers), r.timestamp) for r in batch]


def _expected_view(records, base_offset=0) -> list:
    return [(base_offset + i, k, v, list(h), ts) for i, (k, v, h, ts) in enumerate(records)]


# --- their builders, our reader ---------------------------------------------------------------

@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_batches_read_with_ours(codec, kafka_python_codecs):
    raw = _build_with(kp_records.DefaultRecordBatchBuilder, SAMPLE, codec)
    _assert_reads_as(raw, SAMPLE, codec)


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("builder_cls",
                         [aio_records._DefaultRecordBatchBuilderPy, aio_records.DefaultRecordBatchBuilder],
                         ids=["python", "cython"])
def test_aiokafka_batches_read_with_ours(codec, builder_cls):
    raw = _build_with(builder_cls, SAMPLE, codec, producer=(5, 1, 100))
    _assert_reads_as(raw, SAMPLE, codec)
    h = RecordBatch(raw).header
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (5, 1, 100)
    assert [r.sequence for r in RecordBatch(raw).records()] == [100, 101, 102, 103]


# --- our builder, their readers ---------------------------------------------------------------

@pytest.mark.parametrize("codec", CODECS)
def test_our_batches_read_with_kafka_python(codec, kafka_python_codecs):
    raw = build_batch(SAMPLE, base_offset=1000, compression=codec)
    theirs = kp_records.DefaultRecordBatch(raw)
    assert theirs.validate_crc()
    assert theirs.compression_type == codec_id(codec)
    assert _their_view(theirs) == _expected_view(SAMPLE, 1000)


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("reader_cls", [aio_records._DefaultRecordBatchPy, aio_records.DefaultRecordBatch],
                         ids=["python", "cython"])
def test_our_batches_read_with_aiokafka(codec, reader_cls):
    raw = build_batch(SAMPLE, base_offset=7, compression=codec, producer_id=9, producer_epoch=0, base_sequence=0)
    theirs = reader_cls(raw)
    assert theirs.validate_crc()
    assert theirs.compression_type == codec_id(codec)
    assert (theirs.producer_id, theirs.base_sequence, theirs.next_offset) == (9, 0, 7 + len(SAMPLE))
    assert _their_view(theirs) == _expected_view(SAMPLE, 7)


def test_our_log_append_time_batches_read_with_aiokafka():
    from logbroker.records.record_batch import set_log_append_time
    raw = bytearray(build_batch(SAMPLE, compression="lz4"))
    set_log_append_time(raw, 0, 42)
    theirs = aio_records._DefaultRecordBatchPy(bytes(raw))
    assert theirs.validate_crc() and theirs.timestamp_type == 1
    assert [r.timestamp for r in theirs] == [42] * len(SAMPLE)


maybe_bytes = st.none() | st.binary(max_size=40)
records_strategy = st.lists(
    st.tuples(maybe_bytes, maybe_bytes,
              st.lists(st.tuples(st.text(max_size=6), st.none() | st.binary(max_size=10)), max_size=2),
              st.integers(0, 1 << 41)),
    min_size=1, max_size=8)


@settings(max_examples=60, deadline=None)
@given(records=records_strategy, codec=st.sampled_from(CODECS))
def test_aiokafka_and_ours_agree_both_ways(records, codec):
    ours = build_batch(records, compression=codec)
    assert _their_view(aio_records.DefaultRecordBatch(ours)) == _expected_view(records)
    theirs = _build_with(aio_records.DefaultRecordBatchBuilder, records, codec)
    assert [(r.offset, r.key, r.value, list(r.headers), r.timestamp)
            for r in RecordBatch(theirs).records()] == _expected_view(records)


# --- librdkafka, captured ---------------------------------------------------------------------

def _librdkafka(name: str) -> bytes:
    return (DATA / f"librdkafka_{name}.bin").read_bytes()


def _rdkafka_small_expected():
    records = []
    for i in range(5):
        records.append((None if i == 2 else b"key-%d" % i, b"" if i == 3 else (b"value %d " % i) * 20,
                        (("h1", b"v1"), ("null-header", None)) if i != 4 else (), 1_700_000_000_000 + i * 7))
    return records


@pytest.mark.parametrize("codec", CODECS)
def test_librdkafka_batches_read_with_ours(codec):
    raw = _librdkafka(codec)
    ((position, header),) = list(iter_batches(raw))
    assert header.size_in_bytes == len(raw)
    batch = RecordBatch(raw, position)
    assert batch.is_valid()
    assert batch.header.compression_name == codec
    assert [(r.key, r.value, r.headers, r.timestamp) for r in batch.records()] == _rdkafka_small_expected()
    assert [r.offset for r in batch.records()] == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_librdkafka_large_batches_read_with_ours(codec):
    batch = RecordBatch(_librdkafka(f"{codec}_large"))
    assert batch.is_valid()
    assert batch.header.compression_name == codec
    values = [r.value for r in batch.records()]
    assert values == [bytes(range(256)) * 400 + b"%d" % i for i in range(3)]


def test_librdkafka_snappy_is_raw_not_xerial():
    section = RecordBatch(_librdkafka("snappy")).records_section()
    assert bytes(section[:8]) != b"\x82SNAPPY\x00"


def test_librdkafka_idempotent_and_transactional_batches():
    idempotent = RecordBatch(_librdkafka("idempotent"))
    assert idempotent.header.producer_id >= 0 and idempotent.header.base_sequence == 0
    assert [r.sequence for r in idempotent.records()] == [0, 1, 2, 3, 4]
    txn = RecordBatch(_librdkafka("transactional"))
    assert txn.header.is_transactional and not txn.header.is_control and txn.is_valid()
    assert len(txn.records()) == 5


@pytest.mark.parametrize("codec", CODECS)
def test_librdkafka_records_rebuilt_by_us_read_with_aiokafka(codec):
    records = RecordBatch(_librdkafka(codec)).records()
    ours = build_batch(records, compression=codec)
    assert [(r.key, r.value, tuple(r.headers), r.timestamp) for r in aio_records.DefaultRecordBatch(ours)] == [
        (r.key, r.value, r.headers, r.timestamp) for r in records]
