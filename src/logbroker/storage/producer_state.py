"""Per-partition producer state for idempotent and transactional producers (Kafka's
ProducerStateManager).

For every producer id that has written to a partition we remember its epoch and the metadata of
its last five batches (first/last sequence, first/last offset, max timestamp), plus the
coordinator epoch and the first offset of its open transaction (-1: none). On the leader this
answers, from the 61-byte batch header alone, whether an incoming batch is the next one in
sequence, a retry of one already written (a duplicate: answer success with the original offsets,
write nothing) or an error. Followers and recovery rebuild the same state from the batches in the
log without validating them.

Transactions: a producer's first transactional batch on the partition opens its transaction at
that batch's base offset (an *ongoing* transaction); its COMMIT or ABORT marker ends it (a
`CompletedTxn`, which the log turns into a .txnindex entry when aborted, then hands back to
`complete_txn`). A completed transaction stays *unreplicated* until the high watermark passes its
marker. The first unstable offset is the smallest first offset over both sets; the log's last
stable offset is min(first unstable offset, high watermark), as Kafka's.

The state is persisted in `.snapshot` files in the partition directory, named by the offset they
cover up to (exclusive), 20 digits zero padded: `00000000000000001234.snapshot` holds the state
after applying every batch below offset 1234. Kafka's format (PID_SNAPSHOT_MAP_SCHEMA v1),
big-endian:

    version       int16   1
    crc           uint32  CRC-32C of every byte after this field
    entries       int32   count, then per producer 46 bytes:
      producer_id               int64
      epoch                     int16
      last_sequence             int32   -1 if no batch is retained
      last_offset               int64   -1 if no batch is retained
      offset_delta              int32   last_offset - first offset of the last batch
      timestamp                 int64   max timestamp of the last batch
      coordinator_epoch         int32
      current_txn_first_offset  int64   -1 if no transaction is open

Only the last batch of each producer is stored, so after a reload a producer's retry of one of its
four older batches is no longer recognised as a duplicate (as in Kafka). A snapshot is written to
`<name>.tmp`, fsynced and renamed into place, so a crash leaves either the old set of snapshots or
the new one; a snapshot whose CRC does not match (torn by a crash before its fsync, or damaged) is
deleted on load and the next older one used instead.

Nothing here is thread-safe: the Log calls it under its own lock (on the event loop). Methods
that touch files (`take_snapshot`, `load`, `truncate_and_reload`, the deletions) block on disk.
"""

from __future__ import annotations

import logging
import os
import re
import struct
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType


from logbroker.clock import Clock
from logbroker.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceNumberError,
    TransactionCoordinatorFencedError,
)
from logbroker.records.batch import NO_PRODUCER_EPOCH, NO_SEQUENCE, NO_TIMESTAMP, BatchHeader, crc32c_of
from logbroker.records.control import EndTransactionMarker
from logbroker.storage.checkpoints import fsync_file, write_file_atomically

log = logging.getLogger("kafka.log.ProducerStateManager")

NUM_BATCHES_TO_RETAIN = 5
INT32_MAX = 0x7FFFFFFF
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_TMP_SUFFIX = ".snapshot.tmp"
DELETED_SUFFIX = ".deleted"
PRODUCER_SNAPSHOT_VERSION = 1

_SNAPSHOT_HEADER = struct.Struct(">hIi")  # version, crc, entry count
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")  # 46 bytes, field order of PID_SNAPSHOT_MAP_SCHEMA
_CRC_END = 6  # the CRC covers bytes [6, end): the entry count and the entries
_SNAPSHOT_NAME = re.compile(r"^(\d+)\.snapshot$")
_SNAPSHOT_TMP_NAME = re.compile(r"^\d+\.snapshot\.tmp$")


class CorruptSnapshotError(Exception):
    """A producer snapshot file failed its CRC, version or size check. Never reaches a client."""


def snapshot_file_name(offset: int) -> str:
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


def decrement_sequence(sequence: int, decrement: int) -> int:
    """`sequence - decrement` in the int32 sequence space that wraps from 2^31-1 to 0."""
    return (sequence - decrement) & INT32_MAX


def in_sequence(last_seq: int, next_seq: int) -> bool:
    """Whether `next_seq` directly follows `last_seq` (wrapping at int32 max, as Kafka does)."""
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """One remembered batch of a producer (Kafka's BatchMetadata).

    `offset_delta` is last offset minus first offset, which for a v2 batch is its lastOffsetDelta
    and also the distance between its first and last sequence. A duplicate answer uses
    `first_offset`, `last_offset` and `timestamp` (Kafka also reports `timestamp` as the
    duplicate's log append time).
    """

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction ended by a marker (Kafka's CompletedTxn): `last_offset` is the marker's."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


@dataclass(slots=True)
class TxnMetadata:
    """An ongoing or unreplicated transaction; `last_offset` is -1 until its marker is written."""

    producer_id: int
    first_offset: int
    last_offset: int = -1


class ProducerStateEntry:
    """The state of one producer id on one partition (Kafka's ProducerStateEntry).

    `batch_metadata` holds at most five batches, oldest first, all of the current epoch:
    sequences increase along it. Mutated only by ProducerStateManager; read it, don't change it.
    """

    __slots__ = ("producer_id", "producer_epoch", "coordinator_epoch", "last_timestamp",
                 "current_txn_first_offset", "batch_metadata")

    def __init__(self, producer_id: int, *, producer_epoch: int = NO_PRODUCER_EPOCH,
                 coordinator_epoch: int = -1, last_timestamp: int = NO_TIMESTAMP,
                 current_txn_first_offset: int = -1,
                 batch_metadata: Iterable[BatchMetadata] = ()) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.coordinator_epoch = coordinator_epoch
        self.last_timestamp = last_timestamp
        self.current_txn_first_offset = current_txn_first_offset
        self.batch_metadata: deque[BatchMetadata] = deque(batch_metadata,
                                                          maxlen=NUM_BATCHES_TO_RETAIN)

    @property
    def is_empty(self) -> bool:
        return not self.batch_metadata

    @property
    def first_seq(self) -> int:
        return self.batch_metadata[0].first_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self.batch_metadata[-1].last_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def first_data_offset(self) -> int:
        return self.batch_metadata[0].first_offset if self.batch_metadata else -1

    @property
    def last_data_offset(self) -> int:
        return self.batch_metadata[-1].last_offset if self.batch_metadata else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batch_metadata[-1].offset_delta if self.batch_metadata else 0

    def find_duplicate_batch(self, header: BatchHeader) -> BatchMetadata | None:
        """The remembered batch with the same epoch and exactly the same sequence range, if any."""
        if header.producer_epoch != self.producer_epoch:
            return None
        first_seq, last_seq = header.base_sequence, header.last_sequence
        for batch in self.batch_metadata:
            if batch.last_seq == last_seq and batch.first_seq == first_seq:
                return batch
        return None

    def _maybe_update_producer_epoch(self, producer_epoch: int) -> None:
        # Sequences restart with each epoch, so batches of an older epoch can never be matched.
        if producer_epoch != self.producer_epoch:
            self.batch_metadata.clear()
            self.producer_epoch = producer_epoch

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ProducerStateEntry):
            return NotImplemented
        return all(getattr(self, s) == getattr(other, s) for s in self.__slots__)

    def __repr__(self) -> str:
        return (f"ProducerStateEntry(producer_id={self.producer_id}, "
                f"producer_epoch={self.producer_epoch}, "
                f"coordinator_epoch={self.coordinator_epoch}, "
                f"last_timestamp={self.last_timestamp}, "
                f"current_txn_first_offset={self.current_txn_first_offset}, "
                f"batch_metadata={list(self.batch_metadata)})")


# --- the snapshot format: pure functions ---------------------------------------------------


def encode_snapshot(entries: Iterable[ProducerStateEntry]) -> bytes:
    """Kafka's producer snapshot bytes for `entries` (written in the order given)."""
    body = bytearray(_SNAPSHOT_HEADER.size)
    count = 0
    for e in entries:
        body += _SNAPSHOT_ENTRY.pack(e.producer_id, e.producer_epoch, e.last_seq,
                                     e.last_data_offset, e.last_offset_delta, e.last_timestamp,
                                     e.coordinator_epoch, e.current_txn_first_offset)
        count += 1
    struct.pack_into(">i", body, _CRC_END, count)
    _SNAPSHOT_HEADER.pack_into(body, 0, PRODUCER_SNAPSHOT_VERSION,
                               crc32c_of(memoryview(body)[_CRC_END:]), count)
    return bytes(body)


def decode_snapshot(buf: bytes) -> list[ProducerStateEntry]:
    """Parse snapshot bytes; raise CorruptSnapshotError on a bad version, CRC or size.

    As in Kafka, an entry keeps one batch when its last offset is >= 0 and an open transaction
    when its current_txn_first_offset is >= 0. Bytes after the entries are tolerated when the
    CRC (which covers them) matches, as Kafka's reader does.
    """
    if len(buf) < _SNAPSHOT_HEADER.size:
        raise CorruptSnapshotError(f"snapshot is {len(buf)} bytes, shorter than its header")
    version, crc, count = _SNAPSHOT_HEADER.unpack_from(buf, 0)
    if version != PRODUCER_SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"snapshot contained an unknown file version {version}")
    computed = crc32c_of(memoryview(buf)[_CRC_END:])
    if crc != computed:
        raise CorruptSnapshotError(f"snapshot is corrupt (stored crc {crc}, computed {computed})")
    if count < 0 or _SNAPSHOT_HEADER.size + count * _SNAPSHOT_ENTRY.size > len(buf):
        raise CorruptSnapshotError(f"snapshot claims {count} entries in {len(buf)} bytes")
    entries = []
    for (producer_id, epoch, last_seq, last_offset, offset_delta, timestamp, coordinator_epoch,
         txn_first_offset) in _SNAPSHOT_ENTRY.iter_unpack(
            memoryview(buf)[_SNAPSHOT_HEADER.size:_SNAPSHOT_HEADER.size
                            + count * _SNAPSHOT_ENTRY.size]):
        batches = [BatchMetadata(last_seq, last_offset, offset_delta, timestamp)] \
            if last_offset >= 0 else []
        entries.append(ProducerStateEntry(
            producer_id, producer_epoch=epoch, coordinator_epoch=coordinator_epoch,
            last_timestamp=timestamp,
            current_txn_first_offset=txn_first_offset if txn_first_offset >= 0 else -1,
            batch_metadata=batches))
    return entries


def read_snapshot(path: Path) -> list[ProducerStateEntry]:
    """Read and decode one snapshot file (blocks on disk)."""
    return decode_snapshot(path.read_bytes())


def flush_snapshot(path: Path) -> None:
    """fsync a snapshot written with `take_snapshot(sync=False)`, and its directory.

    Safe to run off the event loop (it touches no manager state) and on a file already deleted.
    """
    fsync_file(path)


# --- the manager ---------------------------------------------------------------------------


class ProducerStateManager:
    """Producer id → ProducerStateEntry for one partition, and the `.snapshot` files behind it.

    Invariants: `map_end_offset` is the offset up to which (exclusive) the log's batches have
    been applied to the state; every snapshot at offset X holds the state after the batches
    below X; `last_snap_offset <= map_end_offset` except just after a truncation.

    Leader append path (one batch, in one synchronous call: nothing may run in between):

        duplicate = psm.check(header)          # raises on a fencing or sequence violation
        if duplicate is not None:               # a retry: write nothing, answer the original
            return duplicate.first_offset, duplicate.last_offset
        ... assign base offset, maybe roll (take_snapshot(new_base)), write ...
        psm.update(header, base_offset)         # header as written (LogAppendTime: new maxTs)

    Followers and recovery call `load_from_batch(header, base_offset)` for every batch instead:
    no validation, as Kafka's appendAsFollower and recovery paths.
    """

    def __init__(self, partition_dir: Path, *,
                 max_producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
                 clock: Clock) -> None:
        self.partition_dir = Path(partition_dir)
        self.max_producer_id_expiration_ms = max_producer_id_expiration_ms
        self._clock = clock
        self._producers: dict[int, ProducerStateEntry] = {}
        self._map_end_offset = 0
        self._last_snap_offset = 0
        self._snapshots: dict[int, Path] = {}
        # first offset → transaction; few at a time (one per producer at most), so min() will do.
        self._ongoing_txns: dict[int, TxnMetadata] = {}
        self._unreplicated_txns: dict[int, TxnMetadata] = {}
        self._first_unstable: int | None = None
        self._first_unstable_stale = False  # set by every change to the two dicts
        self._remove_tmp_snapshots()
        self._snapshots = self._list_snapshots()

    # -- reading the state

    @property
    def map_end_offset(self) -> int:
        """The offset (exclusive) up to which batches have been applied."""
        return self._map_end_offset

    @property
    def last_snap_offset(self) -> int:
        return self._last_snap_offset

    @property
    def active_producers(self) -> Mapping[int, ProducerStateEntry]:
        return MappingProxyType(self._producers)

    @property
    def producer_id_count(self) -> int:
        return len(self._producers)

    @property
    def is_empty(self) -> bool:
        return not self._producers and not self._unreplicated_txns

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    # -- transactions

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest transaction that is undecided, or decided but whose
        marker the high watermark has not yet passed; None when there is none."""
        if self._first_unstable_stale:
            firsts = [*self._ongoing_txns, *self._unreplicated_txns]
            self._first_unstable = min(firsts) if firsts else None
            self._first_unstable_stale = False
        return self._first_unstable

    def first_undecided_offset(self) -> int | None:
        """The first offset of the oldest transaction without a marker yet, or None."""
        return min(self._ongoing_txns, default=None)

    @property
    def ongoing_txns(self) -> list[TxnMetadata]:
        return [self._ongoing_txns[o] for o in sorted(self._ongoing_txns)]

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Completed transactions whose marker is below the high watermark are stable now."""
        self._remove_unreplicated_txns(high_watermark)

    def _remove_unreplicated_txns(self, offset: int) -> None:
        if self._unreplicated_txns:
            for first in [f for f, t in self._unreplicated_txns.items() if t.last_offset < offset]:
                del self._unreplicated_txns[first]
                self._first_unstable_stale = True

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """The LSO to store with `completed` in the .txnindex (Kafka's lastStableOffset): the
        first offset of the oldest transaction of another producer still undecided, else the
        offset after the marker. Call before `complete_txn`."""
        others = [o for o, t in self._ongoing_txns.items() if t.producer_id != completed.producer_id]
        return min(others) if others else completed.last_offset + 1

    def complete_txn(self, completed: CompletedTxn) -> None:
        """Move `completed` from the ongoing transactions to the unreplicated ones (after its
        .txnindex entry is written)."""
        txn = self._ongoing_txns.pop(completed.first_offset, None)
        if txn is None:
            log.warning("Completing transaction %s, which was not started; ignored", completed)
            return
        txn.last_offset = completed.last_offset
        self._unreplicated_txns[completed.first_offset] = txn
        self._first_unstable_stale = True

    # -- the leader: validate, then update

    def check(self, header: BatchHeader, marker: EndTransactionMarker | None = None) -> BatchMetadata | None:
        """Validate a client's batch (or, with `marker`, a transaction marker the leader is about
        to write) before it is written; change nothing.

        Returns the remembered batch when this one is a retry of one of the producer's last five
        batches (same epoch, same first and last sequence), else None: go ahead and write it.
        Raises InvalidProducerEpochError for an epoch older than the producer's,
        OutOfOrderSequenceNumberError for a new epoch not starting at sequence 0 or a sequence
        that does not follow the last one (a retry older than the last five batches lands here
        too, as in Kafka 3.x), InvalidTxnStateError for a non-transactional batch inside an open
        transaction. A marker with an older producer epoch gets InvalidProducerEpochError, one
        with an older coordinator epoch than the producer's last marker
        TransactionCoordinatorFencedError. A batch without a producer id, or from a producer with no state here (new,
        or its state lost to retention or expiry), is accepted with any sequence, as Kafka does.
        The Log has already refused a producer id >= 0 with a base sequence < 0 (INVALID_RECORD)
        and a control batch from a client.
        """
        if header.producer_id < 0:
            return None
        entry = self._producers.get(header.producer_id)
        if entry is None:
            return None
        duplicate = None if header.is_control else entry.find_duplicate_batch(header)
        if duplicate is not None:
            return duplicate
        epoch, current_epoch = header.producer_epoch, entry.producer_epoch
        if epoch < current_epoch:
            raise InvalidProducerEpochError(
                f"epoch of producer {header.producer_id} is {epoch}, older than the last "
                f"seen epoch {current_epoch}")
        if header.is_control:
            if marker is not None and entry.coordinator_epoch > marker.coordinator_epoch:
                raise TransactionCoordinatorFencedError(
                    f"invalid coordinator epoch for producer {header.producer_id}: "
                    f"{marker.coordinator_epoch} (zombie), {entry.coordinator_epoch} (current)")
            return None
        first_seq = header.base_sequence
        if epoch != current_epoch:
            if first_seq != 0 and current_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceNumberError(
                    f"invalid sequence number for new epoch {epoch} of producer "
                    f"{header.producer_id}: {first_seq} (expected 0; current epoch "
                    f"{current_epoch})")
        elif current_epoch != NO_PRODUCER_EPOCH and not in_sequence(entry.last_seq, first_seq):
            raise OutOfOrderSequenceNumberError(
                f"out of order sequence number for producer {header.producer_id}: {first_seq} "
                f"(incoming), {entry.last_seq} (current end sequence number)")
        if entry.current_txn_first_offset >= 0 and not header.is_transactional:
            raise InvalidTxnStateError(
                f"expected a transactional write from producer {header.producer_id}")
        return None

    def update(self, header: BatchHeader, base_offset: int,
               marker: EndTransactionMarker | None = None) -> CompletedTxn | None:
        """Record a batch just written at `base_offset` after `check` passed it.

        Call it for every batch written (one without a producer id only moves `map_end_offset`),
        never for a duplicate. `header` is the header as written (with LogAppendTime, its
        maxTimestamp is the broker's), except its baseOffset: `base_offset` is the one assigned.
        A control batch needs its decoded `marker`; the transaction it ends is returned, for the
        log to index and then pass to `complete_txn`.
        """
        return self._apply(header, base_offset, marker)

    # -- followers and recovery

    def load_from_batch(self, header: BatchHeader, base_offset: int | None = None,
                        marker: EndTransactionMarker | None = None) -> CompletedTxn | None:
        """Apply a batch read from the log or from the leader, without validation.

        `base_offset` defaults to the header's (already assigned). Batches must come in offset
        order, starting at the offset `load` / `truncate_and_reload` returned. As `update`, a
        control batch needs its `marker` and returns the transaction it ends.
        """
        return self._apply(header, header.base_offset if base_offset is None else base_offset, marker)

    def _apply(self, header: BatchHeader, base_offset: int,
               marker: EndTransactionMarker | None) -> CompletedTxn | None:
        last_offset = base_offset + header.last_offset_delta
        if last_offset + 1 > self._map_end_offset:
            self._map_end_offset = last_offset + 1
        producer_id = header.producer_id
        if producer_id < 0:
            return None
        entry = self._producers.get(producer_id)
        if header.is_control:
            # An empty control batch is what compaction leaves of a whole transaction: ignore it.
            if header.records_count == 0:
                return None
            if entry is None:
                entry = self._producers[producer_id] = ProducerStateEntry(producer_id)
            entry._maybe_update_producer_epoch(header.producer_epoch)
            completed = None
            # A marker for a transaction with no data here completes nothing (Kafka's rule).
            if entry.current_txn_first_offset >= 0:
                completed = CompletedTxn(producer_id, entry.current_txn_first_offset, base_offset,
                                         marker is not None and not marker.is_commit)
            if marker is not None:
                entry.coordinator_epoch = marker.coordinator_epoch
            entry.current_txn_first_offset = -1
            entry.last_timestamp = header.max_timestamp
            return completed
        if entry is None:
            entry = self._producers[producer_id] = ProducerStateEntry(producer_id)
        entry._maybe_update_producer_epoch(header.producer_epoch)
        entry.batch_metadata.append(BatchMetadata(
            header.last_sequence, last_offset, header.last_offset_delta, header.max_timestamp))
        entry.last_timestamp = header.max_timestamp
        if header.is_transactional and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = base_offset
            self._ongoing_txns[base_offset] = TxnMetadata(producer_id, base_offset)
            self._first_unstable_stale = True
        return None

    def update_map_end_offset(self, offset: int) -> None:
        self._map_end_offset = offset

    # -- expiry and the log start

    def _is_expired(self, entry: ProducerStateEntry, now_ms: int) -> bool:
        return (entry.current_txn_first_offset < 0
                and now_ms - entry.last_timestamp >= self.max_producer_id_expiration_ms)

    def remove_expired_producers(self, now_ms: int) -> None:
        """Forget producers idle for producer.id.expiration.ms (measured from their last batch's
        max timestamp, as Kafka does) that have no open transaction."""
        expired = [pid for pid, e in self._producers.items() if self._is_expired(e, now_ms)]
        for pid in expired:
            del self._producers[pid]

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        self._remove_unreplicated_txns(log_start_offset)
        if self._map_end_offset < log_start_offset:
            self._map_end_offset = log_start_offset
        latest = self.latest_snapshot_offset()
        self._last_snap_offset = log_start_offset if latest is None else latest

    # -- snapshots

    def snapshot_offsets(self) -> list[int]:
        return sorted(self._snapshots)

    def latest_snapshot_offset(self) -> int | None:
        return max(self._snapshots, default=None)

    def oldest_snapshot_offset(self) -> int | None:
        return min(self._snapshots, default=None)

    def snapshot_path(self, offset: int) -> Path:
        return self.partition_dir / snapshot_file_name(offset)

    def take_snapshot(self, offset: int | None = None, *, sync: bool = True) -> Path | None:
        """Write the state to `<map_end_offset>.snapshot`, unless the state has not moved past
        the last snapshot taken or loaded (Kafka's rule).

        `offset`, when given (the new segment's base offset on roll, the log end offset on
        shutdown), first moves `map_end_offset` there; it may not be below `map_end_offset`,
        since the state already includes the batches up to that. Written to a temporary file,
        fsynced (unless `sync=False`: then call `flush_snapshot(path)` later, off the event
        loop), and renamed into place. Returns the snapshot's path, or None when skipped.
        Blocks on disk.
        """
        if offset is not None:
            if offset < self._map_end_offset:
                raise ValueError(f"snapshot offset {offset} is below the map end offset "
                                 f"{self._map_end_offset}")
            self._map_end_offset = offset
        if self._map_end_offset <= self._last_snap_offset:
            return None
        offset = self._map_end_offset
        path = self.snapshot_path(offset)
        data = encode_snapshot(self._producers[pid] for pid in sorted(self._producers))
        write_file_atomically(path, data, sync=sync)
        self._snapshots[offset] = path
        self._last_snap_offset = offset
        return path

    def delete_snapshots_before(self, offset: int) -> None:
        """Delete the snapshots at offsets below `offset` (exclusive)."""
        for snap_offset in [o for o in self._snapshots if o < offset]:
            self._remove_and_delete_snapshot(snap_offset)

    def remove_and_mark_snapshot_for_deletion(self, offset: int) -> Path | None:
        """Forget the snapshot at `offset` and rename it `….snapshot.deleted`, for a segment
        deleted asynchronously (file.delete.delay.ms). Returns the new path, or None."""
        path = self._snapshots.pop(offset, None)
        if path is None:
            return None
        target = path.with_name(path.name + DELETED_SUFFIX)
        try:
            os.replace(path, target)
        except FileNotFoundError:
            return None
        return target

    def remove_stray_snapshots(self, segment_base_offsets: Iterable[int]) -> None:
        """Delete snapshots that match no segment, except the newest one if it lies past the
        last segment's base offset (the one written on clean shutdown), as Kafka's loader does."""
        bases = set(segment_base_offsets)
        self._snapshots = self._list_snapshots()
        strays = [o for o in sorted(self._snapshots) if o not in bases]
        keep = strays[-1] if strays and (not bases or strays[-1] >= max(bases)) else None
        for offset in strays:
            if offset != keep:
                self._remove_and_delete_snapshot(offset)

    # -- loading and truncation

    def load(self, log_start_offset: int, log_end_offset: int) -> int:
        """Rebuild the state from the newest usable snapshot for a log [start, end).

        Snapshots past the log end or at or before the log start are deleted, as are corrupt
        ones (the next older is then tried); producers already expired are skipped. Returns the
        offset from which the caller must feed the log's batches to `load_from_batch`, up to
        the log end; then it calls `update_map_end_offset(log_end_offset)` and usually
        `take_snapshot()`. Blocks on disk.
        """
        self._snapshots = self._list_snapshots()
        self._delete_snapshots_out_of_range(log_start_offset, log_end_offset)
        self._clear()
        self._load_from_snapshot(log_start_offset)
        return self._map_end_offset

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int) -> int:
        """After the log was truncated to [start, end): drop snapshots out of range and, unless
        the state already ends exactly at the log end, reload from the newest snapshot left.
        Returns the offset to re-feed batches from, as `load`. Blocks on disk."""
        self._delete_snapshots_out_of_range(log_start_offset, log_end_offset)
        if log_end_offset != self._map_end_offset:
            self._clear()
            self._load_from_snapshot(log_start_offset)
        else:
            self.on_log_start_offset_incremented(log_start_offset)
        return self._map_end_offset

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Forget every producer and delete every snapshot: the log now starts empty at
        `offset`."""
        self._clear()
        for snap_offset in list(self._snapshots):
            self._remove_and_delete_snapshot(snap_offset)
        self._last_snap_offset = 0
        self._map_end_offset = offset

    def _clear(self) -> None:
        self._producers.clear()
        self._ongoing_txns.clear()
        self._unreplicated_txns.clear()
        self._first_unstable_stale = True

    def _delete_snapshots_out_of_range(self, log_start_offset: int, log_end_offset: int) -> None:
        for offset in list(self._snapshots):
            if offset > log_end_offset or offset <= log_start_offset:
                self._remove_and_delete_snapshot(offset)

    def _load_from_snapshot(self, log_start_offset: int) -> None:
        now_ms = self._clock.time_ms()
        while self._snapshots:
            offset = max(self._snapshots)
            path = self._snapshots[offset]
            try:
                entries = read_snapshot(path)
            except (CorruptSnapshotError, FileNotFoundError) as e:
                log.warning("Failed to load producer snapshot from %s: %s", path, e)
                self._remove_and_delete_snapshot(offset)
                continue
            for entry in entries:
                if not self._is_expired(entry, now_ms):
                    self._producers[entry.producer_id] = entry
                    first = entry.current_txn_first_offset
                    if first >= 0:
                        self._ongoing_txns[first] = TxnMetadata(entry.producer_id, first)
                        self._first_unstable_stale = True
            self._last_snap_offset = self._map_end_offset = offset
            return
        self._last_snap_offset = self._map_end_offset = log_start_offset

    def _remove_and_delete_snapshot(self, offset: int) -> None:
        path = self._snapshots.pop(offset, None)
        if path is not None:
            path.unlink(missing_ok=True)

    def _iter_dir(self) -> list[os.DirEntry]:
        try:
            with os.scandir(self.partition_dir) as it:
                return list(it)
        except FileNotFoundError:
            return []

    def _list_snapshots(self) -> dict[int, Path]:
        snapshots = {}
        for item in self._iter_dir():
            match = _SNAPSHOT_NAME.match(item.name)
            if match and item.is_file():
                snapshots[int(match.group(1))] = Path(item.path)
        return snapshots

    def _remove_tmp_snapshots(self) -> None:
        # Left by a crash between writing a snapshot and renaming it: never complete.
        for item in self._iter_dir():
            if _SNAPSHOT_TMP_NAME.match(item.name):
                Path(item.path).unlink(missing_ok=True)
