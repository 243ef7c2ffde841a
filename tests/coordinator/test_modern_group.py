"""What consumer and share groups share: the digest of the subscribed topics' metadata."""

from __future__ import annotations

import uuid

from logbroker.coordinator.modern_group import TopicMetadata, topics_hash

A, B = uuid.UUID(int=1), uuid.UUID(int=2)


def test_topics_hash_changes_with_each_topic_id_and_partition_count_and_not_with_order():
    one = {"t": TopicMetadata(A, "t", 1), "u": TopicMetadata(B, "u", 2)}
    assert topics_hash({}) == 0
    assert topics_hash(one) == topics_hash(dict(reversed(list(one.items()))))
    assert -2**63 <= topics_hash(one) < 2**63 and topics_hash(one) != 0
    variants = [
        {"t": TopicMetadata(A, "t", 1)},  # a topic gone
        {"t": TopicMetadata(A, "t", 2), "u": TopicMetadata(B, "u", 2)},  # partitions added
        {"t": TopicMetadata(uuid.UUID(int=3), "t", 1), "u": TopicMetadata(B, "u", 2)},  # created again
    ]
    assert len({topics_hash(one), *map(topics_hash, variants)}) == 4
