"""What the partition-admin handlers (ElectLeaders, Alter/ListPartitionReassignments) share: their
per-partition answers grouped under topics, in topic and partition order."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

from logbroker.errors import KafkaError
from logbroker.types import TopicPartition

V = TypeVar("V")


def by_topic(results: Mapping[TopicPartition, V], entry: Callable[[int, V], dict]) -> dict[str, list[dict]]:
    """topic → [entry(partition, value), …] for every result."""
    topics: dict[str, list[dict]] = {}
    for tp, value in sorted(results.items()):
        topics.setdefault(tp.topic, []).append(entry(tp.partition, value))
    return topics


def error_fields(error: KafkaError | None) -> dict:
    """`error_code` and `error_message` of one partition's answer (0 and null on success)."""
    return {"error_code": 0 if error is None else error.code,
            "error_message": None if error is None else str(error) or None}
