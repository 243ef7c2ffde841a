"""Small value types shared by every layer."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, order=True)
class TopicPartition:
    """A topic partition. `str()` gives Kafka's directory name form, `topic-partition`."""

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
