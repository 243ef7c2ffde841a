"""The cluster model: brokers, topics, assignments and partition states.

Plain values, shared by the file store (one node) and the ZooKeeper store (a cluster). Names follow
Kafka's ZooKeeper-era znodes: a topic's assignment is `partitions → replicas`, a partition's state
is `leader, leader_epoch, isr, controller_epoch`.
"""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass, field


def new_topic_id() -> uuid.UUID:
    """A random non-zero topic id (Kafka's Uuid.randomUuid)."""
    while True:
        topic_id = uuid.uuid4()
        if topic_id.int != 0:
            return topic_id


def topic_id_to_str(topic_id: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()


def topic_id_from_str(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """A live broker. `host`/`port` are its default address (the PLAINTEXT endpoint's, else the
    first); `endpoints` are all its advertised listeners as (listener name, host, port), empty
    for a registration older than endpoints."""

    broker_id: int
    host: str
    port: int
    rack: str | None = None
    endpoints: tuple[tuple[str, str, int], ...] = ()

    def for_listener(self, listener_name: str) -> BrokerInfo | None:
        """This broker at its `listener_name` endpoint; None when it has no such listener (a
        registration without endpoints answers its default address for any listener)."""
        if not self.endpoints:
            return self
        for name, host, port in self.endpoints:
            if name == listener_name:
                return BrokerInfo(self.broker_id, host, port, self.rack, self.endpoints)
        return None


@dataclass(frozen=True, slots=True)
class PartitionState:
    """Leader and ISR of one partition. `leader` is -1 when the partition has none."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int = 0


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """A topic: its id, each partition's replica list, and its config overrides (Kafka key → text)."""

    name: str
    topic_id: uuid.UUID
    assignment: dict[int, tuple[int, ...]]
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def num_partitions(self) -> int:
        return len(self.assignment)

    @property
    def replication_factor(self) -> int:
        return len(self.assignment[0]) if self.assignment else 0
