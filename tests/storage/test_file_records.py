from __future__ import annotations

import os
import struct

import pytest

from logbroker.errors import CorruptRecordError
from logbroker.records.batch import read_header
from logbroker.storage.file_records import ALLOCATE_AHEAD_BYTES, WRITEBACK_BYTES, FileRecords
from logbroker.storage.writeback import PAGE_SIZE
from logbroker.storage.values import FileRegion, TimestampAndOffset, TimestampOffset

from batches import BASE_TIMESTAMP as T0
from batches import make_batch


def _fill(records: FileRecords, specs) -> list[bytes]:
    """specs: (base_offset, count, timestamps or None) → the batches appended."""
    out = []
    for base, count, timestamps in specs:
        data = make_batch(base, count, timestamps=timestamps)
        records.append(data)
        out.append(data)
    return out


@pytest.fixture
def records(tmp_path):
    fr = FileRecords.open(tmp_path / "00000000000000000000.log")
    yield fr
    fr.close()


def test_append_writes_the_buffer_as_given(records):
    a, b = make_batch(0, 3), make_batch(3, 2)
    assert records.append(a) == len(a)
    assert records.append(memoryview(bytearray(b))) == len(b)
    assert records.size_in_bytes == len(a) + len(b) == len(records)
    assert records.path.read_bytes() == a + b
    assert records.read(len(a), 10_000) == b
    assert records.read(records.size_in_bytes, 10) == b""


def test_batches_lists_every_batch_with_its_position(records):
    batches = _fill(records, [(0, 3, None), (3, 1, None), (10, 5, None)])
    listed = list(records.batches())
    assert [p for p, _ in listed] == [0, len(batches[0]), len(batches[0]) + len(batches[1])]
    assert [(h.base_offset, h.last_offset) for _, h in listed] == [(0, 2), (3, 3), (10, 14)]
    assert [p for p, _ in records.batches(len(batches[0]))] == [len(batches[0]), listed[2][0]]


def test_batches_stop_at_a_torn_tail_at_every_cut(tmp_path):
    full = make_batch(0, 2) + make_batch(2, 1)
    first = len(make_batch(0, 2))
    for cut in range(len(full) + 1):
        path = tmp_path / f"{cut}.log"
        path.write_bytes(full[:cut])
        fr = FileRecords.open(path, file_already_exists=True)
        expected = [0] if first <= cut < len(full) else ([0, first] if cut == len(full) else [])
        assert [p for p, _ in fr.batches()] == expected
        assert [p for p, _, _ in fr.batches_with_data()] == expected
        fr.close()


def test_batch_length_below_header_is_corrupt(records):
    records.append(make_batch(0, 1))
    records.append(struct.pack(">qi", 1, 10) + bytes(60))
    with pytest.raises(CorruptRecordError, match="smaller than the minimum"):
        list(records.batches())


def test_batches_larger_than_the_read_chunk(records):
    sizes = [200_000, 10, 70_000, 1, 1]
    offset, batches = 0, []
    for size in sizes:
        data = make_batch(offset, 1, value_size=size)
        records.append(data)
        batches.append(data)
        offset += 1
    listed = list(records.batches_with_data())
    assert [bytes(d) for _, _, d in listed] == batches
    assert [h.base_offset for _, h in records.batches()] == [0, 1, 2, 3, 4]


def test_search_for_offset_with_size(records):
    batches = _fill(records, [(0, 3, None), (3, 1, None), (10, 5, None)])
    p1, p2 = len(batches[0]), len(batches[0]) + len(batches[1])
    assert records.search_for_offset_with_size(0, 0) == (0, len(batches[0]))
    assert records.search_for_offset_with_size(2, 0) == (0, len(batches[0]))
    assert records.search_for_offset_with_size(3, 0) == (p1, len(batches[1]))
    assert records.search_for_offset_with_size(5, 0) == (p2, len(batches[2]))  # in a gap: next batch
    assert records.search_for_offset_with_size(14, p1) == (p2, len(batches[2]))
    assert records.search_for_offset_with_size(15, 0) is None
    assert records.search_for_offset_with_size(0, records.size_in_bytes) is None


def test_search_for_timestamp_finds_the_exact_record(records):
    _fill(records, [(0, 3, [T0, T0 + 30, T0 + 10]), (3, 3, [T0 + 20, T0 + 50, T0 + 40])])
    assert records.search_for_timestamp(T0 + 5, 0, 0) == TimestampAndOffset(T0 + 30, 1, 0)
    assert records.search_for_timestamp(T0 + 30, 0, 0) == TimestampAndOffset(T0 + 30, 1, 0)
    assert records.search_for_timestamp(T0 + 31, 0, 0) == TimestampAndOffset(T0 + 50, 4, 0)
    # records before starting_offset do not count, even in the batch that reaches the target
    assert records.search_for_timestamp(T0 + 5, 0, 2) == TimestampAndOffset(T0 + 10, 2, 0)
    assert records.search_for_timestamp(T0 + 31, 0, 5) == TimestampAndOffset(T0 + 40, 5, 0)
    assert records.search_for_timestamp(T0 + 51, 0, 0) is None


@pytest.mark.parametrize("compression", ["gzip", "zstd", "lz4", "snappy"])
def test_search_for_timestamp_in_compressed_batch(records, compression):
    data = make_batch(7, 3, timestamps=[T0 + 5, T0 + 1, T0 + 9], compression=compression,
                      partition_leader_epoch=4)
    records.append(data)
    assert records.search_for_timestamp(T0 + 6, 0, 0) == TimestampAndOffset(T0 + 9, 9, 4)
    assert records.search_for_timestamp(T0 + 2, 0, 8) == TimestampAndOffset(T0 + 9, 9, 4)


def test_search_for_timestamp_under_log_append_time(records):
    records.append(make_batch(0, 3, timestamps=[T0, T0 + 1, T0 + 2], log_append_time=True,
                              partition_leader_epoch=-1))
    # every record carries the batch's maxTimestamp; no leader epoch → -1
    assert records.search_for_timestamp(T0, 0, 1) == TimestampAndOffset(T0 + 2, 1, -1)


def test_largest_timestamp_after(records):
    batches = _fill(records, [(0, 1, [T0 + 10]), (1, 2, [T0 + 50, T0 + 5]), (3, 1, [T0 + 20])])
    assert records.largest_timestamp_after(0) == TimestampOffset(T0 + 50, 2)
    p2 = len(batches[0]) + len(batches[1])
    assert records.largest_timestamp_after(p2) == TimestampOffset(T0 + 20, 3)
    assert records.largest_timestamp_after(records.size_in_bytes) == TimestampOffset(-1, -1)


def test_region_is_clamped_to_the_file(records):
    _fill(records, [(0, 3, None)])
    size = records.size_in_bytes
    assert records.region(10, 5) == FileRegion(records.fd, 10, 5)
    assert records.region(10, 10**9) == FileRegion(records.fd, 10, size - 10)
    assert records.region(size, 10).size == 0
    with pytest.raises(ValueError):
        records.region(size + 1, 1)


def test_region_is_sendable_with_sendfile(records, tmp_path):
    data = make_batch(0, 3)
    records.append(data)
    region = records.region(0, 10**6)
    out = tmp_path / "out"
    with open(out, "wb") as f:
        sent = os.sendfile(f.fileno(), region.fd, region.position, region.size)
    assert sent == len(data) and out.read_bytes() == data


def test_truncate_to(records):
    batches = _fill(records, [(0, 1, None), (1, 1, None)])
    assert records.truncate_to(len(batches[0])) == len(batches[1])
    assert records.path.read_bytes() == batches[0]
    with pytest.raises(ValueError):
        records.truncate_to(len(batches[0]) + 1)
    assert records.truncate_to(0) == len(batches[0]) and records.size_in_bytes == 0


def _allocated_bytes(path) -> int:
    return os.stat(path).st_blocks * 512


def test_writeback_starts_every_writeback_bytes_at_whole_pages_and_changes_no_byte(records):
    big = make_batch(0, 1, value_size=1 << 20)
    written = []
    while records.size_in_bytes + len(big) < WRITEBACK_BYTES:
        records.append(big)
        written.append(big)
    assert not records.writeback_due()
    records.append(big)
    written.append(big)
    assert records.writeback_due()
    records.start_writeback()
    assert not records.writeback_due()  # from the last whole page on, the count starts again
    assert records.size_in_bytes - PAGE_SIZE < records.size_in_bytes // PAGE_SIZE * PAGE_SIZE <= records.size_in_bytes
    records.start_writeback()  # nothing new: a no-op
    assert records.path.read_bytes() == b"".join(written)
    assert [h.base_offset for _, h in records.batches()] == [0] * len(written)


def _with_blocks_ahead(tmp_path) -> tuple[FileRecords, bytes]:
    """A file of one batch whose writeback step allocated blocks past its end."""
    fr = FileRecords.open(tmp_path / "00000000000000000000.log")
    data = make_batch(0, 2)
    fr.append(data)
    fr.start_writeback()
    if _allocated_bytes(fr.path) < ALLOCATE_AHEAD_BYTES:
        fr.close()
        pytest.skip("this file system does not preallocate (fallocate KEEP_SIZE)")
    return fr, data


def test_blocks_allocated_ahead_leave_the_size_alone_and_trim_gives_them_back(tmp_path):
    fr, data = _with_blocks_ahead(tmp_path)
    path = fr.path
    assert os.path.getsize(path) == len(data) == fr.size_in_bytes  # the size is the data
    assert not fr.writeback_due()
    fr.trim()
    assert _allocated_bytes(path) < 64 * 1024 and path.read_bytes() == data
    fr.start_writeback(max_size=len(data) + (1 << 20))  # allocates again, within the segment
    assert len(data) + (1 << 20) <= _allocated_bytes(path) < ALLOCATE_AHEAD_BYTES
    fr.close()  # trims too
    assert _allocated_bytes(path) < 64 * 1024 and path.read_bytes() == data


def test_blocks_allocated_ahead_before_a_crash_are_given_back_by_the_next_trim(tmp_path):
    fr, data = _with_blocks_ahead(tmp_path)
    path = fr.path
    fr.close_handlers()  # as kill -9 leaves it
    reopened = FileRecords.open(path, file_already_exists=True)
    assert reopened.size_in_bytes == len(data)
    assert [h.base_offset for _, h in reopened.batches()] == [0]  # nothing past the data to recover
    reopened.trim()
    assert _allocated_bytes(path) < 64 * 1024 and path.read_bytes() == data
    reopened.close()


def test_writeback_after_truncation_starts_again_from_the_new_end(records):
    records.start_writeback()
    big = make_batch(0, 1, value_size=1 << 20)
    while not records.writeback_due():
        records.append(big)
    records.start_writeback()
    records.truncate_to(len(big))
    records.start_writeback()  # the truncation gave the blocks ahead back: allocate again
    while not records.writeback_due():  # due again after WRITEBACK_BYTES past the cut, not the old end
        records.append(big)
    assert records.size_in_bytes - len(big) < len(big) // PAGE_SIZE * PAGE_SIZE + WRITEBACK_BYTES <= records.size_in_bytes
    records.start_writeback()
    assert not records.writeback_due()


def test_writeback_of_a_closed_file_raises_oserror_or_valueerror(tmp_path):
    fr = FileRecords.open(tmp_path / "00000000000000000000.log")
    fr.append(make_batch(0, 1))
    fr.close_handlers()
    with pytest.raises((OSError, ValueError)):
        fr.start_writeback()


def test_preallocated_file_starts_empty_and_is_trimmed_on_close(tmp_path):
    path = tmp_path / "00000000000000000000.log"
    fr = FileRecords.open(path, preallocate=True, init_file_size=1 << 20)
    assert os.path.getsize(path) == 1 << 20 and fr.size_in_bytes == 0
    data = make_batch(0, 2)
    fr.append(data)
    assert [h.base_offset for _, h in fr.batches()] == [0]
    fr.close()
    assert path.read_bytes() == data


def test_reopen_after_crash_of_preallocated_file_sees_the_zeros(tmp_path):
    path = tmp_path / "00000000000000000000.log"
    fr = FileRecords.open(path, preallocate=True, init_file_size=4096)
    fr.append(make_batch(0, 2))
    fr.close_handlers()
    reopened = FileRecords.open(path, file_already_exists=True, preallocate=True, init_file_size=4096)
    assert reopened.size_in_bytes == 4096
    with pytest.raises(CorruptRecordError):  # recovery truncates here
        list(reopened.batches())
    reopened.close()


def test_rename_keeps_the_descriptor_and_delete_removes_the_file(records, tmp_path):
    data = make_batch(0, 1)
    records.append(data)
    fd = records.fd
    records.rename_to(tmp_path / "00000000000000000000.log.deleted")
    assert records.fd == fd and records.read(0, 100) == data[:100]
    assert records.delete()
    assert not (tmp_path / "00000000000000000000.log.deleted").exists()
    assert not records.delete()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_reads_batches_written_by_kafka_python(records):
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 20)
    for i, ts in enumerate([T0 + 3, T0 + 8, T0 + 1]):
        builder.append(i, timestamp=ts, key=None, value=b"v%d" % i, headers=[])
    data = bytes(builder.build())
    records.append(data)
    ((position, header),) = list(records.batches())
    assert (position, header.last_offset, header.max_timestamp) == (0, 2, T0 + 8)
    assert header == read_header(data)
    assert records.search_for_timestamp(T0 + 4, 0, 0).offset == 1
