"""Build v2 record batches, laid out as Kafka's Java MemoryRecordsBuilder lays them out.

- baseTimestamp is the first record's timestamp (so later deltas may be negative), unless
  given; when a delete horizon is set (compaction), baseTimestamp holds it instead and the
  delete-horizon attribute bit is set.
- maxTimestamp is the largest record timestamp.
- Offsets are base_offset + the record's index, or the records' own offsets when
  `preserve_offsets` is set (compaction keeps the offsets of retained records, gaps and all).
- With compression the records section after recordsCount is one compressed stream
  (see `records/compression.py` for what each codec writes).
- The CRC-32C covers attributes to the end; baseOffset and partitionLeaderEpoch lie outside it.

Pure functions: the only clock read is for records without a timestamp, when no `now_ms` is
passed, as a producer stamps them at send time.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Sequence
from typing import Any

from logbroker.records.batch import (
    CONTROL_FLAG_MASK,
    CRC_OFFSET,
    DELETE_HORIZON_FLAG_MASK,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
    compute_crc,
)
from logbroker.records.compression import NONE, codec_id, compress
from logbroker.records.record import encode_record

_CRC = struct.Struct(">I")

# A record to build from: a Record (or anything with key/value/headers/timestamp attributes), or
# a tuple (key, value[, headers[, timestamp]]).
RecordLike = Any


def _fields(item: RecordLike) -> tuple[Any, Any, Sequence, int | None, int | None]:
    if isinstance(item, tuple):
        key = item[0]
        value = item[1] if len(item) > 1 else None
        headers = item[2] if len(item) > 2 and item[2] is not None else ()
        timestamp = item[3] if len(item) > 3 else None
        return key, value, headers, timestamp, None
    return (item.key, item.value, item.headers or (), getattr(item, "timestamp", None),
            getattr(item, "offset", None))


def build_batch(records: Sequence[RecordLike], *, base_offset: int = 0,
                compression: int | str = NONE, compression_level: int | None = None,
                producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH,
                base_sequence: int = NO_SEQUENCE,
                partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
                log_append_time: bool = False, transactional: bool = False, control: bool = False,
                base_timestamp: int | None = None, delete_horizon_ms: int | None = None,
                preserve_offsets: bool = False, now_ms: int | None = None) -> bytes:
    """Encode `records` as one v2 batch and return its bytes.

    `records` items are Records (or objects with key, value, headers, timestamp and, for
    `preserve_offsets`, offset) or tuples `(key, value[, headers[, timestamp]])`; keys, values
    and header values are bytes-like or None, header keys str or bytes. A timestamp of None
    means `now_ms` (the wall clock if not given). With `log_append_time` the batch is marked
    LogAppendTime and its maxTimestamp (which readers then give every record) is the largest
    record timestamp.
    """
    if not records:
        raise ValueError("a batch holds at least one record")
    codec = codec_id(compression)
    items = [_fields(item) for item in records]
    if any(item[3] is None for item in items) and now_ms is None:
        now_ms = time.time_ns() // 1_000_000
    timestamps = [now_ms if item[3] is None else item[3] for item in items]
    if preserve_offsets:
        offsets = [item[4] for item in items]
        if any(o is None for o in offsets):
            raise ValueError("preserve_offsets needs records that carry an offset")
        if any(b <= a for a, b in zip(offsets, offsets[1:])) or offsets[0] < base_offset:
            raise ValueError("record offsets must strictly increase from base_offset")
    else:
        offsets = range(base_offset, base_offset + len(items))

    if delete_horizon_ms is not None:
        first_timestamp = delete_horizon_ms
    elif base_timestamp is not None:
        first_timestamp = base_timestamp
    else:
        first_timestamp = timestamps[0]
    max_timestamp = max(timestamps)

    body = bytearray()
    for (key, value, headers, _, _), timestamp, offset in zip(items, timestamps, offsets):
        encode_record(body, offset_delta=offset - base_offset, timestamp_delta=timestamp - first_timestamp,
                      key=key, value=value, headers=headers)
    if codec != NONE:
        body = compress(codec, body, level=compression_level)

    attributes = codec
    if log_append_time:
        attributes |= TIMESTAMP_TYPE_MASK
    if transactional:
        attributes |= TRANSACTIONAL_FLAG_MASK
    if control:
        attributes |= CONTROL_FLAG_MASK
    if delete_horizon_ms is not None:
        attributes |= DELETE_HORIZON_FLAG_MASK

    size = HEADER_SIZE + len(body)
    buf = bytearray(size)
    HEADER.pack_into(buf, 0, base_offset, size - LOG_OVERHEAD, partition_leader_epoch, MAGIC, 0,
                     attributes, offsets[-1] - base_offset, first_timestamp, max_timestamp,
                     producer_id, producer_epoch, base_sequence, len(items))
    buf[HEADER_SIZE:] = body
    _CRC.pack_into(buf, CRC_OFFSET, compute_crc(buf, 0, size))
    return bytes(buf)
