"""dump-log: Kafka's kafka-dump-log.sh (DumpLogSegments) for logbroker's (and Kafka's) files.

Reads segment files and prints them line for line in Kafka's format, so that output can be diffed
against Kafka's own tool:

- `.log`: `Log starting offset: N`, then one line per batch (`baseOffset: … isvalid: …`); with
  deep iteration one `| offset: …` line per record, plus `key: … payload: …` with print-data-log;
  then `Found N invalid bytes at the end of NAME` when the file ends in a torn or corrupt tail.
- `.index`: `offset: O position: P` per entry; each entry is checked against the batch at its
  position in the `.log` beside it (its offset must be that batch's last offset).
- `.timeindex`: `timestamp: T offset: O` per entry; each checked against the log (the batch whose
  last offset is O must have T as its largest record timestamp, and timestamps must increase).
- `.txnindex` (aborted transactions) and `.snapshot` (producer state) are listed.

As in Kafka, the problems found in index files and gaps between record offsets are collected
across all the files and reported on stderr at the end. Unlike Kafka's tool, nothing here ends
in a stack trace: a corrupt batch is shown with `isvalid: false`, records that cannot be decoded
get one error line, an impossible batch header ends the walk of that file as invalid bytes, and a
missing or unreadable file gets an error line and the next file is dumped.

Everything here is a generator of `Output` lines (text, and whether it belongs on stderr): the
CLI prints them; tests read them. Files are read through a read-only mmap; nothing is written.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from logbroker.errors import CorruptRecordError, KafkaError
from logbroker.records.batch import NO_TIMESTAMP
from logbroker.records.control import ABORT, COMMIT, EndTransactionMarker, control_record_type, control_type_name
from logbroker.records.record import Record
from logbroker.records.record_batch import RecordBatch, iter_batches
from logbroker.storage.abstract_index import CorruptIndexError
from logbroker.storage.offset_index import OffsetIndex
from logbroker.storage.producer_snapshot import CorruptSnapshotError, read_snapshot
from logbroker.storage.time_index import TimeIndex

INT32_MAX = (1 << 31) - 1
DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024  # Kafka's --max-message-size default

# .txnindex entry (Kafka's AbortedTxn): version int16, producerId int64, firstOffset int64,
# lastOffset int64, lastStableOffset int64.
_ABORTED_TXN = struct.Struct(">hqqqq")


class Output(NamedTuple):
    """One line of output; whether it goes to stderr; whether a file could not be read at all."""

    text: str
    stderr: bool = False
    failed: bool = False


def _out(text: str) -> Output:
    return Output(text)


def _err(text: str) -> Output:
    return Output(text, True)


@dataclass(frozen=True)
class DumpOptions:
    """Kafka's DumpLogSegments options (the decoders aside)."""

    print_data_log: bool = False
    deep_iteration: bool = False
    index_sanity_check: bool = False
    verify_index_only: bool = False
    skip_record_metadata: bool = False
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    max_bytes: int = INT32_MAX

    @property
    def deep(self) -> bool:
        """Records are iterated with --deep-iteration, and implied by --print-data-log."""
        return self.deep_iteration or self.print_data_log


@dataclass
class Findings:
    """Problems collected while dumping, reported after the last file as Kafka reports them."""

    index_mismatches: dict[str, list[tuple[int, int]]] = field(default_factory=lambda: defaultdict(list))
    time_index_mismatches: dict[str, list[tuple[int, int]]] = field(default_factory=lambda: defaultdict(list))
    out_of_order_timestamps: dict[str, list[tuple[int, int]]] = field(default_factory=lambda: defaultdict(list))
    offsets_not_found: dict[str, list[tuple[int, int]]] = field(default_factory=lambda: defaultdict(list))
    non_consecutive: dict[str, list[tuple[int, int]]] = field(default_factory=lambda: defaultdict(list))

    def report(self) -> Iterator[Output]:
        for name, pairs in self.index_mismatches.items():
            yield _err(f"Mismatches in :{name}")
            for index_offset, log_offset in sorted(pairs, reverse=True):
                yield _err(f"  Index offset: {index_offset}, log offset: {log_offset}")
        for name, pairs in self.time_index_mismatches.items():
            yield _err(f"Found timestamp mismatch in :{name}")
            for index_ts, log_ts in pairs:
                yield _err(f"  Index timestamp: {index_ts}, log timestamp: {log_ts}")
        for name, pairs in self.out_of_order_timestamps.items():
            yield _err(f"Found out of order timestamp in :{name}")
            for index_ts, previous_ts in pairs:
                yield _err(f"  Index timestamp: {index_ts}, Previously indexed timestamp: {previous_ts}")
        for pairs in self.offsets_not_found.values():
            yield _err("The following indexed offsets are not found in the log.")
            for index_offset, log_offset in pairs:
                yield _err(f"Indexed offset: {index_offset}, found log offset: {log_offset}")
        for name, pairs in self.non_consecutive.items():
            yield _err(f"Non-consecutive offsets in {name}")
            for first, second in sorted(pairs):
                yield _err(f"  {first} is followed by {second}")


# --- entry point ---------------------------------------------------------------------------------

def dump_files(paths: Iterable[str | os.PathLike], options: DumpOptions = DumpOptions()) -> Iterator[Output]:
    """Dump each file by its suffix, then report the problems found, as kafka-dump-log.sh does."""
    findings = Findings()
    for arg in paths:
        path = Path(arg)
        yield _out(f"Dumping {arg}")
        suffix = path.suffix
        dumper = _DUMPERS.get(suffix)
        if dumper is None:
            yield _err(f"Ignoring unknown file {arg}")
            continue
        try:
            yield from dumper(path, options, findings)
        except OSError as e:
            yield Output(f"Could not read {arg}: {e.strerror or e}", stderr=True, failed=True)
    yield from findings.report()


def segment_base_offset(path: Path) -> int | None:
    """The base offset in a segment file name (`00000000000000000042.log` → 42, and a remote
    segment's `00000000000000000042-<segmentId>.log` too), if it has one."""
    stem = path.name.split(".")[0]
    stem = stem[:20] if len(stem) > 21 and stem[20] == "-" else stem
    return int(stem) if stem.isdigit() else None


@contextmanager
def _mapped(path: Path):
    """The file's bytes, read-only, through mmap (b"" for an empty file)."""
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            yield b""
            return
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            yield mm
        finally:
            try:
                mm.close()
            except BufferError:
                pass  # a batch view still refers to it; the map goes when that view does


# --- .log ----------------------------------------------------------------------------------------

def _bool(value: bool) -> str:
    return "true" if value else "false"


def batch_line(batch: RecordBatch) -> str:
    """The batch line of Kafka's dump, for a v2 batch."""
    h = batch.header
    horizon = batch.delete_horizon_ms
    return (f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.records_count} "
            f"baseSequence: {h.base_sequence} lastSequence: {h.last_sequence} "
            f"producerId: {h.producer_id} producerEpoch: {h.producer_epoch} "
            f"partitionLeaderEpoch: {h.partition_leader_epoch} isTransactional: {_bool(h.is_transactional)} "
            f"isControl: {_bool(h.is_control)} "
            f"deleteHorizonMs: {'OptionalLong.empty' if horizon is None else f'OptionalLong[{horizon}]'} "
            f"position: {batch.position} {batch.timestamp_type}: {h.max_timestamp} size: {h.size_in_bytes} "
            f"magic: {h.magic} compresscodec: {h.compression_name} crc: {h.crc} isvalid: {_bool(batch.is_valid())}")


def _text(data: bytes) -> str:
    # Kafka's default StringDecoder: UTF-8, malformed input replaced.
    return data.decode("utf-8", "replace")


def _control_text(record: Record) -> str:
    try:
        type_id = control_record_type(record.key)
        if type_id in (ABORT, COMMIT):
            marker = EndTransactionMarker.decode(record.key, record.value)
            return f" endTxnMarker: {control_type_name(type_id)} coordinatorEpoch: {marker.coordinator_epoch}"
    except CorruptRecordError:
        return " controlType: UNKNOWN(-1)"
    return f" controlType: {control_type_name(type_id)}({type_id})"


def record_line(batch: RecordBatch, record: Record, options: DumpOptions) -> str:
    """The line of one record in a deep dump (metadata, and contents with print-data-log)."""
    text = ""
    if not options.skip_record_metadata:
        keys = ",".join(k for k, _ in record.headers)
        text = (f"| offset: {record.offset} {batch.timestamp_type}: {record.timestamp} "
                f"keySize: {record.key_size} valueSize: {record.value_size} "
                f"sequence: {record.sequence} headerKeys: [{keys}]")
        if batch.header.is_control:
            text += _control_text(record)
    if options.print_data_log and not batch.header.is_control:
        prefix = "| " if options.skip_record_metadata else " "
        if record.key is not None:
            text += f"{prefix}key: {_text(record.key)}"
            prefix = " "
        if record.value is not None:
            text += f"{prefix}payload: {_text(record.value)}"
    return text


def dump_log_segment(path: Path, options: DumpOptions, findings: Findings) -> Iterator[Output]:
    """Dump a .log file: its batches and (deep) records; then any invalid bytes at its end."""
    base_offset = segment_base_offset(path)
    if base_offset is not None and path.suffix == ".log":
        yield _out(f"Log starting offset: {base_offset}")
    with _mapped(path) as buf:
        end = min(len(buf), options.max_bytes)
        valid_bytes = 0
        last_offset: int | None = None
        try:
            for position, header in iter_batches(buf, 0, end):
                batch = RecordBatch(buf, position)
                yield _out(batch_line(batch))
                if options.deep:
                    try:
                        records = batch.records()
                    except KafkaError as e:
                        yield _err(f"Could not read the records of the batch at position {position} "
                                   f"of {path.name}: {e}")
                        records = []
                    for record in records:
                        # Kafka's Scala tool: the first record sets the start; gaps after it count.
                        if last_offset is not None and record.offset != last_offset + 1:
                            findings.non_consecutive[str(path.absolute())].append((last_offset, record.offset))
                        last_offset = record.offset
                        yield _out(record_line(batch, record, options))
                    del records
                del batch
                valid_bytes = position + header.size_in_bytes
        except CorruptRecordError as e:
            yield _err(f"{e} in file {path.name}.")
        trailing = len(buf) - valid_bytes
        if trailing > 0 and options.max_bytes == INT32_MAX:
            yield _out(f"Found {trailing} invalid bytes at the end of {path.name}")


# --- .index and .timeindex ---------------------------------------------------------------------

def _beside(path: Path, suffix: str) -> Path:
    return path.with_name(path.name.split(".")[0] + suffix)


def _first_batch_last_offset(buf, position: int, max_size: int) -> int:
    """The last offset of the batch at `position` (whole within `max_size` bytes), or -1."""
    if not 0 <= position < len(buf):
        return -1
    try:
        for _, header in iter_batches(buf, position, min(len(buf), position + max_size)):
            return header.last_offset
    except CorruptRecordError:
        pass
    return -1


def dump_offset_index(path: Path, options: DumpOptions, findings: Findings) -> Iterator[Output]:
    """Dump a .index file and check each entry against the batch at its position."""
    base_offset = segment_base_offset(path)
    if base_offset is None:
        yield _err(f"{path.name} is not named by a base offset (20 digits)")
        return
    index = OffsetIndex(path, base_offset, writable=False)
    try:
        entries = index.all_entries()
        if not entries:
            yield _out(f"{path} is empty.")
            return
        if options.index_sanity_check:
            yield _sanity_check(index, path)
            return
        log_path = _beside(path, ".log")
        if not log_path.exists():
            yield _err(f"No log file {log_path.name} beside {path.name}: entries not checked")
        with _mapped_if_present(log_path) as log:
            for i, entry in enumerate(entries):
                # A preallocated index after a crash ends in zero entries: stop at the first one.
                if i > 0 and entry.offset == base_offset:
                    break
                if log is not None:
                    log_offset = _first_batch_last_offset(log, entry.position, options.max_message_size)
                    if log_offset != entry.offset:
                        findings.index_mismatches[str(path.absolute())].append((entry.offset, log_offset))
                if not options.verify_index_only:
                    yield _out(f"offset: {entry.offset} position: {entry.position}")
    finally:
        index.close_handler()


def _sanity_check(index, path: Path) -> Output:
    """--index-sanity-check of an offset or time index: one line either way."""
    try:
        index.sanity_check()
    except CorruptIndexError as e:
        return _err(str(e))
    return _out(f"{path} passed sanity check.")


def _mapped_if_present(log_path: Path):
    """The .log beside an index, mapped read-only; None inside the block when there is none."""
    return _mapped(log_path) if log_path.exists() else nullcontext()


def _batch_holding(buf, position: int, offset: int) -> RecordBatch | None:
    """Scanning from `position`, the first batch whose last offset is >= `offset`."""
    try:
        for batch_position, header in iter_batches(buf, position):
            if header.last_offset >= offset:
                return RecordBatch(buf, batch_position)
    except CorruptRecordError:
        pass
    return None


def dump_time_index(path: Path, options: DumpOptions, findings: Findings) -> Iterator[Output]:
    """Dump a .timeindex file and check each entry against the log (through the offset index)."""
    base_offset = segment_base_offset(path)
    if base_offset is None:
        yield _err(f"{path.name} is not named by a base offset (20 digits)")
        return
    time_index = TimeIndex(path, base_offset, writable=False)
    index_path = _beside(path, ".index")
    offset_index = OffsetIndex(index_path, base_offset, writable=False) if index_path.exists() else None
    try:
        if options.index_sanity_check:
            yield _sanity_check(time_index, path)
            return
        log_path = _beside(path, ".log")
        if not log_path.exists():
            yield _err(f"No log file {log_path.name} beside {path.name}: entries not checked")
        name = str(path.absolute())
        previous_timestamp = NO_TIMESTAMP
        with _mapped_if_present(log_path) as log:
            for i, entry in enumerate(time_index.all_entries()):
                if i > 0 and entry.offset == base_offset:
                    break
                if log is not None:
                    position = offset_index.lookup(entry.offset).position if offset_index else 0
                    batch = _batch_holding(log, position, entry.offset)
                    if batch is None:
                        findings.offsets_not_found[name].append((entry.offset, -1))
                    elif batch.last_offset != entry.offset:
                        findings.offsets_not_found[name].append((entry.offset, batch.last_offset))
                    else:
                        try:
                            max_timestamp = max((r.timestamp for r in batch.records()), default=NO_TIMESTAMP)
                        except KafkaError as e:
                            yield _err(f"Could not read the records of the batch at position "
                                       f"{batch.position} of {log_path.name}: {e}")
                            max_timestamp = entry.timestamp
                        if max_timestamp != entry.timestamp:
                            findings.time_index_mismatches[name].append((entry.timestamp, max_timestamp))
                        if previous_timestamp >= entry.timestamp:
                            findings.out_of_order_timestamps[name].append((entry.timestamp, previous_timestamp))
                    del batch
                if not options.verify_index_only:
                    yield _out(f"timestamp: {entry.timestamp} offset: {entry.offset}")
                previous_timestamp = entry.timestamp
    finally:
        time_index.close_handler()
        if offset_index is not None:
            offset_index.close_handler()


# --- .txnindex and .snapshot -------------------------------------------------------------------

def dump_txn_index(path: Path, options: DumpOptions, findings: Findings) -> Iterator[Output]:
    """List the aborted transactions of a .txnindex file (34-byte entries)."""
    data = path.read_bytes()
    whole = len(data) - len(data) % _ABORTED_TXN.size
    for version, producer_id, first_offset, last_offset, last_stable_offset in _ABORTED_TXN.iter_unpack(data[:whole]):
        yield _out(f"version: {version} producerId: {producer_id} firstOffset: {first_offset} "
                   f"lastOffset: {last_offset} lastStableOffset: {last_stable_offset}")
    if whole != len(data):
        yield _err(f"Found {len(data) - whole} invalid bytes at the end of {path.name} "
                   f"(entries are {_ABORTED_TXN.size} bytes)")


def dump_producer_snapshot(path: Path, options: DumpOptions, findings: Findings) -> Iterator[Output]:
    """List the producers of a producer-state .snapshot file."""
    try:
        entries = read_snapshot(path)
    except CorruptSnapshotError as e:
        yield _err(str(e))
        return
    for e in entries:
        txn = "OptionalLong.empty" if e.current_txn_first_offset < 0 else f"OptionalLong[{e.current_txn_first_offset}]"
        text = (f"producerId: {e.producer_id} producerEpoch: {e.producer_epoch} "
                f"coordinatorEpoch: {e.coordinator_epoch} currentTxnFirstOffset: {txn} "
                f"lastTimestamp: {e.last_timestamp}")
        if e.batch_metadata:
            b = e.batch_metadata[0]
            text += (f" firstSequence: {b.first_seq} lastSequence: {b.last_seq} lastOffset: {b.last_offset} "
                     f"offsetDelta: {b.offset_delta} timestamp: {b.timestamp}")
        yield _out(text)


_DUMPERS = {
    ".log": dump_log_segment,
    ".index": dump_offset_index,
    ".timeindex": dump_time_index,
    ".txnindex": dump_txn_index,
    ".snapshot": dump_producer_snapshot,
}
