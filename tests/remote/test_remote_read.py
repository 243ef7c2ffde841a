"""The pure parts of tiered storage: cutting a fetch out of a remote segment's bytes, the index
lookups, the object names and the metadata's JSON."""

from __future__ import annotations

import struct

from hypothesis import given
from hypothesis import strategies as st

from logbroker.records.builder import build_batch
from logbroker.remote.metadata import (
    RemoteLogSegmentMetadata,
    parse_object_name,
    parse_partition_dir,
    partition_dir,
)
from logbroker.remote.remote_read import index_position, select_batches, time_index_offset
from logbroker.types import TopicPartition


def segment(counts: list[int]) -> tuple[bytes, list[tuple[int, int, int]]]:
    """Batches of `counts` records each from offset 100: the bytes and (base, last, position)."""
    data, layout, offset = b"", [], 100
    for count in counts:
        batch = build_batch([(b"k", b"v" * 50)] * count, base_offset=offset)
        layout.append((offset, offset + count - 1, len(data)))
        data += batch
        offset += count
    return data, layout


def test_a_fetch_inside_a_batch_starts_at_that_batch_and_takes_whole_batches():
    data, layout = segment([3, 3, 3, 3])
    size = layout[1][2] - layout[0][2]
    start, end, needed = select_batches(data, fetch_offset=104, max_bytes=2 * size + 10, min_one_message=True)
    assert (start, end, needed) == (layout[1][2], layout[3][2], None)


def test_a_first_batch_over_the_limit_goes_whole_only_with_min_one_message():
    data, layout = segment([3, 3])
    assert select_batches(data, fetch_offset=100, max_bytes=10, min_one_message=True) == (0, layout[1][2], None)
    assert select_batches(data, fetch_offset=100, max_bytes=10, min_one_message=False) == (0, 0, None)


def test_a_first_batch_cut_by_the_read_asks_for_its_size():
    data, layout = segment([3, 3])
    first = layout[1][2]
    assert select_batches(data[:first - 5], fetch_offset=100, max_bytes=1 << 20,
                          min_one_message=True) == (0, 0, first)
    assert select_batches(data[:len(data) - 5], fetch_offset=100, max_bytes=1 << 20,
                          min_one_message=True) == (0, first, None)


def test_offset_index_lookup_finds_the_last_entry_at_or_below_and_ignores_preallocated_zeros():
    index = struct.pack(">iiiiii", 5, 4096, 9, 8192, 20, 12000) + bytes(8 * 4)
    assert index_position(index, 100, 100) == 0
    assert index_position(index, 100, 108) == 4096
    assert index_position(index, 100, 109) == 8192
    assert index_position(index, 100, 1000) == 12000


def test_time_index_lookup_is_kafkas_largest_entry_at_or_below():
    index = struct.pack(">qiqi", 1000, 4, 2000, 9) + bytes(12)
    assert time_index_offset(index, 100, 999) == 100
    assert time_index_offset(index, 100, 1500) == 104
    assert time_index_offset(index, 100, 5000) == 109


@given(topic=st.from_regex(r"[a-zA-Z0-9._-]{1,40}", fullmatch=True), partition=st.integers(0, 10_000),
       topic_id=st.from_regex(r"[A-Za-z0-9_-]{22}", fullmatch=True))
def test_partition_directory_names_round_trip(topic, partition, topic_id):
    tp = TopicPartition(topic, partition)
    assert parse_partition_dir(partition_dir(tp, topic_id)) == (tp, topic_id)


@given(start=st.integers(0, 2**62), end_delta=st.integers(0, 2**31), size=st.integers(0, 2**40),
       epochs=st.dictionaries(st.integers(0, 2**31 - 1), st.integers(0, 2**62), max_size=4),
       txn=st.booleans(), snapshot=st.booleans())
def test_segment_metadata_round_trips_through_json_and_names_its_objects(start, end_delta, size, epochs,
                                                                        txn, snapshot):
    meta = RemoteLogSegmentMetadata(
        topic="t-1", partition=3, topic_id="AAAAAAAAAAAAAAAAAAAAAA", segment_id="-bcdefghijklmnopqrstuv",
        start_offset=start, end_offset=start + end_delta, max_timestamp_ms=17, broker_id=2,
        event_timestamp_ms=18, segment_size_in_bytes=size, segment_leader_epochs=epochs,
        has_txn_index=txn, has_producer_snapshot=snapshot)
    assert RemoteLogSegmentMetadata.from_json(meta.to_json()) == meta
    name = meta.key(".log").rsplit("/", 1)[1]
    assert parse_object_name(name) == (start, "-bcdefghijklmnopqrstuv", ".log")
    assert len(meta.data_keys()) == 4 + txn + snapshot
