"""Small value types shared by every layer."""

from __future__ import annotations

from typing import NamedTuple

MAX_TOPIC_LENGTH = 249  # Kafka's Topic.validate: the longest topic name


class TopicPartition(NamedTuple):
    """A topic partition. `str()` gives Kafka's directory name form, `topic-partition`.

    A NamedTuple rather than a frozen dataclass: every request hashes and builds a few of these
    (partition maps, purgatories, fetch sessions), and a tuple's hash and construction run in C
    where a dataclass's run a Python function (~5% of a small produce request's CPU)."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"

    @classmethod
    def from_dir_name(cls, name: str) -> TopicPartition:
        """Parse a partition directory name (`topic-3`); topics may themselves contain '-'."""
        topic, sep, partition = name.rpartition("-")
        if not sep or not topic or not partition.isdigit():
            raise ValueError(f"{name!r} is not a partition directory name (expected <topic>-<partition>)")
        return cls(topic, int(partition))
