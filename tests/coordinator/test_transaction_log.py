"""The `__transaction_state` record schemas (Kafka's TransactionLogKey v0 / TransactionLogValue
v0-v1) and the partition of a transactional id."""

from __future__ import annotations

import struct

from hypothesis import given, strategies as st

from logbroker.coordinator.offsets_schema import java_string_hash
from logbroker.coordinator.transaction_log import (
    TransactionLogValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    partition_for,
)
from logbroker.coordinator.transaction_metadata import TransactionState
from logbroker.types import TopicPartition


def test_key_is_version_0_and_the_id():
    assert encode_key("tx") == b"\x00\x00\x00\x02tx"
    assert decode_key(b"\x00\x00\x00\x02tx") == "tx"


def test_value_v0_bytes_match_kafkas_layout():
    value = TransactionLogValue(7, 3, 60_000, TransactionState.ONGOING,
                                (TopicPartition("b", 1), TopicPartition("a", 2), TopicPartition("a", 0)), 1000, 900)
    expected = (struct.pack(">hqhib", 0, 7, 3, 60_000, 1) + struct.pack(">i", 2)
                + struct.pack(">h", 1) + b"a" + struct.pack(">iii", 2, 0, 2)
                + struct.pack(">h", 1) + b"b" + struct.pack(">ii", 1, 1)
                + struct.pack(">qq", 1000, 900))
    assert encode_value(value) == expected
    assert decode_value(expected) == TransactionLogValue(
        7, 3, 60_000, 1, (TopicPartition("a", 0), TopicPartition("a", 2), TopicPartition("b", 1)), 1000, 900)


def test_value_v1_flexible_with_tagged_fields_is_read():
    data = (struct.pack(">hqhib", 1, 7, 3, 60_000, 2) + bytes([2])  # one topic (compact: n + 1)
            + bytes([2]) + b"a" + bytes([2]) + struct.pack(">i", 4) + bytes([0])  # topic "a", [4], no tags
            + struct.pack(">qq", 1000, 900)
            + bytes([2]) + bytes([0, 8]) + struct.pack(">q", 5) + bytes([2, 2]) + struct.pack(">h", 2))
    value = decode_value(data)
    assert (value.producer_id, value.producer_epoch, value.state, value.partitions) == (
        7, 3, 2, (TopicPartition("a", 4),))
    assert (value.previous_producer_id, value.next_producer_id, value.client_transaction_version) == (5, -1, 2)


@given(st.integers(0, 2**63 - 1), st.integers(-1, 32767), st.integers(1, 2**31 - 1),
       st.sampled_from(list(TransactionState)),
       st.sets(st.tuples(st.sampled_from(["t", "topic-2", "ü"]), st.integers(0, 1000)), max_size=20),
       st.integers(-1, 2**50), st.integers(-1, 2**50))
def test_value_round_trips(producer_id, epoch, timeout_ms, state, partitions, updated_ms, started_ms):
    value = TransactionLogValue(producer_id, epoch, timeout_ms, int(state),
                                tuple(sorted(TopicPartition(t, p) for t, p in partitions)), updated_ms, started_ms)
    assert decode_value(encode_value(value)) == value


def test_partition_is_kafkas_utils_abs_of_the_hash_code():
    # "polygenelubricants" hashes to Integer.MIN_VALUE: Utils.abs maps it to 0.
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert partition_for("polygenelubricants", 50) == 0
    negative = next(s for s in (f"txn-{i}" for i in range(100)) if java_string_hash(s) < 0)
    assert partition_for(negative, 50) == (-java_string_hash(negative)) % 50
    assert partition_for("my-transactional-id", 50) == abs(java_string_hash("my-transactional-id")) % 50
