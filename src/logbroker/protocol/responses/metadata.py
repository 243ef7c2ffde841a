"""MetadataResponse v0-v13 (MetadataResponse.json), hand-encoded.

    throttle_time_ms int32 (v3+),
    brokers [node_id int32, host string, port int32, rack string? (v1+)],
    cluster_id string? (v2+), controller_id int32 (v1+),
    topics [error_code int16, name string (nullable v12+), topic_id uuid (v10+),
            is_internal bool (v1+),
            partitions [error_code int16, partition_index int32, leader_id int32,
                        leader_epoch int32 (v7+), replica_nodes [int32], isr_nodes [int32],
                        offline_replicas [int32] (v5+)],
            topic_authorized_operations int32 (v8+)],
    cluster_authorized_operations int32 (v8-v10), error_code int16 (v13+, KIP-1102: always 0 here)

Flexible from v9. Authorized operations are INT32_MIN ("not requested") unless given.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import NamedTuple
from uuid import UUID

from logbroker.protocol import wire
from logbroker.protocol.responses.common import check_version, frame
from logbroker.records.varint import INT32_MIN

_I32 = wire.I32
_PARTITION_V0 = struct.Struct(">hii")
_PARTITION_V7 = struct.Struct(">hiii")
AUTHORIZED_OPERATIONS_OMITTED = INT32_MIN


class MetadataBroker(NamedTuple):
    node_id: int
    host: str
    port: int
    rack: str | None = None


class MetadataPartition(NamedTuple):
    error_code: int
    partition_index: int
    leader_id: int
    leader_epoch: int = -1  # v7+
    replica_nodes: Sequence[int] = ()
    isr_nodes: Sequence[int] = ()
    offline_replicas: Sequence[int] = ()  # v5+


class MetadataTopic(NamedTuple):
    error_code: int
    name: str | None  # None only from v12, for a topic asked for by an unknown id
    partitions: Sequence[MetadataPartition] = ()
    topic_id: UUID | None = None  # v10+; None is the zero uuid
    is_internal: bool = False  # v1+
    topic_authorized_operations: int = AUTHORIZED_OPERATIONS_OMITTED  # v8+


def encode_metadata_response(
    version: int,
    correlation_id: int,
    *,
    brokers: Sequence[MetadataBroker],
    topics: Sequence[MetadataTopic],
    cluster_id: str | None = None,
    controller_id: int = -1,
    throttle_time_ms: int = 0,
    cluster_authorized_operations: int = AUTHORIZED_OPERATIONS_OMITTED,
) -> bytes:
    """The whole response frame (size prefix, header, body)."""
    check_version("Metadata", version, 0, 13)
    flexible = version >= 9
    tag = wire.NO_TAGGED_FIELDS if flexible else b""
    string = wire.compact_string if flexible else wire.legacy_string
    nullable_string = wire.compact_nullable_string if flexible else wire.legacy_nullable_string
    int32_array = wire.int32_array
    with_epoch = version >= 7
    with_offline = version >= 5

    parts: list[bytes] = [b""]
    append = parts.append
    if version >= 3:
        append(_I32.pack(throttle_time_ms))
    append(wire.array_length(len(brokers), flexible))
    for node_id, host, port, rack in brokers:
        append(_I32.pack(node_id))
        append(string(host))
        append(_I32.pack(port))
        if version >= 1:
            append(nullable_string(rack))
        append(tag)
    if version >= 2:
        append(nullable_string(cluster_id))
    if version >= 1:
        append(_I32.pack(controller_id))
    append(wire.array_length(len(topics), flexible))
    for error_code, name, partitions, topic_id, is_internal, topic_authorized_operations in topics:
        append(wire.I16.pack(error_code))
        append(nullable_string(name) if version >= 12 else string(name))
        if version >= 10:
            append(wire.uuid_bytes(topic_id))
        if version >= 1:
            append(b"\x01" if is_internal else b"\x00")
        append(wire.array_length(len(partitions), flexible))
        for (p_error_code, partition_index, leader_id, leader_epoch, replica_nodes, isr_nodes,
             offline_replicas) in partitions:
            if with_epoch:
                append(_PARTITION_V7.pack(p_error_code, partition_index, leader_id, leader_epoch))
            else:
                append(_PARTITION_V0.pack(p_error_code, partition_index, leader_id))
            append(int32_array(replica_nodes, flexible))
            append(int32_array(isr_nodes, flexible))
            if with_offline:
                append(int32_array(offline_replicas, flexible))
            append(tag)
        if version >= 8:
            append(_I32.pack(topic_authorized_operations))
        append(tag)
    if 8 <= version <= 10:
        append(_I32.pack(cluster_authorized_operations))
    if version >= 13:
        append(wire.I16.pack(0))
    append(tag)
    return frame(parts, correlation_id, flexible)
