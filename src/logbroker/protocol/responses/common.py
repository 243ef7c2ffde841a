"""Pieces shared by the hand-written response encoders."""

from __future__ import annotations

import functools
import struct
from collections.abc import Sequence
from typing import NamedTuple

from logbroker.protocol import wire
from logbroker.types import MAX_TOPIC_LENGTH

_SIZE_CORRELATION = struct.Struct(">ii")


class NodeEndpoint(NamedTuple):
    """A broker's address, in the `node_endpoints` of Produce v10+ and Fetch v16+ (KIP-951)."""

    node_id: int
    host: str
    port: int
    rack: str | None = None


def frame(parts: list[bytes], correlation_id: int, flexible: bool) -> bytes:
    """Join a response whose `parts[0]` is a placeholder for the size prefix and header."""
    parts[0] = b""
    body_size = sum(map(len, parts))
    if flexible:
        parts[0] = _SIZE_CORRELATION.pack(body_size + 5, correlation_id) + b"\x00"
    else:
        parts[0] = _SIZE_CORRELATION.pack(body_size + 4, correlation_id)
    return b"".join(parts)


def check_version(api: str, version: int, lowest: int, highest: int) -> None:
    if not lowest <= version <= highest:
        raise ValueError(f"the {api} response encoder handles v{lowest}-v{highest}, not v{version}")


def node_endpoints_tag(endpoints: Sequence[NodeEndpoint]) -> bytes:
    """The value of a `node_endpoints` tagged field (a compact array of NodeEndpoint)."""
    parts = [wire.uvarint(len(endpoints) + 1)]
    for node_id, host, port, rack in endpoints:
        parts.append(wire.I32.pack(node_id))
        parts.append(wire.compact_string(host))
        parts.append(wire.I32.pack(port))
        parts.append(wire.compact_nullable_string(rack))
        parts.append(wire.NO_TAGGED_FIELDS)
    return b"".join(parts)


def leader_tag(leader: tuple[int, int] | None) -> bytes | None:
    """A LeaderIdAndEpoch tagged value, or None when it is the default (-1, -1) and not sent."""
    if leader is None or (leader[0] == -1 and leader[1] == -1):
        return None
    return wire.I32_I32.pack(leader[0], leader[1]) + wire.NO_TAGGED_FIELDS


def topic_prefix(name: str, partition_count: int, flexible: bool) -> bytes:
    """A topic's name and the length of its partition array: the same in every answer to a
    producer or a consumer of that topic, so encoded once. The cache is bounded in entries, and
    holds only names a topic can have, so whatever names clients send it stays small; a miss
    costs what encoding costs."""
    if len(name) <= MAX_TOPIC_LENGTH:
        return _cached_topic_prefix(name, partition_count, flexible)
    return _topic_prefix(name, partition_count, flexible)


def _topic_prefix(name: str, partition_count: int, flexible: bool) -> bytes:
    return wire.string(name, flexible) + wire.array_length(partition_count, flexible)


_cached_topic_prefix = functools.lru_cache(maxsize=1024)(_topic_prefix)
