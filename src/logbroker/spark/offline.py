"""Offline backfill: reading a stopped broker's data directory directly, one task per segment.

    spark.read.format("logbroker").option("path", "/var/lib/logbroker/data")
         .option("subscribe", "events").load()

A logbroker data directory is byte-compatible with Kafka's (architecture.md §2), so this reads either:
`<log dir>/<topic>-<partition>/<base offset>.log` segments of v2 batches. Reading files skips the
brokers entirely — the fast path for reprocessing history. What it reads, and why:

- only committed data: offsets below the high watermark recorded in the log dir's
  `replication-offset-checkpoint` (what consumers could see when the broker stopped); a partition
  missing from that file reads nothing;
- no control batches (transaction markers), and no records of aborted transactions: the
  `.txnindex` next to each segment lists them (34-byte AbortedTxn entries: version int16,
  producerId int64, firstOffset int64, lastOffset int64, lastStableOffset int64);
- offset gaps are normal (compacted topics, markers): ranges are offsets, not counts;
- a torn tail (a crash mid-write) ends the segment, as recovery would truncate it.

The directory must be readable at the same path from every executor (a local path in local mode,
a shared mount on a cluster). Reading a directory while a broker writes to it is not supported:
stop the broker, or copy the directory.
"""

from __future__ import annotations

import mmap
import os
import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from logbroker.records.record_batch import RecordBatch, iter_batches
from logbroker.spark.arrow import RecordBatchBuilder
from logbroker.spark.errors import OptionError
from logbroker.spark.offsets import EARLIEST, LATEST
from logbroker.spark.options import SourceOptions
from logbroker.storage.checkpoints import OffsetCheckpointFile

HIGH_WATERMARK_CHECKPOINT = "replication-offset-checkpoint"
_PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")
_SEGMENT = re.compile(r"^(?P<base>\d{20})\.log$")
_ABORTED_TXN = struct.Struct(">hqqqq")


@dataclass(frozen=True, kw_only=True)
class SegmentRange:
    """Offsets `[from_offset, until_offset)` of one segment file: one Spark task."""

    topic: str
    partition: int
    path: str
    from_offset: int
    until_offset: int
    # Read from a tiered storage bucket (offline_remote.py): the .txnindex objects of this
    # segment and the later ones, and the segment's end offset + 1.
    txn_indexes: tuple[str, ...] = ()
    segment_end: int | None = None


def _partition_dirs(log_dir: Path) -> dict[tuple[str, int], Path]:
    found = {}
    for entry in sorted(os.scandir(log_dir), key=lambda e: e.name):
        match = _PARTITION_DIR.match(entry.name)
        # "-delete" and "-future" directories do not match: their suffix is not a number.
        if entry.is_dir() and match and "." not in entry.name:
            found[(match["topic"], int(match["partition"]))] = Path(entry.path)
    return found


def selected_partitions(options: SourceOptions, tps: list[tuple[str, int]]) -> list[tuple[str, int]]:
    sub = options.subscription
    if sub.assignment:
        return [tp for tp in tps if tp in set(sub.assignment)]
    if sub.pattern is not None:
        regex = re.compile(sub.pattern)
        return [tp for tp in tps if regex.fullmatch(tp[0])]
    if sub.topics:
        return [tp for tp in tps if tp[0] in sub.topics]
    return [tp for tp in tps if not tp[0].startswith("__")]


def offset_bound(spec, tp: tuple[str, int], *, default: int, low: int, high: int, name: str) -> int:
    if spec.kind == "timestamp":
        raise OptionError(f"option '{name}' by timestamp is not supported with 'path' "
                          "(offline reads take offsets only)")
    if spec.kind == "earliest":
        return low
    if spec.kind == "latest":
        return high
    wanted = spec.offsets.get(tp[0], {}).get(tp[1], default)
    if wanted == EARLIEST:
        return low
    if wanted == LATEST:
        return high
    return min(max(wanted, low), high)


def plan_segments(options: SourceOptions) -> list[SegmentRange]:
    """One range per segment that holds committed offsets inside [starting, ending)."""
    log_dir = Path(options.path)
    if not log_dir.is_dir():
        raise OptionError(f"option 'path': {log_dir} is not a directory")
    checkpoint = log_dir / HIGH_WATERMARK_CHECKPOINT
    if not checkpoint.exists():
        raise OptionError(f"option 'path': {log_dir} has no {HIGH_WATERMARK_CHECKPOINT}: not a "
                          "Kafka/logbroker log dir, or its broker never checkpointed (stop it "
                          "cleanly first)")
    high_watermarks = {(tp.topic, tp.partition): hw
                       for tp, hw in OffsetCheckpointFile(checkpoint).read().items()}
    dirs = _partition_dirs(log_dir)
    ranges = []
    for tp in selected_partitions(options, sorted(dirs)):
        hw = high_watermarks.get(tp, 0)
        bases = sorted(int(m["base"]) for name in os.listdir(dirs[tp])
                       if (m := _SEGMENT.match(name)))
        if not bases or hw <= bases[0]:
            continue
        start = offset_bound(options.starting, tp, default=EARLIEST, low=bases[0], high=hw,
                       name="startingOffsets")
        end = offset_bound(options.ending, tp, default=LATEST, low=bases[0], high=hw,
                     name="endingOffsets")
        for base, next_base in zip(bases, [*bases[1:], None]):
            lo = max(start, base)
            hi = end if next_base is None else min(end, next_base)
            if hi > lo:
                ranges.append(SegmentRange(topic=tp[0], partition=tp[1],
                                           path=str(dirs[tp] / f"{base:020d}.log"),
                                           from_offset=lo, until_offset=hi))
    return ranges


def aborted_transactions(segment_path: str) -> list[tuple[int, int, int]]:
    """(producer id, first offset, last offset) of each aborted transaction that may have
    records in this segment.

    An AbortedTxn entry lives in the .txnindex of the segment that holds its ABORT marker, which
    can be a later segment than the transaction's first records. So, as Kafka's fetch does
    (collecting from the fetch's segment onwards), read this segment's .txnindex and those of
    every later segment of the partition, and keep the entries that start before this segment
    ends — in practice few and small files.
    """
    segment = Path(segment_path)
    base = int(segment.stem)
    later = sorted(int(m["base"]) for name in os.listdir(segment.parent)
                   if (m := _SEGMENT.match(name)) and int(m["base"]) > base)
    segment_end = later[0] if later else None
    entries = []
    for index_base in [base, *later]:
        try:
            data = (segment.parent / f"{index_base:020d}.txnindex").read_bytes()
        except FileNotFoundError:
            continue
        for position in range(0, len(data) - _ABORTED_TXN.size + 1, _ABORTED_TXN.size):
            _version, producer_id, first, last, _lso = _ABORTED_TXN.unpack_from(data, position)
            if last >= base and (segment_end is None or first < segment_end):
                entries.append((producer_id, first, last))
    return entries


def read_segment(options: SourceOptions, r: SegmentRange) -> Iterator[pa.RecordBatch]:
    aborted = aborted_transactions(r.path)
    builder = RecordBatchBuilder(topic=r.topic, partition=r.partition,
                                 include_headers=options.include_headers)
    with open(r.path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            batches = read_batches(data, r, aborted, builder, options.arrow_batch_rows)
            try:
                yield from batches
            finally:
                batches.close()  # drops its views into the mmap before the mmap closes


def read_batches(data, r: SegmentRange, aborted, builder: RecordBatchBuilder,
                  batch_rows: int) -> Iterator[pa.RecordBatch]:
    for position, header in iter_batches(data):
        if header.last_offset < r.from_offset:
            continue
        if header.base_offset >= r.until_offset:
            break
        if header.is_control:
            continue
        if header.is_transactional and any(
                pid == header.producer_id and first <= header.last_offset and header.base_offset
                <= last for pid, first, last in aborted):
            continue
        timestamp_type = 1 if header.is_log_append_time else 0
        for record in RecordBatch(data, position).records():
            if r.from_offset <= record.offset < r.until_offset:
                builder.add_record(key=record.key, value=record.value, offset=record.offset,
                                   timestamp_ms=record.timestamp, timestamp_type=timestamp_type,
                                   headers=list(record.headers) or None)
        if len(builder) >= batch_rows:
            yield builder.build()
    if len(builder):
        yield builder.build()
