"""ProduceResponse v3-v12 (ProduceResponse.json), hand-encoded.

    responses [name, partition_responses [index int32, error_code int16, base_offset int64,
               log_append_time_ms int64, log_start_offset int64 (v5+),
               record_errors [batch_index int32, batch_index_error_message string?] (v8+),
               error_message string? (v8+), <tag 0: current_leader (v10+)>]]
    throttle_time_ms int32, <tag 0: node_endpoints (v10+)>

Flexible from v9. v12 is v11 again (it only tells the broker the client does transactions v2).
v13 keys topics by id and is not encoded here yet.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Sequence
from typing import NamedTuple

from logbroker.protocol import wire
from logbroker.protocol.responses.common import (
    NodeEndpoint,
    check_version,
    frame,
    leader_tag,
    node_endpoints_tag,
    topic_prefix,
)

_V3 = struct.Struct(">ihqq")
_V5 = struct.Struct(">ihqqq")
_I32 = wire.I32

# record_errors empty, error_message null: the tail of every partition without per-record errors.
_NO_RECORD_ERRORS_LEGACY = b"\x00\x00\x00\x00\xff\xff"
_NO_RECORD_ERRORS_FLEXIBLE = b"\x01\x00"
# What follows a plain partition's numbers, by (v8+, flexible): no record errors nor message, and
# (flexible) no tagged fields.
_PLAIN_TAIL = {(False, False): b"", (True, False): _NO_RECORD_ERRORS_LEGACY,
               (True, True): _NO_RECORD_ERRORS_FLEXIBLE + wire.NO_TAGGED_FIELDS}
_NO_THROTTLE_FLEXIBLE = bytes(4) + wire.NO_TAGGED_FIELDS


class ProducePartitionResult(NamedTuple):
    """One partition's result. `log_append_time_ms` is -1 unless the topic uses LogAppendTime."""

    index: int
    error_code: int = 0
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    record_errors: Sequence[tuple[int, str | None]] = ()  # (batch_index, message), v8+
    error_message: str | None = None  # v8+
    current_leader: tuple[int, int] | None = None  # (leader_id, leader_epoch), v10+


class ProduceTopicResult(NamedTuple):
    name: str
    partitions: Sequence[ProducePartitionResult]


def encode_produce_response(
    version: int,
    correlation_id: int,
    topics: Sequence[ProduceTopicResult | tuple[str, Sequence[ProducePartitionResult]]],
    *,
    throttle_time_ms: int = 0,
    node_endpoints: Sequence[NodeEndpoint] = (),
) -> bytes:
    """The whole response frame (size prefix, header, body)."""
    if not 3 <= version <= 12:
        check_version("Produce", version, 3, 12)  # raises
    flexible = version >= 9
    with_leaders = version >= 10
    with_log_start = version >= 5
    with_record_errors = version >= 8
    # A partition with nothing but its numbers (no record errors, message or leader: every
    # successful append) is one pack and a constant tail: what a small produce answers.
    plain_tail = _PLAIN_TAIL[(with_record_errors, flexible)]
    parts: list[bytes] = [b"", _array_length(len(topics), flexible)]
    append = parts.append
    for name, partitions in topics:
        append(topic_prefix(name, len(partitions), flexible))
        for (index, error_code, base_offset, log_append_time_ms, log_start_offset, record_errors,
             error_message, current_leader) in partitions:
            if with_log_start:
                append(_V5.pack(index, error_code, base_offset, log_append_time_ms, log_start_offset))
            else:
                append(_V3.pack(index, error_code, base_offset, log_append_time_ms))
            if not record_errors and error_message is None and current_leader is None:
                append(plain_tail)
                continue
            if with_record_errors:
                if not record_errors and error_message is None:
                    append(_NO_RECORD_ERRORS_FLEXIBLE if flexible else _NO_RECORD_ERRORS_LEGACY)
                else:
                    append(wire.array_length(len(record_errors), flexible))
                    for batch_index, message in record_errors:
                        append(_I32.pack(batch_index))
                        append(wire.string(message, flexible))
                        if flexible:
                            append(wire.NO_TAGGED_FIELDS)
                    append(wire.string(error_message, flexible))
            if flexible:
                leader = leader_tag(current_leader) if with_leaders else None
                append(wire.NO_TAGGED_FIELDS if leader is None else wire.tagged_fields(((0, leader),)))
        if flexible:
            append(wire.NO_TAGGED_FIELDS)
    if flexible:
        if with_leaders and node_endpoints:
            append(_I32.pack(throttle_time_ms))
            append(wire.tagged_fields(((0, node_endpoints_tag(node_endpoints)),)))
        else:
            append(_I32.pack(throttle_time_ms) + wire.NO_TAGGED_FIELDS if throttle_time_ms else _NO_THROTTLE_FLEXIBLE)
    else:
        append(_I32.pack(throttle_time_ms))
    return frame(parts, correlation_id, flexible)


_array_length = functools.lru_cache(maxsize=64)(wire.array_length)  # the topic count: 1, nearly always
