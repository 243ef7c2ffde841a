"""FetchResponse v4-v18 (FetchResponse.json), hand-encoded as chunks for zero-copy sends.

    throttle_time_ms int32, error_code int16 (v7+), session_id int32 (v7+),
    responses [topic string (v4-v12) | topic_id uuid (v13+),
               partitions [partition_index int32, error_code int16, high_watermark int64,
                           last_stable_offset int64, log_start_offset int64 (v5+),
                           aborted_transactions [producer_id int64, first_offset int64]?,
                           preferred_read_replica int32 (v11+), records,
                           <tag 0 diverging_epoch, tag 1 current_leader, tag 2 snapshot_id (v12+)>]]
    <tag 0: node_endpoints (v16+)>

Flexible from v12. v13 replaces the topic name by its id (clients.md 6); v14-v18 add nothing to
the response but node_endpoints (v16).

The record data of each partition is not copied: `encode_fetch_response` returns a list of chunks,
`bytes` pieces interleaved with the partitions' record objects, in wire order. A record object is
anything with an int `.size` (the storage layer's file region, sent with os.sendfile) or a
bytes-like object (sent as it is). The frame's size prefix, in the first chunk, counts them all.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol
from uuid import UUID

from logbroker.protocol import wire
from logbroker.protocol.responses.common import (
    NodeEndpoint,
    check_version,
    leader_tag,
    node_endpoints_tag,
    topic_prefix,
)

_SIZE_CORRELATION = struct.Struct(">ii")
_PARTITION_V4 = struct.Struct(">ihqq")
_PARTITION_V5 = struct.Struct(">ihqqq")
# A consumer's usual partition from v12: its numbers, aborted_transactions null (0) or empty (1),
# preferred_read_replica; and, with no records, an empty record set and no tagged fields.
_USUAL_V12 = struct.Struct(">ihqqqBi")
_NO_RECORDS_NO_TAGS = wire.uvarint(1) + wire.NO_TAGGED_FIELDS
_TOP_V7 = struct.Struct(">ihi")
_ABORTED = struct.Struct(">qq")
_I32 = wire.I32
_EPOCH_END_OFFSET = struct.Struct(">iq")  # diverging_epoch: epoch, end_offset
_SNAPSHOT_ID = struct.Struct(">qi")  # snapshot_id: end_offset, epoch

_BYTES_LIKE = (bytes, bytearray, memoryview)


class RecordsLike(Protocol):
    """What the storage layer hands over for a partition's records: it knows its size in bytes."""

    size: int


class FetchPartitionData(NamedTuple):
    """One partition of a Fetch response.

    `records` None means no records (sent as an empty record set, as Kafka does, never as null).
    `aborted_transactions` None is a null array (read_uncommitted); under read_committed pass a
    sequence of (producer_id, first_offset), possibly empty. The three tagged fields (v12+) are
    sent only when set and not all -1.
    """

    partition_index: int
    error_code: int
    high_watermark: int
    last_stable_offset: int = -1
    log_start_offset: int = -1
    aborted_transactions: Sequence[tuple[int, int]] | None = None
    preferred_read_replica: int = -1
    records: RecordsLike | bytes | None = None
    diverging_epoch: tuple[int, int] | None = None  # (epoch, end_offset)
    current_leader: tuple[int, int] | None = None  # (leader_id, leader_epoch)
    snapshot_id: tuple[int, int] | None = None  # (end_offset, epoch)


class FetchTopicData(NamedTuple):
    """A topic of a Fetch response: named up to v12, identified by `topic_id` from v13."""

    topic: str
    partitions: Sequence[FetchPartitionData]
    topic_id: UUID | None = None


def records_size(records: Any) -> int:
    if records is None:
        return 0
    if isinstance(records, _BYTES_LIKE):
        return records.nbytes if isinstance(records, memoryview) else len(records)
    return records.size


def chunks_size(chunks: Sequence[Any]) -> int:
    """Total bytes of a chunk list (equals the size prefix + 4)."""
    return sum(records_size(chunk) for chunk in chunks)


def _partition_tags(diverging_epoch, current_leader, snapshot_id) -> bytes:
    """A partition's tagged fields (v12+): each sent only when set and not all -1."""
    tags = []
    if diverging_epoch is not None and diverging_epoch != (-1, -1):
        tags.append((0, _EPOCH_END_OFFSET.pack(*diverging_epoch) + wire.NO_TAGGED_FIELDS))
    leader = leader_tag(current_leader)
    if leader is not None:
        tags.append((1, leader))
    if snapshot_id is not None and snapshot_id != (-1, -1):
        tags.append((2, _SNAPSHOT_ID.pack(*snapshot_id) + wire.NO_TAGGED_FIELDS))
    return wire.tagged_fields(tags) if tags else wire.NO_TAGGED_FIELDS


def encode_fetch_response(
    version: int,
    correlation_id: int,
    topics: Sequence[FetchTopicData],
    *,
    throttle_time_ms: int = 0,
    error_code: int = 0,
    session_id: int = 0,
    node_endpoints: Sequence[NodeEndpoint] = (),
) -> list[Any]:
    """The whole response frame as chunks: `bytes` pieces and record objects, in order.

    Consecutive byte pieces are joined, so there are at most 2 × (partitions with records) + 1
    chunks; the first starts with the size prefix and header.
    """
    check_version("Fetch", version, 4, 18)
    flexible = version >= 12
    by_topic_id = version >= 13
    with_log_start = version >= 5
    with_preferred_replica = version >= 11

    chunks: list[Any] = []
    parts: list[bytes] = [b""]  # bytes since the last record object; [0] becomes the header
    append = parts.append
    total = 0  # bytes of the response after the size prefix and header

    if version >= 7:
        append(_TOP_V7.pack(throttle_time_ms, error_code, session_id))
    else:
        append(_I32.pack(throttle_time_ms))
    append(wire.array_length(len(topics), flexible))
    for topic, partitions, topic_id in topics:
        if by_topic_id:
            append(wire.uuid_bytes(topic_id) + wire.array_length(len(partitions), flexible))
        else:
            append(topic_prefix(topic, len(partitions), flexible))
        for (partition_index, p_error_code, high_watermark, last_stable_offset, log_start_offset,
             aborted, preferred_read_replica, records, diverging_epoch, current_leader,
             snapshot_id) in partitions:
            no_tags = diverging_epoch is None and current_leader is None and snapshot_id is None
            usual = flexible and no_tags and not aborted
            if usual:  # every partition of a consumer's fetch, nearly: one pack
                append(_USUAL_V12.pack(partition_index, p_error_code, high_watermark, last_stable_offset,
                                       log_start_offset, 0 if aborted is None else 1, preferred_read_replica))
            else:
                if with_log_start:
                    append(_PARTITION_V5.pack(partition_index, p_error_code, high_watermark,
                                              last_stable_offset, log_start_offset))
                else:
                    append(_PARTITION_V4.pack(partition_index, p_error_code, high_watermark,
                                              last_stable_offset))
                if aborted is None:
                    append(wire.NULL_COMPACT if flexible else wire.NULL_LEGACY_ARRAY)
                else:
                    append(wire.array_length(len(aborted), flexible))
                    for producer_id, first_offset in aborted:
                        append(_ABORTED.pack(producer_id, first_offset))
                        if flexible:
                            append(wire.NO_TAGGED_FIELDS)
                if with_preferred_replica:
                    append(_I32.pack(preferred_read_replica))
            size = 0 if records is None else records_size(records)
            if usual and not size:
                append(_NO_RECORDS_NO_TAGS)
                continue
            append(wire.uvarint(size + 1) if flexible else _I32.pack(size))
            if size:
                piece = b"".join(parts)
                total += len(piece) + size
                chunks.append(piece)
                chunks.append(records)
                parts = [b""]
                append = parts.append
            if flexible and no_tags:
                append(wire.NO_TAGGED_FIELDS)
            elif flexible:
                append(_partition_tags(diverging_epoch, current_leader, snapshot_id))
        if flexible:
            append(wire.NO_TAGGED_FIELDS)
    if flexible:
        if version >= 16 and node_endpoints:
            append(wire.tagged_fields(((0, node_endpoints_tag(node_endpoints)),)))
        else:
            append(wire.NO_TAGGED_FIELDS)
    piece = b"".join(parts)
    total += len(piece)
    chunks.append(piece)

    header = (_SIZE_CORRELATION.pack(total + 5, correlation_id) + b"\x00" if flexible
              else _SIZE_CORRELATION.pack(total + 4, correlation_id))
    chunks[0] = header + chunks[0]
    return chunks
