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
cover up to; their format and crash behaviour are in producer_snapshot.py, the per-producer
values in producer_state_entry.py.

Nothing here is thread-safe: the Log calls it under its own lock (on the event loop). Methods
that touch files (`take_snapshot`, `load`, `truncate_and_reload`, the deletions) block on disk.
"""

from __future__ import annotations

import logging
import os
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
from logbroker.records.batch import NO_PRODUCER_EPOCH, BatchHeader
from logbroker.records.control import EndTransactionMarker
from logbroker.storage.producer_snapshot import (
    DELETED_SUFFIX,
    CorruptSnapshotError,
    list_snapshot_files,
    read_snapshot,
    remove_tmp_snapshot_files,
    snapshot_file_name,
    write_snapshot,
)
from logbroker.storage.producer_state_entry import BatchMetadata, ProducerStateEntry, in_sequence

log = logging.getLogger("kafka.log.ProducerStateManager")

DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000


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
                 clock: Clock, keep_snapshot_at_log_start: bool = False) -> None:
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
        # A tiered log (remote.storage.enable): the snapshot at its log start, the local one,
        # holds the producers of what only the remote store has now, and is kept on load and
        # truncation (Kafka's log start offset is then the remote one, below it). Else Kafka's
        # rule: snapshots at or below the log start go.
        self.keep_snapshot_at_log_start = keep_snapshot_at_log_start
        remove_tmp_snapshot_files(self.partition_dir)
        self._snapshots = list_snapshot_files(self.partition_dir)

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
            entry.maybe_update_producer_epoch(header.producer_epoch)
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
        entry.maybe_update_producer_epoch(header.producer_epoch)
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
        """The log start moved up (DeleteRecords, retention). Producers keep their entries even
        when every batch of theirs is now below it (KIP-360, Kafka 2.5+): only
        producer.id.expiration.ms forgets them, so a producer whose records were all deleted goes
        on with its next sequence number. (Before 2.5 Kafka evicted them here.)"""
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
        write_snapshot(path, (self._producers[pid] for pid in sorted(self._producers)), sync=sync)
        self._snapshots[offset] = path
        self._last_snap_offset = offset
        return path

    def delete_snapshots_before(self, offset: int) -> None:
        """Delete the snapshots at offsets below `offset` (exclusive)."""
        for snap_offset in [o for o in self._snapshots if o < offset]:
            self._remove_and_delete_snapshot(snap_offset)

    def delete_snapshots_between(self, low: int, high: int) -> None:
        """Delete the snapshots at offsets strictly between `low` and `high`."""
        for snap_offset in [o for o in self._snapshots if low < o < high]:
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
        self._snapshots = list_snapshot_files(self.partition_dir)
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
        self._snapshots = list_snapshot_files(self.partition_dir)
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

    def restore_snapshot(self, offset: int, entries: list[ProducerStateEntry]) -> None:
        """Take `entries` (a snapshot decoded from elsewhere: the remote store) as the state at
        `offset`, the start and end of a log that starts empty there: every other snapshot and
        producer goes, the entries are written as `<offset>.snapshot` (fsynced) and loaded,
        producers already expired skipped. Blocks on disk."""
        self.truncate_fully_and_start_at(offset)
        path = self.snapshot_path(offset)
        write_snapshot(path, entries, sync=True)
        self._snapshots[offset] = path
        self._load_from_snapshot(offset)

    def _clear(self) -> None:
        self._producers.clear()
        self._ongoing_txns.clear()
        self._unreplicated_txns.clear()
        self._first_unstable_stale = True

    def _delete_snapshots_out_of_range(self, log_start_offset: int, log_end_offset: int) -> None:
        for offset in list(self._snapshots):
            below = offset < log_start_offset if self.keep_snapshot_at_log_start else offset <= log_start_offset
            if offset > log_end_offset or below:
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
