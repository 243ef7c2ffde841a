"""TransactionIndex: Kafka's 34-byte AbortedTxn entries, lazily created, truncation, torn tails."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from logbroker.storage.abstract_index import CorruptIndexError
from logbroker.storage.transaction_index import (
    ABORTED_TXN_SIZE,
    AbortedTxn,
    TransactionIndex,
    decode_aborted_txns,
)


def kafka_entry(pid: int, first: int, last: int, lso: int) -> bytes:
    """The entry as Kafka's AbortedTxn writes it, restated from its schema."""
    return struct.pack(">hqqqq", 0, pid, first, last, lso)


def test_entry_is_34_bytes_in_kafkas_layout():
    assert ABORTED_TXN_SIZE == 34
    assert AbortedTxn(7, 100, 120, 101).encode() == kafka_entry(7, 100, 120, 101)


def test_file_is_created_only_by_the_first_append(tmp_path):
    path = tmp_path / "00000000000000000100.txnindex"
    index = TransactionIndex(100, path)
    assert index.all_aborted_txns() == [] and not path.exists()
    index.append(AbortedTxn(1, 100, 105, 106))
    index.append(AbortedTxn(2, 101, 110, 111))
    index.close()
    assert path.read_bytes() == kafka_entry(1, 100, 105, 106) + kafka_entry(2, 101, 110, 111)
    assert TransactionIndex(100, path).all_aborted_txns() == [AbortedTxn(1, 100, 105, 106),
                                                               AbortedTxn(2, 101, 110, 111)]


def test_last_offsets_must_increase(tmp_path):
    index = TransactionIndex(0, tmp_path / "0.txnindex")
    index.append(AbortedTxn(1, 0, 5, 6))
    with pytest.raises(ValueError):
        index.append(AbortedTxn(2, 1, 5, 6))


def test_truncate_drops_entries_whose_marker_is_at_or_after_the_offset(tmp_path):
    path = tmp_path / "0.txnindex"
    index = TransactionIndex(0, path)
    for i in range(5):
        index.append(AbortedTxn(i, i * 10, i * 10 + 5, i * 10 + 6))
    index.truncate_to(26)  # the entry with last offset 25 stays; 35 and 45 go
    assert [t.producer_id for t in index.all_aborted_txns()] == [0, 1, 2]
    assert path.stat().st_size == 3 * 34
    index.truncate_to(0)
    assert index.all_aborted_txns() == [] and path.stat().st_size == 0


def test_a_torn_trailing_entry_is_ignored_then_cut_by_the_next_append(tmp_path):
    path = tmp_path / "0.txnindex"
    whole = kafka_entry(1, 0, 5, 6)
    for cut in range(1, 34):
        path.write_bytes(whole + kafka_entry(2, 7, 9, 10)[:cut])
        index = TransactionIndex(0, path)
        assert index.all_aborted_txns() == [AbortedTxn(1, 0, 5, 6)]
        index.append(AbortedTxn(3, 8, 12, 13))
        index.close()
        assert path.read_bytes() == whole + kafka_entry(3, 8, 12, 13)


def test_unknown_version_is_corrupt():
    with pytest.raises(CorruptIndexError):
        decode_aborted_txns(struct.pack(">hqqqq", 1, 1, 2, 3, 4))


def test_sanity_check_refuses_a_marker_below_the_base_offset(tmp_path):
    path = tmp_path / "100.txnindex"
    path.write_bytes(kafka_entry(1, 10, 50, 51))
    with pytest.raises(CorruptIndexError):
        TransactionIndex(100, path).sanity_check()


def test_collect_returns_overlapping_entries_and_stops_on_lso(tmp_path):
    index = TransactionIndex(0, tmp_path / "0.txnindex")
    index.append(AbortedTxn(1, 0, 10, 11))
    index.append(AbortedTxn(2, 5, 20, 21))
    index.append(AbortedTxn(3, 30, 40, 41))
    found, complete = index.collect_aborted_txns(12, 25)
    assert [t.producer_id for t in found] == [2] and complete
    found, complete = index.collect_aborted_txns(0, 100)
    assert [t.producer_id for t in found] == [1, 2, 3] and not complete


@given(st.lists(st.tuples(st.integers(0, 2**40), st.integers(0, 50), st.integers(1, 50)),
                max_size=20),
       st.integers(0, 2**41), st.integers(0, 2**41))
def test_collect_matches_the_overlap_rule(tmp_path_factory, spec, fetch, upper):
    path = tmp_path_factory.mktemp("txn") / "0.txnindex"
    index = TransactionIndex(0, path)
    txns, last = [], -1
    for pid, length, gap in spec:
        last += gap + length
        txn = AbortedTxn(pid, last - length, last, last + 1)
        index.append(txn)
        txns.append(txn)
    found, _ = index.collect_aborted_txns(fetch, upper)
    expected = [t for t in txns if t.last_offset >= fetch and t.first_offset < upper]
    # Entries past the stopping point cannot overlap, so the rule gives the same set.
    assert found == expected


def kafka_collect(txns, fetch, upper):
    """Kafka's TransactionIndex.collectAbortedTxns, restated: every entry from the file start."""
    found = []
    for txn in txns:
        if txn.last_offset >= fetch and txn.first_offset < upper:
            found.append(txn)
        if txn.last_stable_offset >= upper:
            return found, True
    return found, False


def test_a_large_index_is_searched_in_the_file_as_kafka_scans_it(tmp_path):
    # 1,000 entries: more than one read's worth, so the search is a binary search over preads;
    # a fresh index object over the same file (as after a restart) holds none of them in memory.
    path = tmp_path / "00000000000000001000.txnindex"
    writer = TransactionIndex(1000, path)
    txns, last = [], 1000
    for i in range(1000):
        first, last = last + 1, last + 3 + i % 7
        txn = AbortedTxn(i % 13, first, last, first - i % 3)
        writer.append(txn)
        txns.append(txn)
    writer.close()
    reader = TransactionIndex(1000, path)
    for fetch in (0, 1000, 1001, txns[119].last_offset, txns[120].last_offset + 1, txns[500].first_offset,
                  txns[-1].last_offset, txns[-1].last_offset + 1):
        for upper in (fetch + 1, fetch + 10, fetch + 500, txns[-1].last_offset + 10):
            assert reader.collect_aborted_txns(fetch, upper) == kafka_collect(txns, fetch, upper)
    reader.truncate_to(txns[700].last_offset)
    assert reader.all_aborted_txns() == txns[:700] and path.stat().st_size == 700 * ABORTED_TXN_SIZE
    with pytest.raises(ValueError):
        reader.append(txns[600])
    reader.append(txns[700])
    assert TransactionIndex(1000, path).all_aborted_txns() == txns[:701]


def test_collect_refuses_an_entry_of_an_unknown_version_it_meets(tmp_path):
    path = tmp_path / "0.txnindex"
    path.write_bytes(kafka_entry(1, 0, 5, 6) + struct.pack(">hqqqq", 1, 2, 7, 9, 10))
    index = TransactionIndex(0, path)
    assert index.collect_aborted_txns(0, 6) == ([AbortedTxn(1, 0, 5, 6)], True)  # stops before it
    with pytest.raises(CorruptIndexError):
        index.collect_aborted_txns(0, 20)
