"""One partition's log (Kafka's UnifiedLog): the offsets over the segments of a LocalLog.

A partition directory `<topic>-<partition>/` holds the segments (architecture.md §2), the
`leader-epoch-checkpoint`, `partition.metadata` and the producer `.snapshot` files. The segments
and their files are the `LocalLog`'s (local_log.py); `Log` keeps the offsets that matter, the
producer state and the leader epochs, validates appends and decides retention:

    log_start_offset <= high_watermark <= log_end_offset
    last_stable_offset <= high_watermark  (min(first unstable offset, high watermark))
    recovery_point <= log_end_offset      (everything below it is fsynced)

Transactions (Kafka's UnifiedLog): the producer state tracks each producer's open transaction;
when a COMMIT/ABORT marker is appended (by the leader, a follower or recovery) the transaction it
ends is completed and, if aborted, gets an AbortedTxn entry in the .txnindex of the segment that
holds the marker. A read_committed fetch reads below the last stable offset and gets the aborted
transactions overlapping what it returns (`read(..., include_aborted_txns=True)`).

Produce appends one batch with `append_as_leader` (validated from its header, offsets and leader
epoch patched in place, written as it came); followers append fetched batches with
`append_as_follower`; fetches get a file region from `read`; followers truncate with
`truncate_to`. The Log decides and acts through the LocalLog, which keeps the segments and the
recovery point and does the file work. Two parts of the class live in their own modules:
retention, DeleteRecords and the cleaner's swap in log_retention.py (`LogRetention`), flushing
and closing in log_flush.py (`LogFlush`); loading and recovery are in log_loader.py.

Threads: every method is synchronous and some block on disk. The event loop calls append, read
and the offset queries (page-cache writes and small reads); anything that fsyncs (`flush`,
`flush_if_needed`) or may remove many files (`delete_old_segments`, `delete_pending_files`,
`close`, `delete`) belongs in a worker thread. An internal lock serialises all of them, and
`flush` runs its fsyncs outside that lock, so a flush never stalls appends.

Deleted segments (retention, truncation) are renamed `.deleted` and their files closed and
removed `file.delete.delay.ms` later by `delete_pending_files` (see local_log.py).
"""

from __future__ import annotations

import logging
import os
import threading
import uuid
from pathlib import Path

from logbroker.clock import Clock
from logbroker.errors import (
    InconsistentTopicIdError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    UnknownServerError,
)
from logbroker.records.batch import (
    NO_TIMESTAMP,
    PATCHED_HEADER_BYTES,
    patch_base_offset,
    patch_partition_leader_epoch,
    read_header,
)
from logbroker.records.control import read_end_txn_marker
from logbroker.records.record_batch import set_log_append_time
from logbroker.storage.checkpoints import PARTITION_METADATA_FILE, PartitionMetadataFile
from logbroker.storage.leader_epoch_cache import EpochEntry, LeaderEpochFileCache
from logbroker.storage.local_log import LocalLog
from logbroker.storage.log_config import LogConfig
from logbroker.storage.log_flush import LogFlush
from logbroker.storage.log_loader import complete_txn, load_log, rebuild_producer_state
from logbroker.storage.log_retention import LogRetention
from logbroker.storage.log_segment import LogSegment
from logbroker.storage.log_validator import iter_replicated_batches, validate_batch
from logbroker.storage.producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    CompletedTxn,
    ProducerStateManager,
)
from logbroker.storage.producer_state_entry import ProducerStateEntry
from logbroker.storage.transaction_index import AbortedTxn
from logbroker.storage.values import FetchDataInfo, LogAppendInfo, TimestampAndOffset
from logbroker.types import TopicPartition

log = logging.getLogger("kafka.log.UnifiedLog")

# ListOffsets special timestamps.
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5


class UnexpectedAppendOffsetError(UnknownServerError):
    """A follower append whose offsets start below the log end offset or go backwards
    (Kafka's UnexpectedAppendOffsetException): the follower must truncate first."""


class Log(LogRetention, LogFlush):
    """The log of one partition. Build it with `Log.open`. See the module docstring."""

    def __init__(self, *, directory: Path, config: LogConfig, clock: Clock,
                 topic_partition: TopicPartition, segments: list[LogSegment],
                 log_start_offset: int, recovery_point: int, log_end_offset: int,
                 leader_epoch_cache: LeaderEpochFileCache, producer_state: ProducerStateManager,
                 topic_id: uuid.UUID | None) -> None:
        self._config = config
        self._clock = clock
        self._tp = topic_partition
        self._local = LocalLog(directory=directory, config=config, clock=clock,
                               topic_partition=topic_partition, segments=segments,
                               recovery_point=recovery_point,
                               files_to_delete_with=self._snapshot_to_delete_with)
        self._log_start_offset = log_start_offset
        self._log_end_offset = log_end_offset
        self._high_watermark = log_start_offset
        self._first_unstable_offset: int | None = None
        self._epoch_cache = leader_epoch_cache
        self._producer_state = producer_state
        self._topic_id = topic_id
        self._lock = threading.RLock()
        self._flush_lock = threading.Lock()
        self._unflushed_snapshots: list[Path] = []
        # Tiered logs: the last offset copied to remote storage (-1: none), set by the remote log
        # manager; local retention deletes no segment past it.
        self._highest_offset_in_remote = -1
        self._checkpointed_at = (-1, 0)

    def _snapshot_to_delete_with(self, base_offset: int) -> list[Path]:
        snapshot = self._producer_state.remove_and_mark_snapshot_for_deletion(base_offset)
        return [] if snapshot is None else [snapshot]

    # --- opening ---------------------------------------------------------------------------

    @classmethod
    def open(cls, directory: str | os.PathLike, config: LogConfig, *, clock: Clock,
             recovery_point: int = 0, log_start_offset: int = 0, had_clean_shutdown: bool = False,
             topic_id: uuid.UUID | None = None, high_watermark: int | None = None,
             producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
             topic_partition: TopicPartition | None = None) -> Log:
        """Open (creating if needed) the partition directory and load it (see log_loader.py).

        `recovery_point` and `log_start_offset` come from the log dir's checkpoints,
        `high_watermark` from replication-offset-checkpoint (clamped into the log); without
        `had_clean_shutdown` every segment from the recovery point on is recovered. `topic_id`,
        when given, is checked against partition.metadata (InconsistentTopicIdError) or written
        there. Blocks on disk; run at startup or off the event loop.
        """
        directory = Path(directory)
        tp = topic_partition or TopicPartition.from_dir_name(directory.name)
        built = load_log(directory, config, clock=clock, topic_partition=tp,
                         recovery_point=recovery_point, log_start_offset=log_start_offset,
                         had_clean_shutdown=had_clean_shutdown, topic_id=topic_id,
                         producer_id_expiration_ms=producer_id_expiration_ms)
        loaded = built.loaded
        log_obj = cls(directory=directory, config=config, clock=clock, topic_partition=tp,
                      segments=loaded.segments, log_start_offset=loaded.log_start_offset,
                      recovery_point=loaded.recovery_point, log_end_offset=loaded.log_end_offset,
                      leader_epoch_cache=built.leader_epoch_cache,
                      producer_state=built.producer_state, topic_id=built.topic_id)
        log_obj._maybe_increment_first_unstable_offset()
        if high_watermark is not None:
            log_obj.update_high_watermark(high_watermark)
        if loaded.recovered_segments:
            log.info("Loaded %s: recovered %d segment(s), truncated %d byte(s); log start %d, "
                     "log end %d", tp, loaded.recovered_segments, loaded.truncated_bytes,
                     loaded.log_start_offset, loaded.log_end_offset)
        return log_obj

    # --- properties ------------------------------------------------------------------------

    @property
    def topic_partition(self) -> TopicPartition:
        return self._tp

    @property
    def dir(self) -> Path:
        return self._local.dir

    @property
    def local_log(self) -> LocalLog:
        return self._local

    @property
    def config(self) -> LogConfig:
        return self._config

    def update_config(self, config: LogConfig) -> None:
        """Take a new topic config; new segments and the next appends follow it."""
        with self._lock:
            self._config = config
            self._local.config = config
            self._producer_state.keep_snapshot_at_log_start = config.remote_storage_enable

    @property
    def topic_id(self) -> uuid.UUID | None:
        return self._topic_id

    def assign_topic_id(self, topic_id: uuid.UUID) -> None:
        """Set the topic id of a log that has none and write partition.metadata (fsync);
        InconsistentTopicIdError if it has another one."""
        with self._lock:
            if self._topic_id is not None:
                if self._topic_id != topic_id:
                    raise InconsistentTopicIdError(
                        f"Tried to assign topic ID {topic_id} to log for partition {self._tp}, but "
                        f"log already contained topic ID {self._topic_id}")
                return
            PartitionMetadataFile(self.dir / PARTITION_METADATA_FILE).write(topic_id)
            self._topic_id = topic_id

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest transaction not yet decided, or decided but with its
        marker not yet below the high watermark; None when there is none."""
        return self._first_unstable_offset

    @property
    def last_stable_offset(self) -> int:
        """Kafka's LSO: every offset below it is decided (committed, aborted or not
        transactional) and below the high watermark. Equals the high watermark without
        transactions in progress."""
        first_unstable = self._first_unstable_offset
        hw = self._high_watermark
        return first_unstable if first_unstable is not None and first_unstable < hw else hw

    def _maybe_increment_first_unstable_offset(self) -> None:
        first_unstable = self._producer_state.first_unstable_offset()
        if first_unstable is not None and first_unstable < self._log_start_offset:
            first_unstable = self._log_start_offset
        self._first_unstable_offset = first_unstable

    @property
    def recovery_point(self) -> int:
        """Everything below it is fsynced (the LocalLog's); recovery after a crash starts there."""
        return self._local.recovery_point

    @property
    def highest_offset_in_remote_storage(self) -> int:
        return self._highest_offset_in_remote

    def update_highest_offset_in_remote_storage(self, offset: int) -> None:
        """The remote log manager recorded a copy up to `offset` (or learnt it from the store)."""
        with self._lock:
            self._highest_offset_in_remote = max(self._highest_offset_in_remote, offset)

    @property
    def leader_epoch_cache(self) -> LeaderEpochFileCache:
        return self._epoch_cache

    @property
    def producer_state(self) -> ProducerStateManager:
        return self._producer_state

    @property
    def latest_epoch(self) -> int | None:
        return self._epoch_cache.latest_epoch

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        """The segments in base offset order (a snapshot; the last is the active one)."""
        return self._local.segments

    @property
    def active_segment(self) -> LogSegment:
        return self._local.active_segment

    @property
    def size_in_bytes(self) -> int:
        return self._local.size_in_bytes

    @property
    def num_unflushed_messages(self) -> int:
        return self._local.unflushed_messages(self._log_end_offset)

    @property
    def last_flush_ms(self) -> int:
        return self._local.last_flush_ms

    @property
    def closed(self) -> bool:
        return self._local.closed

    def __repr__(self) -> str:
        return (f"Log({self._tp}, dir={str(self.dir)!r}, log_start_offset={self._log_start_offset}, "
                f"log_end_offset={self._log_end_offset}, high_watermark={self._high_watermark})")

    # --- high watermark and leader epochs --------------------------------------------------

    def update_high_watermark(self, high_watermark: int) -> int:
        """Set the high watermark, clamped to [log_start_offset, log_end_offset]; returns it."""
        with self._lock:
            hw = min(max(high_watermark, self._log_start_offset), self._log_end_offset)
            self._high_watermark = hw
            self._producer_state.on_high_watermark_updated(hw)
            self._maybe_increment_first_unstable_offset()
            return hw

    def maybe_assign_epoch_start_offset(self, leader_epoch: int, start_offset: int) -> None:
        """Record that `leader_epoch` starts at `start_offset` (a new leader at its log end)."""
        with self._lock:
            self._epoch_cache.assign(leader_epoch, start_offset)

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int] | None:
        """OffsetForLeaderEpoch: (epoch, end offset) as LeaderEpochFileCache.end_offset_for, or
        None when the epoch is unknown (Kafka answers UNDEFINED_EPOCH_OFFSET)."""
        with self._lock:
            epoch, end_offset = self._epoch_cache.end_offset_for(leader_epoch, self._log_end_offset)
            return None if end_offset < 0 else (epoch, end_offset)

    # --- appending -------------------------------------------------------------------------

    def append_as_leader(self, buf, *, leader_epoch: int, is_from_client: bool = True) -> LogAppendInfo:
        """Validate one produced batch, assign its offsets and append it.

        `buf` must be exactly one batch. Its baseOffset and partitionLeaderEpoch are patched — in
        place when `buf` is writable, else in a 16-byte copy written ahead of the rest, so a
        read-only buffer (the bytes a request decoder gives) is never copied whole; a
        LogAppendTime topic also rewrites attributes, maxTimestamp and the CRC (copying a
        read-only buffer for that). Then the bytes are written as they are. A retry of
        one of an idempotent producer's last five batches is not written again: the answer
        carries the original offsets and `duplicate=True`. Raises the validation errors of
        log_validator.py and the producer-state errors (OUT_OF_ORDER_SEQUENCE_NUMBER,
        INVALID_TXN_STATE, …). A COMMIT/ABORT marker (`is_from_client=False`) ends its producer's
        transaction: INVALID_PRODUCER_EPOCH for an older producer epoch,
        TRANSACTION_COORDINATOR_FENCED for an older coordinator epoch; an abort is indexed.

        Runs on the event loop: a page-cache write, no fsync (see `needs_flush`).
        """
        view = memoryview(buf)
        now_ms = self._clock.time_ms()
        with self._lock:
            self._check_open()
            header = validate_batch(view, config=self._config, now_ms=now_ms,
                                    is_from_client=is_from_client, topic_partition=self._tp)
            marker = read_end_txn_marker(view) if header.is_control else None
            duplicate = self._producer_state.check(header, marker)
            if duplicate is not None:
                return LogAppendInfo(
                    first_offset=duplicate.first_offset, last_offset=duplicate.last_offset,
                    max_timestamp=duplicate.timestamp, offset_of_max_timestamp=duplicate.last_offset,
                    log_append_time_ms=duplicate.timestamp, log_start_offset=self._log_start_offset,
                    record_count=header.records_count, valid_bytes=header.size_in_bytes,
                    duplicate=True)
            base_offset = self._log_end_offset
            log_append_time_ms = -1
            head = None
            if self._config.log_append_time and not header.is_control:
                if view.readonly:  # attributes, maxTimestamp and the CRC change: a copy to patch
                    view = memoryview(bytearray(view))
                set_log_append_time(view, 0, now_ms)
                log_append_time_ms = now_ms
                header = read_header(view, 0)  # attributes and maxTimestamp changed
            if view.readonly:
                # Only baseOffset and the leader epoch change, both before the CRC: write a patched
                # copy of the first 16 bytes ahead of the rest instead of copying the batch.
                view_to_patch = head = bytearray(view[:PATCHED_HEADER_BYTES])
            else:
                view_to_patch = view
            patch_base_offset(view_to_patch, 0, base_offset)
            patch_partition_leader_epoch(view_to_patch, 0, leader_epoch)
            # The patches above are in the bytes only: `header` may still hold the producer's
            # baseOffset and epoch, so offsets are computed from base_offset.
            last_offset = base_offset + header.last_offset_delta
            try:
                segment = self._maybe_roll(header.size_in_bytes, header.max_timestamp, last_offset,
                                           now_ms, roll_offset=base_offset)
                segment.append(largest_offset=last_offset, largest_timestamp=header.max_timestamp,
                               offset_of_max_timestamp=last_offset, records=view, head=head,
                               first_offset=base_offset)
            except OSError as e:
                raise KafkaStorageError(f"I/O error while appending to log {self.dir}: {e}") from e
            self._log_end_offset = last_offset + 1
            completed = self._producer_state.update(header, base_offset, marker)
            if completed is not None:
                self._complete_txn(segment, completed)
            if header.is_transactional:
                self._maybe_increment_first_unstable_offset()
            if leader_epoch >= 0:
                self._epoch_cache.assign(leader_epoch, base_offset)
            return LogAppendInfo(
                first_offset=base_offset, last_offset=last_offset,
                max_timestamp=header.max_timestamp, offset_of_max_timestamp=last_offset,
                log_append_time_ms=log_append_time_ms, log_start_offset=self._log_start_offset,
                record_count=header.records_count, valid_bytes=header.size_in_bytes)

    def append_as_follower(self, buf) -> LogAppendInfo:
        """Append batches fetched from the leader, offsets and epochs as assigned there.

        `buf` may hold several batches and end in a partial one (dropped). Each batch's CRC is
        checked (CORRUPT_MESSAGE); offsets must increase and start at or after the log end
        (UnexpectedAppendOffsetError otherwise: truncate first). Batches are written one by one
        so the indexes match what recovery would rebuild. The leader epoch cache learns each
        batch's epoch. With no complete batch, nothing happens (first_offset -1).
        """
        view = memoryview(buf)
        now_ms = self._clock.time_ms()
        batches = list(iter_replicated_batches(view))
        if not batches:
            return LogAppendInfo(first_offset=-1, last_offset=-1, max_timestamp=NO_TIMESTAMP,
                                 offset_of_max_timestamp=-1, log_append_time_ms=-1,
                                 log_start_offset=self._log_start_offset, record_count=0,
                                 valid_bytes=0)
        with self._lock:
            self._check_open()
            previous_last = self._log_end_offset - 1
            for _, header in batches:
                if header.base_offset <= previous_last or header.last_offset_delta < 0:
                    raise UnexpectedAppendOffsetError(
                        f"Unexpected offset in append to {self._tp}: batch [{header.base_offset}, "
                        f"{header.last_offset}] does not follow offset {previous_last} (log end "
                        f"offset {self._log_end_offset})")
                previous_last = header.last_offset
            max_timestamp, offset_of_max = NO_TIMESTAMP, -1
            records = valid_bytes = 0
            try:
                for position, header in batches:
                    size = header.size_in_bytes
                    batch = view[position:position + size]
                    segment = self._maybe_roll(size, header.max_timestamp, header.last_offset,
                                               now_ms, roll_offset=header.base_offset)
                    segment.append(largest_offset=header.last_offset,
                                   largest_timestamp=header.max_timestamp,
                                   offset_of_max_timestamp=header.last_offset, records=batch,
                                   first_offset=header.base_offset)
                    self._log_end_offset = header.next_offset
                    marker = read_end_txn_marker(batch) if header.is_control else None
                    completed = self._producer_state.load_from_batch(header, marker=marker)
                    if completed is not None:
                        self._complete_txn(segment, completed)
                    epoch = header.partition_leader_epoch
                    if epoch >= 0:
                        self._epoch_cache.assign(epoch, header.base_offset)
                    if header.max_timestamp > max_timestamp:
                        max_timestamp, offset_of_max = header.max_timestamp, header.last_offset
                    records += header.records_count
                    valid_bytes += size
            except OSError as e:
                raise KafkaStorageError(f"I/O error while appending to log {self.dir}: {e}") from e
            finally:
                self._maybe_increment_first_unstable_offset()
            return LogAppendInfo(
                first_offset=batches[0][1].base_offset, last_offset=batches[-1][1].last_offset,
                max_timestamp=max_timestamp, offset_of_max_timestamp=offset_of_max,
                log_append_time_ms=-1, log_start_offset=self._log_start_offset,
                record_count=records, valid_bytes=valid_bytes)

    def _complete_txn(self, segment: LogSegment, completed: CompletedTxn) -> None:
        try:
            complete_txn(self._producer_state, segment, completed)
        except OSError as e:
            raise KafkaStorageError(f"I/O error writing the transaction index of {self.dir}: {e}") from e

    def _check_open(self) -> None:
        self._local.check_open()

    # --- rolling ---------------------------------------------------------------------------

    def _maybe_roll(self, size: int, max_timestamp: int, max_offset: int, now_ms: int, *,
                    roll_offset: int) -> LogSegment:
        if self._local.should_roll(size, max_timestamp, max_offset, now_ms):
            segment = self._local.active_segment
            log.debug("Rolling %s: active segment %d is %d bytes, incoming batch %d bytes",
                      self._tp, segment.base_offset, segment.size, size)
            return self._roll(roll_offset)
        return self._local.active_segment

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at max(expected_next_offset, log end offset).

        The old active segment gets its final time index entry and its indexes and file trimmed;
        a producer snapshot is taken at the new base offset. Its fsync is left to the next
        `flush` (see `needs_flush`).
        """
        with self._lock:
            self._check_open()
            try:
                return self._roll(expected_next_offset)
            except OSError as e:
                raise KafkaStorageError(f"I/O error while rolling log {self.dir}: {e}") from e

    def _roll(self, expected_next_offset: int | None) -> LogSegment:
        new_offset = max(expected_next_offset or 0, self._log_end_offset)
        segment = self._local.roll(new_offset)
        self._producer_state.update_map_end_offset(new_offset)
        snapshot = self._producer_state.take_snapshot(sync=False)
        if snapshot is not None:
            self._unflushed_snapshots.append(snapshot)
        if self._high_watermark > self._log_end_offset:
            self._high_watermark = self._log_end_offset
        return segment

    # --- reading ---------------------------------------------------------------------------

    def read(self, offset: int, *, max_bytes: int, max_offset: int | None = None,
             min_one_message: bool = True, include_aborted_txns: bool = False) -> FetchDataInfo:
        """The file region to send for a fetch from `offset`.

        The region starts at the batch that contains `offset` (clients skip the records before
        it) and holds at most `max_bytes` (with `min_one_message`, at least the first batch
        whole), never crossing into the batch that holds `max_offset` (exclusive: the high
        watermark for consumers, None for followers who read to the log end). It may end inside
        a batch; clients drop a partial last batch. An offset at the log end or at/after
        `max_offset` gives an empty FetchDataInfo (region None); OffsetOutOfRangeError only for
        an offset below the log start offset or above the log end offset.
        `include_aborted_txns` (read_committed, with `max_offset` the last stable offset) also
        returns the aborted transactions overlapping the region, from the .txnindex files.
        """
        with self._lock:
            self._check_open()
            if offset < self._log_start_offset or offset > self._log_end_offset:
                raise OffsetOutOfRangeError(
                    f"Received request for offset {offset} for partition {self._tp}, but we only "
                    f"have log segments from offset {self._log_start_offset} up to "
                    f"{self._log_end_offset}")
            limit = self._log_end_offset if max_offset is None else min(max_offset, self._log_end_offset)
            try:
                return self._local.read(offset, max_bytes=max_bytes, limit=limit,
                                        log_end_offset=self._log_end_offset,
                                        min_one_message=min_one_message,
                                        include_aborted_txns=include_aborted_txns)
            except OSError as e:
                raise KafkaStorageError(f"I/O error while reading log {self.dir}: {e}") from e

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping [start_offset, upper_bound_offset), from the
        .txnindex files (the cleaner's view). Reads the indexes (cached after the first time)."""
        with self._lock:
            return self._local.collect_aborted_transactions(start_offset, upper_bound_offset)

    def fetch_offset_by_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """ListOffsets: -2 (earliest) → the log start offset; -1 (latest) → the log end offset
        (the caller caps it with the high watermark or last stable offset); -3 (max timestamp) →
        the record with the largest timestamp; otherwise the first record whose timestamp is
        >= `timestamp` (segments skipped on their largest timestamp, then the time index, then
        the records of the one batch that reaches the target). None when there is no such record.
        Reads from disk; the timestamp search decodes one batch.
        """
        with self._lock:
            self._check_open()
            if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
                earliest = self._epoch_cache.earliest_entry
                epoch = (earliest.epoch if earliest is not None
                         and earliest.start_offset <= self._log_start_offset else -1)
                return TimestampAndOffset(NO_TIMESTAMP, self._log_start_offset, epoch)
            if timestamp == LATEST_TIMESTAMP:
                latest = self._epoch_cache.latest_epoch
                return TimestampAndOffset(NO_TIMESTAMP, self._log_end_offset,
                                          -1 if latest is None else latest)
            if timestamp == LATEST_TIERED_TIMESTAMP:
                return TimestampAndOffset(NO_TIMESTAMP, -1, -1)  # no tiered storage
            if timestamp == MAX_TIMESTAMP:
                return self._local.max_timestamp_and_offset()
            if timestamp < 0:
                return None
            return self._local.find_offset_by_timestamp(timestamp, self._log_start_offset)

    # --- truncation ------------------------------------------------------------------------

    def truncate_to(self, offset: int) -> bool:
        """Remove every batch that holds an offset >= `offset` (a batch straddling it goes
        whole: the log end offset becomes the first offset not removed, <= `offset`). For
        followers after OffsetForLeaderEpoch. Also trims the leader epoch cache, the producer
        state and the high watermark. Returns whether anything was removed. Blocks on disk.
        """
        if offset < 0:
            raise ValueError(f"Cannot truncate partition {self._tp} to a negative offset ({offset})")
        with self._lock:
            self._check_open()
            if offset >= self._log_end_offset:
                # A leader that assigned an epoch but wrote nothing before losing leadership
                # leaves an entry past its log end: drop it.
                self._epoch_cache.truncate_from_end(self._log_end_offset)
                return False
            log.info("Truncating %s to offset %d (log end offset %d)", self._tp, offset,
                     self._log_end_offset)
            if self._local.segments[0].base_offset > offset:
                self.truncate_fully_and_start_at(offset)
                return True
            try:
                self._log_end_offset = self._local.truncate_to(offset)  # caps the recovery point
                self._epoch_cache.truncate_from_end(self._log_end_offset)
                self._log_start_offset = min(self._log_start_offset, self._log_end_offset)
                self._rebuild_producer_state(self._log_end_offset)
                self._high_watermark = min(max(self._high_watermark, self._log_start_offset),
                                           self._log_end_offset)
                self._producer_state.on_high_watermark_updated(self._high_watermark)
                self._maybe_increment_first_unstable_offset()
            except OSError as e:
                raise KafkaStorageError(f"I/O error while truncating log {self.dir}: {e}") from e
            return True

    def truncate_fully_and_start_at(self, offset: int, *, log_start_offset: int | None = None) -> None:
        """Delete every segment and start an empty log at `offset` (a follower far behind the
        leader's log start). Log start offset (default `offset`), log end offset, recovery point
        and high watermark all move there; the leader epoch cache and producer state are
        cleared. Blocks on disk.
        """
        with self._lock:
            self._check_open()
            log.info("Truncating %s fully and starting at offset %d", self._tp, offset)
            try:
                self._local.truncate_fully_and_start_at(offset)  # recovery point moves there
                self._log_end_offset = offset
                self._epoch_cache.clear_and_flush()
                self._producer_state.truncate_fully_and_start_at(offset)
                self._log_start_offset = offset if log_start_offset is None else log_start_offset
                self._high_watermark = offset
                self._first_unstable_offset = None
            except OSError as e:
                raise KafkaStorageError(f"I/O error while truncating log {self.dir}: {e}") from e

    def start_at_with_remote_state(self, offset: int, *, epochs: list[EpochEntry],
                                   producers: list[ProducerStateEntry] | None) -> None:
        """A follower starting its log from tiered storage (Kafka's buildRemoteLogAuxState,
        remote/aux_state.py): an empty log at `offset` (truncate_fully_and_start_at) whose leader
        epoch cache holds `epochs` (the lineage below `offset`) and whose producer state is that
        of the snapshot `producers` (written as this log's snapshot at `offset`; None: no
        producers). Blocks on disk."""
        with self._lock:
            self.truncate_fully_and_start_at(offset)
            for entry in epochs:
                if entry.start_offset < offset:
                    self._epoch_cache.assign(entry.epoch, entry.start_offset)
            if producers is not None:
                self._producer_state.restore_snapshot(offset, producers)
                self._maybe_increment_first_unstable_offset()

    # --- producer state --------------------------------------------------------------------

    def _rebuild_producer_state(self, last_offset: int, *, at_load: bool = False,
                                reload_from_clean_shutdown: bool = False) -> None:
        rebuild_producer_state(self._producer_state, list(self._local.segments),
                               log_start_offset=self._log_start_offset, last_offset=last_offset,
                               at_load=at_load, reload_from_clean_shutdown=reload_from_clean_shutdown)
