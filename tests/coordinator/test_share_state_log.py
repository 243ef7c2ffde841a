"""__share_group_state records: Kafka's ShareSnapshot / ShareUpdate schemas and placement."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from logbroker.coordinator.share_partition import StateBatch
from logbroker.coordinator.share_state_log import (
    SharePartitionKey,
    ShareSnapshot,
    decode_key,
    decode_value,
    encode_key,
    encode_snapshot_value,
    partition_for,
)

TOPIC_ID = uuid.UUID("5f0e7d2c-7a3b-4c1d-9e8f-0a1b2c3d4e5f")


@given(st.text(min_size=1, max_size=20), st.integers(0, 1000))
def test_key_round_trips(group_id, partition):
    key = SharePartitionKey(group_id, TOPIC_ID, partition)
    assert decode_key(encode_key(key)) == (0, key)


batches = st.lists(st.tuples(st.integers(0, 1 << 40), st.integers(0, 100), st.sampled_from([0, 2, 4]),
                             st.integers(0, 10)), max_size=5)


@given(st.integers(0, 65535), st.integers(0, 1000), st.integers(-1, 1000), st.integers(0, 1 << 50), batches)
def test_snapshot_value_round_trips(snapshot_epoch, state_epoch, leader_epoch, start, raw):
    value = ShareSnapshot(snapshot_epoch, state_epoch, leader_epoch, start,
                          tuple(StateBatch(f, f + n, s, c) for f, n, s, c in raw))
    assert decode_value(0, encode_snapshot_value(value), None) == value


def test_placement_hashes_the_coordinator_key_as_kafka():
    key = SharePartitionKey("group", TOPIC_ID, 3)
    assert key.coordinator_key() == "group:Xw59LHo7TB2ejwobLD1OXw:3"
    assert 0 <= partition_for(key, 50) < 50
