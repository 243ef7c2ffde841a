"""What the tests driving a ReplicaManager directly share (the fixture is in conftest.py)."""

from __future__ import annotations

from logbroker.records.builder import build_batch
from logbroker.types import TopicPartition

TP = TopicPartition("durable", 0)
TIMEOUT_MS = 30_000


def batch(n: int = 1) -> bytearray:
    return bytearray(build_batch([(None, b"v%d" % i) for i in range(n)], now_ms=1_700_000_000_000))
