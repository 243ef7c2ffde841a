"""Loading one partition directory at startup (Kafka's LogLoader): leftovers, segments, recovery.

Steps, in Kafka's order:

1. Leftovers of interrupted operations: `*.deleted` files are removed (their deletion was only
   scheduled); `*.cleaned` files are removed (a cleaner run that did not finish), and so is every
   `*.swap` file at or after the smallest `.cleaned` offset (an unfinished segment split); the
   remaining `.swap` files are finished swaps: the segments they replace — files whose base
   offset lies in [smallest swap base, largest swap end) — are deleted and the swap files renamed
   into place. Temporary `*.tmp` checkpoint files are removed.
2. Segment files, in base offset order. An index file without its `.log` is an orphan and is
   removed. A segment whose offset or time index is missing, or fails the sanity check, is
   recovered (its indexes rebuilt from the `.log`).
3. Without a clean shutdown, every segment from the one holding the recovery point on is
   recovered: each batch is validated (length, magic, CRC-32C, offsets) and the indexes rebuilt;
   at the first invalid batch the segment is cut there and every later segment deleted, since
   nothing after a torn write can be trusted. When the recovery point lies inside its segment
   (the active segment is flushed as it grows: log_flush.py), that segment is recovered from the
   recovery point only — what lies below it, index entries included, was fsynced — and the
   producer state starts from the newest snapshot in the segment up to the recovery point (a
   flush for flush.messages or flush.ms takes none: then from the segment's first batch), even
   when the log start lies past it: as Kafka's replay of the whole segment, this keeps the
   producers whose data batches are below the log start (KIP-360).
4. An empty directory gets its first segment at the log start offset; a log that ends before the
   log start offset (a checkpoint ahead of the data) is emptied and restarted there. The active
   segment's indexes get their full preallocated size back.

Recovery re-assigns leader epochs from the batches it reads (only epochs newer than the cache's
latest, as Kafka), so epochs lost with an unsynced `leader-epoch-checkpoint` come back. It also
rebuilds the `.txnindex` of each segment it recovers, as Kafka's LogLoader.recoverSegment: a
temporary producer state is brought to the segment's base offset (snapshot, then the batches
after it), the segment's batches are replayed through it, and each ABORT marker that ends a
transaction appends its AbortedTxn; a snapshot at the segment's end spares the next segment
the same replay.

`load_log` does all of it for `Log.open`, and also checks the topic id in `partition.metadata`,
trims the `leader-epoch-checkpoint` to the loaded offsets and rebuilds the producer state up to
the log end offset (from the newest `.snapshot` below it, then the batches after it).

Everything blocks on disk; run at startup, off the event loop.
"""

from __future__ import annotations

import bisect
import logging
import os
import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from logbroker.clock import Clock
from logbroker.errors import CorruptRecordError, InconsistentTopicIdError, KafkaStorageError
from logbroker.records.batch import BatchHeader
from logbroker.records.control import read_end_txn_marker
from logbroker.storage.abstract_index import CorruptIndexError
from logbroker.storage.file_records import FileRecords
from logbroker.storage.checkpoints import PARTITION_METADATA_FILE, PartitionMetadataFile
from logbroker.storage.leader_epoch_cache import LEADER_EPOCH_CHECKPOINT_FILE, LeaderEpochFileCache
from logbroker.storage.log_config import LogConfig
from logbroker.storage.producer_state import CompletedTxn, ProducerStateManager
from logbroker.types import TopicPartition
from logbroker.storage.log_segment import (
    CLEANED_FILE_SUFFIX,
    DELETED_FILE_SUFFIX,
    INDEX_FILE_SUFFIX,
    LOG_FILE_SUFFIX,
    SWAP_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    TXN_INDEX_FILE_SUFFIX,
    LogSegment,
    LogSegmentOffsetOverflowError,
    log_file,
    offset_from_file_name,
    offset_index_file,
    time_index_file,
)

log = logging.getLogger("kafka.log.LogLoader")

INDEX_SUFFIXES = (INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX)
_TMP_CHECKPOINTS = ("leader-epoch-checkpoint.tmp", "partition.metadata.tmp")


@dataclass(slots=True)
class LoadedSegments:
    """What loading found: the segments in base offset order (never empty) and the offsets."""

    segments: list[LogSegment]
    log_start_offset: int
    recovery_point: int
    log_end_offset: int
    recovered_segments: int
    truncated_bytes: int


def segment_jitter_ms(config: LogConfig) -> int:
    """A random roll jitter for one segment, as Kafka: uniform in [0, min(jitter, segment.ms))."""
    bound = min(config.segment_jitter_ms, config.segment_ms)
    return random.randrange(bound) if bound > 0 else 0


def open_segment(directory: Path, base_offset: int, config: LogConfig, *, clock: Clock,
                 file_already_exists: bool) -> LogSegment:
    return LogSegment.open(directory, base_offset, clock=clock,
                           index_interval_bytes=config.index_interval_bytes,
                           max_index_size=config.segment_index_bytes,
                           rolling_jitter_ms=segment_jitter_ms(config),
                           file_already_exists=file_already_exists,
                           preallocate=config.preallocate and not file_already_exists,
                           init_file_size=config.segment_bytes if config.preallocate else 0)


def _parse_offset(name: str) -> int | None:
    try:
        return offset_from_file_name(name)
    except ValueError:
        return None


def _remove_temp_files_and_collect_swap_files(directory: Path) -> list[Path]:
    swap_files: list[Path] = []
    cleaned_files: list[Path] = []
    min_cleaned_offset: int | None = None
    for entry in sorted(os.scandir(directory), key=lambda e: e.name):
        if not entry.is_file():
            continue
        name, path = entry.name, Path(entry.path)
        if name.endswith(DELETED_FILE_SUFFIX):
            log.debug("Deleting stray temporary file %s", path)
            path.unlink(missing_ok=True)
        elif name.endswith(CLEANED_FILE_SUFFIX):
            offset = _parse_offset(name)
            if offset is not None:
                min_cleaned_offset = offset if min_cleaned_offset is None else min(min_cleaned_offset, offset)
            cleaned_files.append(path)
        elif name.endswith(SWAP_FILE_SUFFIX):
            swap_files.append(path)
        elif name in _TMP_CHECKPOINTS:
            path.unlink(missing_ok=True)
    valid_swaps = []
    for path in swap_files:
        offset = _parse_offset(path.name)
        if offset is None or (min_cleaned_offset is not None and offset >= min_cleaned_offset):
            log.info("Deleting invalid swap file %s (smallest .cleaned offset %s)", path, min_cleaned_offset)
            path.unlink(missing_ok=True)
        else:
            valid_swaps.append(path)
    for path in cleaned_files:
        log.debug("Deleting stray .cleaned file %s", path)
        path.unlink(missing_ok=True)
    return valid_swaps


def _next_offset_of_log_file(path: Path, base_offset: int) -> int:
    records = FileRecords.open(path, file_already_exists=True, writable=False)
    try:
        next_offset = base_offset
        try:
            for _, header in records.batches(0):
                next_offset = header.next_offset
        except CorruptRecordError:
            pass
        return next_offset
    finally:
        records.close_handlers()


def _complete_swaps(directory: Path, swap_files: list[Path]) -> None:
    """Finish segment swaps (compaction, splits) that a crash interrupted after the `.swap`
    files were complete: delete what they replace, then rename them into place."""
    log_swaps = [p for p in swap_files if p.name.endswith(LOG_FILE_SUFFIX + SWAP_FILE_SUFFIX)]
    if not log_swaps:
        for path in swap_files:  # index swaps without their log: nothing to finish
            path.unlink(missing_ok=True)
        return
    min_offset = min(offset_from_file_name(p.name) for p in log_swaps)
    max_offset = max(_next_offset_of_log_file(p, offset_from_file_name(p.name)) for p in log_swaps)
    for entry in os.scandir(directory):
        if not entry.is_file() or entry.name.endswith(SWAP_FILE_SUFFIX):
            continue
        offset = _parse_offset(entry.name)
        if offset is not None and min_offset <= offset < max_offset:
            log.info("Deleting segment file %s, replaced by a swap segment but not yet deleted", entry.path)
            os.unlink(entry.path)
    for path in swap_files:
        target = path.with_name(path.name[:-len(SWAP_FILE_SUFFIX)])
        log.info("Recovering file %s by renaming it from its %s file", target.name, SWAP_FILE_SUFFIX)
        os.replace(path, target)


def epoch_assigner(cache: LeaderEpochFileCache) -> Callable[[int, BatchHeader], None]:
    """An `on_batch` callback for LogSegment.recover: assign each epoch newer than the latest."""
    def on_batch(_position: int, header: BatchHeader) -> None:
        epoch = header.partition_leader_epoch
        if epoch >= 0:
            latest = cache.latest_epoch
            if latest is None or epoch > latest:
                cache.assign(epoch, header.base_offset)
    return on_batch


def complete_txn(psm: ProducerStateManager, segment: LogSegment, completed: CompletedTxn) -> None:
    """A marker in `segment` ended `completed`: index it if aborted, with the last stable offset
    of that moment, then complete it in the producer state (Kafka's order). Raises OSError."""
    segment.update_txn_index(producer_id=completed.producer_id, first_offset=completed.first_offset,
                             last_offset=completed.last_offset, is_aborted=completed.is_aborted,
                             last_stable_offset=psm.last_stable_offset(completed))
    psm.complete_txn(completed)


def load_batch_into_producer_state(psm: ProducerStateManager, segment: LogSegment, position: int,
                                   header: BatchHeader) -> CompletedTxn | None:
    """Apply one batch of `segment` (at `position`) to `psm`; a control batch's marker is read
    from the file (one small record)."""
    marker = None
    if header.is_control and header.records_count > 0:
        marker = read_end_txn_marker(segment.log.read(position, header.size_in_bytes))
    return psm.load_from_batch(header, marker=marker)


@dataclass(slots=True)
class _TxnRecovery:
    """What recovering a segment's .txnindex needs besides the segment."""

    directory: Path
    clock: Clock
    log_start_offset: int
    producer_id_expiration_ms: int
    earlier_segments: list[LogSegment]
    tiered: bool  # remote.storage.enable: the snapshot at the log start is kept


def _recover_segment(segment: LogSegment, epoch_cache: LeaderEpochFileCache,
                     txn: _TxnRecovery | None = None, from_offset: int | None = None) -> int:
    """Recover `segment` (all of it, or with `from_offset` the tail from that recovery point:
    LogSegment.recover), replaying its batches into a producer state brought to where the
    replay starts, and log how many batches were replayed. Returns the bytes truncated.

    The producer state ends as Kafka's, which replays every batch of the segment, those below
    the log start too: a producer with only its transaction marker left above the log start
    keeps the sequence number of its last data batch (KIP-360). So for a tail, the state at the
    recovery point comes from a snapshot inside the segment, or from its first batch, even when
    the log start lies past them (from a snapshot it also holds the producers of earlier
    segments, as the log's state in memory did)."""
    assign_epoch = epoch_assigner(epoch_cache)
    psm = None
    replayed = 0
    if from_offset is not None and segment.recovery_start(from_offset) is None:
        from_offset = None  # an index that cannot be trusted: the whole segment
    if txn is not None:
        psm = ProducerStateManager(txn.directory, clock=txn.clock, keep_snapshot_at_log_start=txn.tiered,
                                   max_producer_id_expiration_ms=txn.producer_id_expiration_ms)
        if from_offset is None:
            rebuild_producer_state(psm, txn.earlier_segments, log_start_offset=txn.log_start_offset,
                                   last_offset=segment.base_offset, at_load=True)
        else:
            rebuild_producer_state(psm, [*txn.earlier_segments, segment],
                                   log_start_offset=min(txn.log_start_offset, segment.base_offset),
                                   last_offset=from_offset, at_load=True)

    def on_batch(position: int, header: BatchHeader) -> None:
        nonlocal replayed
        replayed += 1
        assign_epoch(position, header)
        if psm is not None:
            completed = load_batch_into_producer_state(psm, segment, position, header)
            if completed is not None:
                complete_txn(psm, segment, completed)
    try:
        truncated = segment.recover(None, on_batch=on_batch, from_offset=from_offset)
    except LogSegmentOffsetOverflowError as e:
        raise KafkaStorageError(
            f"Segment {segment.log.path} holds offsets that overflow its index ({e}); splitting "
            f"such segments (left by old Kafka versions) is not supported: move the partition "
            f"away or delete the segment") from e
    log.info("Recovered segment %d of %s from offset %d: %d batch(es) replayed, %d byte(s) "
             "truncated", segment.base_offset, segment.log.path.parent.name,
             segment.base_offset if from_offset is None else from_offset, replayed, truncated)
    if psm is not None:
        psm.take_snapshot()
    return truncated


def load_segments(directory: Path, config: LogConfig, *, clock: Clock, recovery_point: int,
                  log_start_offset: int, had_clean_shutdown: bool,
                  epoch_cache: LeaderEpochFileCache,
                  producer_id_expiration_ms: int | None = None) -> LoadedSegments:
    """Run the steps of the module docstring on `directory`. With `producer_id_expiration_ms`
    (the Log always passes it) recovered segments get their .txnindex rebuilt. Blocks on disk."""
    def txn_recovery(earlier: list[LogSegment]) -> _TxnRecovery | None:
        if producer_id_expiration_ms is None:
            return None
        return _TxnRecovery(directory, clock, log_start_offset, producer_id_expiration_ms, earlier,
                            config.remote_storage_enable)

    swaps = _remove_temp_files_and_collect_swap_files(directory)
    if swaps:
        _complete_swaps(directory, swaps)

    segments: list[LogSegment] = []
    recovered = 0
    names = set(os.listdir(directory))
    for name in sorted(names):
        path = directory / name
        if name.endswith(INDEX_SUFFIXES):
            stem = name.rsplit(".", 1)[0]
            if stem + LOG_FILE_SUFFIX not in names and path.is_file():
                log.info("Found an orphaned index file %s with no corresponding log file; deleting it", path)
                path.unlink(missing_ok=True)
            continue
        if not name.endswith(LOG_FILE_SUFFIX) or not path.is_file():
            continue
        base_offset = _parse_offset(name)
        if base_offset is None or name != log_file(directory, base_offset).name:
            log.warning("Ignoring %s: not a segment file name (20-digit base offset)", path)
            continue
        index_missing = offset_index_file(directory, base_offset).name not in names
        time_index_missing = time_index_file(directory, base_offset).name not in names
        segment = open_segment(directory, base_offset, config, clock=clock, file_already_exists=True)
        needs_recovery = index_missing or time_index_missing
        if needs_recovery:
            if had_clean_shutdown or base_offset < recovery_point:
                log.warning("Could not find the index files of %s; rebuilding them", path)
        else:
            try:
                segment.sanity_check()
            except (FileNotFoundError, CorruptIndexError) as e:
                log.warning("Found a corrupted index for %s (%s); recovering the segment", path, e)
                needs_recovery = True
        if needs_recovery:
            _recover_segment(segment, epoch_cache, txn_recovery(list(segments)))
            recovered += 1
        segments.append(segment)

    truncated_bytes = 0
    if not had_clean_shutdown and segments:
        bases = [s.base_offset for s in segments]
        first = max(0, _floor_index(bases, recovery_point))
        for i in range(first, len(segments)):
            segment = segments[i]
            # The recovery point may lie inside its segment (flushed while active): from there.
            from_offset = recovery_point if i == first and recovery_point > segment.base_offset else None
            truncated = _recover_segment(segment, epoch_cache, txn_recovery(segments[:i]), from_offset)
            recovered += 1
            if truncated > 0:
                truncated_bytes += truncated
                log.warning("Corruption found in segment %d of %s, truncated %d bytes to offset %d; "
                            "deleting the %d segment(s) after it", segment.base_offset, directory.name,
                            truncated, segment.read_next_offset(), len(segments) - i - 1)
                for later in segments[i + 1:]:
                    later.delete()
                del segments[i + 1:]
                break

    if not segments:
        segments.append(open_segment(directory, log_start_offset, config, clock=clock,
                                     file_already_exists=False))
    log_end_offset = segments[-1].read_next_offset()
    if log_end_offset < log_start_offset:
        log.warning("Log end offset %d of %s is below its log start offset %d: emptying the log "
                    "and starting it at %d", log_end_offset, directory.name, log_start_offset,
                    log_start_offset)
        for segment in segments:
            segment.delete()
        segments = [open_segment(directory, log_start_offset, config, clock=clock,
                                 file_already_exists=False)]
        log_end_offset = log_start_offset
    try:
        segments[-1].resize_indexes(config.segment_index_bytes)
    except ValueError as e:  # segment.index.bytes lowered below the entries: roll on next append
        log.warning("Could not resize the indexes of the active segment of %s: %s", directory.name, e)

    new_log_start = max(log_start_offset, segments[0].base_offset)
    new_recovery_point = log_end_offset if had_clean_shutdown else min(recovery_point, log_end_offset)
    return LoadedSegments(segments, new_log_start, new_recovery_point, log_end_offset, recovered,
                          truncated_bytes)


def _floor_index(bases: list[int], offset: int) -> int:
    """Index of the last base <= offset, or -1."""
    return bisect.bisect_right(bases, offset) - 1


def rebuild_producer_state(psm: ProducerStateManager, segments: list[LogSegment], *,
                           log_start_offset: int, last_offset: int, at_load: bool = False,
                           reload_from_clean_shutdown: bool = False) -> None:
    """Bring the producer state to `last_offset` (Kafka's rebuildProducerState): from the newest
    snapshot below it, then the batch headers after that snapshot; end with a snapshot at
    `last_offset`. After a clean shutdown with no snapshot at all (data written by a broker that
    kept none), empty snapshots are written instead, sparing a scan of the whole log.
    Blocks on disk (reads headers, writes and fsyncs the snapshot)."""
    if reload_from_clean_shutdown and psm.latest_snapshot_offset() is None:
        for offset in sorted({s.base_offset for s in segments[-2:]} | {last_offset}):
            if offset >= psm.map_end_offset:
                psm.update_map_end_offset(offset)
                psm.take_snapshot()
        return
    was_empty = psm.is_empty and psm.map_end_offset >= last_offset
    if at_load:
        start = psm.load(log_start_offset, last_offset)
    else:
        start = psm.truncate_and_reload(log_start_offset, last_offset)
    if last_offset > start and not was_empty:
        bases = [s.base_offset for s in segments]
        for segment in segments[max(0, _floor_index(bases, start)):]:
            if segment.base_offset >= last_offset:
                break
            found = segment.translate_offset(max(start, segment.base_offset))
            if found is None:
                continue
            for position, header in segment.log.batches(found[0]):
                if header.base_offset >= last_offset:
                    break
                if header.last_offset >= start:
                    completed = load_batch_into_producer_state(psm, segment, position, header)
                    if completed is not None:
                        psm.complete_txn(completed)
    psm.update_map_end_offset(last_offset)
    psm.take_snapshot()


@dataclass(slots=True)
class LoadedLog:
    """What `load_log` built for a `Log`: the loaded segments and offsets, the leader epoch cache
    trimmed to them, the producer state at the log end offset, and the topic id (the stored one,
    else the one given)."""

    loaded: LoadedSegments
    leader_epoch_cache: LeaderEpochFileCache
    producer_state: ProducerStateManager
    topic_id: uuid.UUID | None


def read_topic_id(directory: Path) -> uuid.UUID | None:
    """The topic id in the directory's partition.metadata, None when there is no such file."""
    metadata = PartitionMetadataFile(directory / PARTITION_METADATA_FILE)
    return metadata.read() if metadata.exists() else None


def load_log(directory: Path, config: LogConfig, *, clock: Clock, topic_partition: TopicPartition,
             recovery_point: int, log_start_offset: int, had_clean_shutdown: bool,
             topic_id: uuid.UUID | None, producer_id_expiration_ms: int) -> LoadedLog:
    """Open (creating if needed) and load one partition directory for `Log.open`.

    `topic_id`, when given, is checked against partition.metadata (InconsistentTopicIdError) or
    written there. Raises KafkaStorageError on I/O errors, with every file it opened closed.
    """
    tp = topic_partition
    try:
        directory.mkdir(parents=True, exist_ok=True)
        epoch_cache = LeaderEpochFileCache(directory / LEADER_EPOCH_CHECKPOINT_FILE)
        stored_topic_id = read_topic_id(directory)
        if topic_id is not None and stored_topic_id is not None and topic_id != stored_topic_id:
            raise InconsistentTopicIdError(
                f"Tried to assign topic ID {topic_id} to log for partition {tp}, but "
                f"{directory / PARTITION_METADATA_FILE} holds topic ID {stored_topic_id}")
        loaded = load_segments(directory, config, clock=clock, recovery_point=recovery_point,
                               log_start_offset=log_start_offset,
                               had_clean_shutdown=had_clean_shutdown, epoch_cache=epoch_cache,
                               producer_id_expiration_ms=producer_id_expiration_ms)
        epoch_cache.truncate_from_end(loaded.log_end_offset)
        epoch_cache.truncate_from_start(loaded.log_start_offset)
        producer_state = ProducerStateManager(
            directory, max_producer_id_expiration_ms=producer_id_expiration_ms, clock=clock,
            keep_snapshot_at_log_start=config.remote_storage_enable)
        producer_state.remove_stray_snapshots(s.base_offset for s in loaded.segments)
    except OSError as e:
        raise KafkaStorageError(f"Error while loading log dir {directory}: {e}") from e
    try:
        rebuild_producer_state(producer_state, list(loaded.segments),
                               log_start_offset=loaded.log_start_offset,
                               last_offset=loaded.log_end_offset, at_load=True,
                               reload_from_clean_shutdown=had_clean_shutdown)
        if topic_id is not None and stored_topic_id is None:
            PartitionMetadataFile(directory / PARTITION_METADATA_FILE).write(topic_id)
    except OSError as e:
        for segment in loaded.segments:
            segment.close_handlers()
        raise KafkaStorageError(f"Error while loading log dir {directory}: {e}") from e
    return LoadedLog(loaded=loaded, leader_epoch_cache=epoch_cache, producer_state=producer_state,
                     topic_id=stored_topic_id or topic_id)
