"""ListOffsetsResponse v1-v11 (ListOffsetsResponse.json), hand-encoded.

    throttle_time_ms int32 (v2+),
    topics [name string, partitions [partition_index int32, error_code int16, timestamp int64,
                                     offset int64, leader_epoch int32 (v4+)]]

Flexible from v6. (v0's old_style_offsets array is gone from Kafka 4 and from us.)
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import NamedTuple

from logbroker.protocol import wire
from logbroker.protocol.responses.common import check_version, frame

_V1 = struct.Struct(">ihqq")
_V4 = struct.Struct(">ihqqi")


class ListOffsetsPartitionResult(NamedTuple):
    """-1 timestamp and offset mean "none" (a timestamp lookup that found nothing)."""

    partition_index: int
    error_code: int = 0
    timestamp: int = -1
    offset: int = -1
    leader_epoch: int = -1  # v4+


class ListOffsetsTopicResult(NamedTuple):
    name: str
    partitions: Sequence[ListOffsetsPartitionResult]


def encode_list_offsets_response(
    version: int,
    correlation_id: int,
    topics: Sequence[ListOffsetsTopicResult | tuple[str, Sequence[ListOffsetsPartitionResult]]],
    *,
    throttle_time_ms: int = 0,
) -> bytes:
    """The whole response frame (size prefix, header, body)."""
    check_version("ListOffsets", version, 1, 11)
    flexible = version >= 6
    with_epoch = version >= 4
    parts: list[bytes] = [b""]
    append = parts.append
    if version >= 2:
        append(wire.I32.pack(throttle_time_ms))
    append(wire.array_length(len(topics), flexible))
    for name, partitions in topics:
        append(wire.string(name, flexible))
        append(wire.array_length(len(partitions), flexible))
        for partition_index, error_code, timestamp, offset, leader_epoch in partitions:
            if with_epoch:
                append(_V4.pack(partition_index, error_code, timestamp, offset, leader_epoch))
            else:
                append(_V1.pack(partition_index, error_code, timestamp, offset))
            if flexible:
                append(wire.NO_TAGGED_FIELDS)
        if flexible:
            append(wire.NO_TAGGED_FIELDS)
    if flexible:
        append(wire.NO_TAGGED_FIELDS)
    return frame(parts, correlation_id, flexible)
