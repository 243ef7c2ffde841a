"""validate_topic_name: Kafka's Topic.validate, matched against the whole string."""

from __future__ import annotations

import pytest

from logbroker.errors import InvalidTopicError
from logbroker.metadata.controller import validate_topic_name

ILLEGAL = [
    "", ".", "..", "evil\n", "\nevil", "ev\nil", "evil\r", "a b", "a\tb", "a/b", "../x", "a\\b",
    "a\x00b", "é", "topic\u2028", "\ud800", "ｔopic", "a:b", "a*", "x" * 250, "٣",
]


@pytest.mark.parametrize("name", ILLEGAL, ids=repr)
def test_illegal_topic_names_are_invalid_topic_exception(name):
    with pytest.raises(InvalidTopicError) as info:
        validate_topic_name(name)
    assert info.value.code == 17


@pytest.mark.parametrize("name", ["a", "A-b_c.9", "x" * 249, "...", "__consumer_offsets", "-"])
def test_legal_topic_names_pass(name):
    validate_topic_name(name)


def test_the_message_shows_a_newline_escaped_so_it_stays_one_log_line():
    with pytest.raises(InvalidTopicError) as info:
        validate_topic_name("evil\n")
    assert "\n" not in str(info.value) and "'evil\\n'" in str(info.value)


def test_an_excessively_large_partition_count_is_a_policy_violation(tmp_path):
    from logbroker.errors import PolicyViolationError
    from logbroker.metadata.controller import Controller
    from logbroker.metadata.local_store import LocalMetadataStore

    controller = Controller(LocalMetadataStore(tmp_path), live_brokers=[0])
    with pytest.raises(PolicyViolationError, match="excessively large batch"):
        controller.create_topic("big", num_partitions=2**31 - 1, replication_factor=1, configs={})
    controller.create_topic("t", num_partitions=1, replication_factor=1, configs={})
    with pytest.raises(PolicyViolationError, match="excessively large batch"):
        controller.create_partitions("t", 10_002)
    assert len(controller.create_partitions("t", 3)) == 2
