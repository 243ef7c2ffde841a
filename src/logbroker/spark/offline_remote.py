"""Offline backfill from a tiered storage bucket: the remote segments of a topic read straight from
S3, no broker running, one task per segment.

    spark.read.format("logbroker").option("path", "s3://my-bucket/cluster-a")
         .option("rsm.config.s3.endpoint", "http://minio:9000").option("subscribe", "events").load()

`path` is the brokers' `rsm.config.s3.bucket` and `rsm.config.s3.prefix`; the other `rsm.config.`
settings as the brokers have them (credentials from the AWS environment variables, or
`rsm.config.s3.access.key.id` / `rsm.config.s3.secret.access.key`). Only COPY_SEGMENT_FINISHED
segments at or after the partition's log start offset are read, and only up to the bucket's own
last stable offset (a transaction decided on the broker may have its marker in a segment not
copied yet: the producer snapshot of the last segment names those); control batches are skipped
and aborted transactions (from the .txnindex of the segment and of every later one) left out, as
the local offline read does (offline.py). When a topic name is in the bucket under several topic
ids (deleted and created again), the one copied to last is read.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Iterator

import pyarrow as pa

from logbroker.remote.metadata import (
    PRODUCER_SNAPSHOT,
    SEGMENT,
    TRANSACTION_INDEX,
    RemoteLogSegmentMetadata,
    parse_partition_dir,
)
from logbroker.remote.storage_manager import RemoteResourceNotFoundError, RemoteStorageManager
from logbroker.remote.store_survey import survey
from logbroker.spark.arrow import RecordBatchBuilder
from logbroker.spark.offline import SegmentRange, offset_bound, read_batches, selected_partitions
from logbroker.spark.offsets import EARLIEST, LATEST
from logbroker.spark.options import SourceOptions
from logbroker.storage.producer_snapshot import decode_snapshot

_ABORTED_TXN = struct.Struct(">hqqqq")


def _store(options: SourceOptions) -> RemoteStorageManager:
    bucket, _, prefix = options.path[len("s3://"):].partition("/")
    return RemoteStorageManager.from_config("s3", {**options.remote_settings, "s3.bucket": bucket,
                                                   "s3.prefix": prefix})


async def _partitions(rsm: RemoteStorageManager) -> dict[tuple[str, int], tuple[list[RemoteLogSegmentMetadata], int, int]]:
    """(topic, partition) → its finished segments, log start offset and the bucket's last stable
    offset (of the newest topic id)."""
    found: dict[tuple[str, int], tuple[list[RemoteLogSegmentMetadata], int, int]] = {}
    for name in await rsm.list_directories():
        parsed = parse_partition_dir(name)
        if parsed is None:
            continue
        segments = (await survey(rsm, name, {})).segments
        if not segments:
            continue
        tp = (parsed[0].topic, parsed[0].partition)
        known = found.get(tp)
        newest = max(s.event_timestamp_ms for s in segments)
        if known is None or newest > max(s.event_timestamp_ms for s in known[0]):
            try:
                floor = int(await rsm.get(f"{name}/log-start-offset"))
            except RemoteResourceNotFoundError:
                floor = -1
            found[tp] = (segments, floor, await _last_stable_offset(rsm, segments[-1]))
    return found


async def _last_stable_offset(rsm: RemoteStorageManager, last: RemoteLogSegmentMetadata) -> int:
    """Where the bucket's history stops being decided: a transaction with records in the last
    segments may end (its ABORT marker, its .txnindex entry) in a segment not copied yet. The
    producer snapshot at the end of the last segment names the transactions still open there; the
    read ends before the first one's first offset."""
    end = last.end_offset + 1
    if not last.has_producer_snapshot:
        return end
    entries = decode_snapshot(await rsm.fetch_file(last, PRODUCER_SNAPSHOT))
    return min((e.current_txn_first_offset for e in entries if e.current_txn_first_offset >= 0), default=end)


def plan_remote_segments(options: SourceOptions) -> list[SegmentRange]:
    """One range per remote segment that holds offsets inside [starting, ending)."""
    partitions = asyncio.run(_partitions(_store(options)))
    ranges = []
    for tp in selected_partitions(options, sorted(partitions)):
        segments, floor, last_stable = partitions[tp]
        low, high = max(segments[0].start_offset, floor), last_stable
        start = offset_bound(options.starting, tp, default=EARLIEST, low=low, high=high, name="startingOffsets")
        end = offset_bound(options.ending, tp, default=LATEST, low=low, high=high, name="endingOffsets")
        for i, segment in enumerate(segments):
            lo, hi = max(start, segment.start_offset), min(end, segment.end_offset + 1)
            if hi > lo:
                ranges.append(SegmentRange(
                    topic=tp[0], partition=tp[1], path=segment.key(SEGMENT), from_offset=lo, until_offset=hi,
                    txn_indexes=tuple(s.key(TRANSACTION_INDEX) for s in segments[i:] if s.has_txn_index),
                    segment_end=segment.end_offset + 1))
    return ranges


def read_remote_segment(options: SourceOptions, r: SegmentRange) -> Iterator[pa.RecordBatch]:
    rsm = _store(options)

    async def fetch() -> tuple[bytes, list[bytes]]:
        return await rsm.get(r.path), [await rsm.get(key) for key in r.txn_indexes]

    data, indexes = asyncio.run(fetch())
    aborted = []  # the aborted transactions that may have records in this segment
    for index in indexes:
        for position in range(0, len(index) - _ABORTED_TXN.size + 1, _ABORTED_TXN.size):
            _version, producer_id, first, last, _lso = _ABORTED_TXN.unpack_from(index, position)
            if last >= r.from_offset and first < r.segment_end:
                aborted.append((producer_id, first, last))
    builder = RecordBatchBuilder(topic=r.topic, partition=r.partition, include_headers=options.include_headers)
    yield from read_batches(data, r, aborted, builder, options.arrow_batch_rows)
