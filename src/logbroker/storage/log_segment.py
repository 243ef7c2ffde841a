"""A log segment: one .log file with its .index, .timeindex and .txnindex, named by its base offset."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

from logbroker.clock import Clock
from logbroker.errors import CorruptRecordError, KafkaStorageError
from logbroker.records.batch import LOG_OVERHEAD, MAGIC, NO_TIMESTAMP, BatchHeader, compute_crc
from logbroker.storage.abstract_index import DEFAULT_MAX_INDEX_SIZE, INT32_MAX, CorruptIndexError
from logbroker.storage.file_records import FileRecords
from logbroker.storage.offset_index import OffsetIndex
from logbroker.storage.time_index import TimeIndex
from logbroker.storage.transaction_index import AbortedTxn, TransactionIndex
from logbroker.storage.values import FetchDataInfo, TimestampAndOffset, TimestampOffset

log = logging.getLogger("kafka.log.LogSegment")

LOG_FILE_SUFFIX = ".log"
INDEX_FILE_SUFFIX = ".index"
TIME_INDEX_FILE_SUFFIX = ".timeindex"
TXN_INDEX_FILE_SUFFIX = ".txnindex"
DELETED_FILE_SUFFIX = ".deleted"
CLEANED_FILE_SUFFIX = ".cleaned"
SWAP_FILE_SUFFIX = ".swap"

_UNKNOWN = TimestampOffset(NO_TIMESTAMP, -1)
# How many of the last batches appended a segment finds by their first offset without the index
# (between 1 and this many): a consumer or follower at the end fetches from the first offset of
# one of them.
RECENT_BATCHES = 32


def filename_prefix_from_offset(offset: int) -> str:
    """The 20-digit, zero-padded base offset that names a segment's files."""
    return f"{offset:020d}"


def offset_from_file_name(name: str) -> int:
    """The base offset in a segment file name such as `00000000000000000042.log.deleted`."""
    return int(name.split(".", 1)[0])


def log_file(directory: str | os.PathLike, base_offset: int, suffix: str = "") -> Path:
    return Path(directory) / f"{filename_prefix_from_offset(base_offset)}{LOG_FILE_SUFFIX}{suffix}"


def offset_index_file(directory: str | os.PathLike, base_offset: int, suffix: str = "") -> Path:
    return Path(directory) / f"{filename_prefix_from_offset(base_offset)}{INDEX_FILE_SUFFIX}{suffix}"


def time_index_file(directory: str | os.PathLike, base_offset: int, suffix: str = "") -> Path:
    return Path(directory) / f"{filename_prefix_from_offset(base_offset)}{TIME_INDEX_FILE_SUFFIX}{suffix}"


def transaction_index_file(directory: str | os.PathLike, base_offset: int, suffix: str = "") -> Path:
    return Path(directory) / f"{filename_prefix_from_offset(base_offset)}{TXN_INDEX_FILE_SUFFIX}{suffix}"


class LogSegmentOffsetOverflowError(KafkaStorageError):
    """A batch's offsets do not fit this segment's indexes (relative offset outside int32)."""


def _suffix_after(name: str, marker: str) -> str:
    """What follows `marker` in a file name: `.cleaned` for `….log.cleaned`, "" for `….log`."""
    i = name.find(marker)
    return name[i + len(marker):] if i >= 0 else ""


def _replace_suffix(path: Path, old_suffix: str, new_suffix: str) -> Path:
    name = path.name
    if not name.endswith(old_suffix):
        raise ValueError(f"expected {path} to end with {old_suffix!r}")
    return path.with_name(name[:len(name) - len(old_suffix)] + new_suffix)


class LogSegment:
    """A segment of a partition's log: `<base>.log` (FileRecords), `<base>.index` (OffsetIndex),
    `<base>.timeindex` (TimeIndex) and, once a transaction aborted in it, `<base>.txnindex`
    (TransactionIndex), where `<base>` is the 20-digit base offset, which is <= the first offset
    in the segment. The .txnindex is renamed, truncated and deleted with the other files;
    `recover` empties it and the log refills it from the segment's control batches.

    Index rule (Kafka's, architecture.md §2): `append` notes the file position before it writes; if more
    than `index_interval_bytes` were appended since the last index entry, it adds an offset index
    entry (the append's last offset → that position) and a time index entry (the largest timestamp
    so far and its offset, if larger than the last), then counts this append's bytes. A segment's
    first append never gets an entry. `recover` rebuilds both indexes the same way, batch by batch.

    After a crash: the .log may end in a torn batch and the indexes may be stale, untrimmed or
    missing. The log rebuilds every segment after its recovery point with `recover`, which keeps
    exactly the leading valid batches and truncates the rest. Segments below the recovery point
    were flushed and are trusted (`sanity_check` does Kafka's cheap checks).

    Indexes of a segment opened with `file_already_exists` are mapped on first use, as Kafka's
    LazyIndex, so that opening a log with many segments does not map them all.

    The active segment also remembers where its last few batches lie (RECENT_BATCHES), by first offset
    (`_recent_batches`): readers at the end of the log (consumers, followers) fetch from exactly
    those offsets, and find them without the index lookup and the scan of batch headers after
    it. Forgotten on truncation, recovery and roll.

    Everything blocks on disk and is synchronous (no asyncio); the owning log serialises calls.
    `flush` may run on a worker thread.
    """

    def __init__(self, *, log_records: FileRecords, offset_index_path: Path, time_index_path: Path,
                 base_offset: int, index_interval_bytes: int, max_index_size: int,
                 rolling_jitter_ms: int, clock: Clock, create_indexes: bool,
                 txn_index_path: Path | None = None) -> None:
        self._log = log_records
        self._offset_index_path = offset_index_path
        self._time_index_path = time_index_path
        if txn_index_path is None:
            txn_index_path = transaction_index_file(log_records.path.parent, base_offset,
                                                    _suffix_after(log_records.path.name, LOG_FILE_SUFFIX))
        self.txn_index = TransactionIndex(base_offset, txn_index_path)
        self._offset_index: OffsetIndex | None = None
        self._time_index: TimeIndex | None = None
        self._base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.max_index_size = max_index_size
        self.rolling_jitter_ms = rolling_jitter_ms
        self._clock = clock
        self._created_ms = clock.time_ms()
        self._rolling_based_timestamp: int | None = None
        self._max_timestamp_and_offset_so_far = _UNKNOWN
        self._bytes_since_last_index_entry = 0
        self._recent_batches: dict[int, tuple[int, int]] = {}  # first offset -> (position, size)
        if create_indexes:  # a new segment has all three files from the start
            self._load_indexes()

    @classmethod
    def open(cls, directory: str | os.PathLike, base_offset: int, *, clock: Clock,
             index_interval_bytes: int = 4096, max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
             rolling_jitter_ms: int = 0, file_already_exists: bool = False,
             preallocate: bool = False, init_file_size: int = 0,
             file_suffix: str = "") -> LogSegment:
        """Open the segment with this base offset in `directory`, creating its files if needed.

        For a new segment (`file_already_exists=False`) files of that name left by a crash during
        a roll are stale: they are deleted first, with a warning, as Kafka's roll does. Fresh
        preallocated indexes are created; with `preallocate` the .log is extended to
        `init_file_size` (segment.bytes) up front.
        """
        directory = Path(directory)
        log_path = log_file(directory, base_offset, file_suffix)
        offset_path = offset_index_file(directory, base_offset, file_suffix)
        time_path = time_index_file(directory, base_offset, file_suffix)
        txn_path = transaction_index_file(directory, base_offset, file_suffix)
        if not file_already_exists:
            for stale in (log_path, offset_path, time_path, txn_path):
                if stale.exists():
                    log.warning("Newly rolled segment file %s already exists; deleting it first", stale)
                    stale.unlink()
        records = FileRecords.open(log_path,
                                   file_already_exists=file_already_exists,
                                   preallocate=preallocate, init_file_size=init_file_size)
        return cls(log_records=records, offset_index_path=offset_path, time_index_path=time_path,
                   base_offset=base_offset, index_interval_bytes=index_interval_bytes,
                   max_index_size=max_index_size, rolling_jitter_ms=rolling_jitter_ms, clock=clock,
                   create_indexes=not file_already_exists, txn_index_path=txn_path)

    # --- properties ---------------------------------------------------------------------------

    @property
    def base_offset(self) -> int:
        return self._base_offset

    @property
    def log(self) -> FileRecords:
        return self._log

    @property
    def size(self) -> int:
        """Bytes in the .log file."""
        return self._log.size_in_bytes

    def _load_indexes(self) -> None:
        self.offset_index, self.time_index  # noqa: B018 - the properties map (and create) them

    @property
    def offset_index(self) -> OffsetIndex:
        if self._offset_index is None:
            self._offset_index = OffsetIndex(self._offset_index_path, self._base_offset,
                                             max_index_size=self.max_index_size)
        return self._offset_index

    @property
    def time_index(self) -> TimeIndex:
        if self._time_index is None:
            self._time_index = TimeIndex(self._time_index_path, self._base_offset,
                                         max_index_size=self.max_index_size)
        return self._time_index

    @property
    def offset_index_path(self) -> Path:
        return self._offset_index_path

    @property
    def time_index_path(self) -> Path:
        return self._time_index_path

    def _read_max_timestamp_and_offset_so_far(self) -> TimestampOffset:
        if self._max_timestamp_and_offset_so_far == _UNKNOWN:
            self._max_timestamp_and_offset_so_far = self.time_index.last_entry
        return self._max_timestamp_and_offset_so_far

    @property
    def max_timestamp_so_far(self) -> int:
        """The largest batch maxTimestamp in the segment (NO_TIMESTAMP if none): kept in memory,
        loaded from the last time index entry after a reopen."""
        return self._read_max_timestamp_and_offset_so_far().timestamp

    @property
    def offset_of_max_timestamp_so_far(self) -> int:
        return self._read_max_timestamp_and_offset_so_far().offset

    @property
    def last_modified_ms(self) -> int:
        return os.stat(self._log.path).st_mtime_ns // 1_000_000

    def set_last_modified_ms(self, ms: int) -> None:
        """Set the modification time of the segment's files (retention tests, Kafka's lastModified_=)."""
        ns = ms * 1_000_000
        for path in (self._log.path, self._offset_index_path, self._time_index_path,
                     self.txn_index.path):
            if path.exists():
                os.utime(path, ns=(ns, ns))

    @property
    def largest_timestamp(self) -> int:
        """The largest record timestamp, or the last-modified time when there is none (retention)."""
        max_timestamp = self.max_timestamp_so_far
        return max_timestamp if max_timestamp >= 0 else self.last_modified_ms

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        return self.offset_index.can_append_offset(offset)

    def has_overflow(self) -> bool:
        """Whether the last batch's offsets overflow the indexes (segments from old bugs)."""
        next_offset = self.read_next_offset()
        return next_offset > self._base_offset and not self.can_convert_to_relative_offset(next_offset - 1)

    # --- append -------------------------------------------------------------------------------

    def append(self, *, largest_offset: int, largest_timestamp: int, offset_of_max_timestamp: int,
               records, head=None, first_offset: int | None = None) -> None:
        """Append whole batches (bytes or memoryview, already validated and offset-assigned;
        `head`, when given, replaces their first bytes as written — see FileRecords.append).
        `first_offset`, given when `records` is exactly one batch, is its base offset: the
        segment then remembers where it lies (`translate_offset`).

        `largest_offset` is the last offset in `records`; `largest_timestamp` their largest
        maxTimestamp and `offset_of_max_timestamp` the last offset of the batch carrying it.
        One write of the buffer as given; the index rule is in the class docstring.
        Raises LogSegmentOffsetOverflowError if largest_offset does not fit the indexes.
        """
        size = memoryview(records).nbytes
        if size == 0:
            return
        physical_position = self._log.size_in_bytes
        if physical_position == 0:
            self._rolling_based_timestamp = largest_timestamp
        if not 0 <= largest_offset - self._base_offset <= INT32_MAX:  # can_convert_to_relative_offset
            raise LogSegmentOffsetOverflowError(
                f"detected offset overflow at offset {largest_offset} in segment {self!r}")
        if self._bytes_since_last_index_entry > self.index_interval_bytes:
            # Room for the index entries first: a full disk then fails the append before any
            # byte is written (abstract_index.py: a store into an unbacked mapped page is SIGBUS).
            self.offset_index.ensure_room_for_entry()
            self.time_index.ensure_room_for_entry()
        self._log.append(records, head=head)
        if first_offset is not None:
            recent = self._recent_batches
            if len(recent) >= RECENT_BATCHES:  # forget them all at once: cheaper than one by one
                recent.clear()
            recent[first_offset] = (physical_position, size)
        if largest_timestamp > self._read_max_timestamp_and_offset_so_far().timestamp:
            self._max_timestamp_and_offset_so_far = TimestampOffset(largest_timestamp,
                                                                    offset_of_max_timestamp)
        if self._bytes_since_last_index_entry > self.index_interval_bytes:
            self.offset_index.append(largest_offset, physical_position)
            so_far = self._max_timestamp_and_offset_so_far
            self.time_index.maybe_append(so_far.timestamp, so_far.offset)
            self._bytes_since_last_index_entry = 0
        self._bytes_since_last_index_entry += size

    # --- reads --------------------------------------------------------------------------------

    def translate_offset(self, offset: int, starting_file_position: int = 0) -> tuple[int, int] | None:
        """(position, size) of the first batch whose last offset is >= offset, or None."""
        recent = self._recent_batches.get(offset)
        if recent is not None and recent[0] >= starting_file_position:
            return recent
        mapping = self.offset_index.lookup(offset)
        return self._log.search_for_offset_with_size(offset, max(mapping.position, starting_file_position))

    def read(self, start_offset: int, max_size: int, *, max_position: int | None = None,
             min_one_message: bool = False) -> FetchDataInfo | None:
        """The bytes to send for a fetch from `start_offset`, or None if it is past this segment.

        The region starts at the batch containing start_offset (or the next batch) and is at most
        `max_size` bytes, never past `max_position` (the high watermark's position, or the end);
        with `min_one_message` a first batch larger than max_size is returned whole. The region may
        end inside a batch: clients drop a partial last batch, as with Kafka.
        """
        if max_size < 0:
            raise ValueError(f"invalid max size {max_size} for log read from segment {self!r}")
        found = self.translate_offset(start_offset)
        if found is None:
            return None
        start_position, batch_size = found
        adjusted_max_size = max(max_size, batch_size) if min_one_message else max_size
        if max_position is None:
            max_position = self._log.size_in_bytes
        fetch_size = min(max_position - start_position, adjusted_max_size)
        if adjusted_max_size == 0 or fetch_size <= 0:
            return FetchDataInfo(start_offset, None)
        return FetchDataInfo(start_offset, self._log.region(start_position, fetch_size),
                             first_entry_incomplete=adjusted_max_size < batch_size)

    def find_offset_by_timestamp(self, timestamp: int,
                                 starting_offset: int | None = None) -> TimestampAndOffset | None:
        """The first record at or after `starting_offset` (default: the base offset) whose
        timestamp is >= `timestamp`, located through the time and offset indexes; None if none."""
        if starting_offset is None:
            starting_offset = self._base_offset
        entry = self.time_index.lookup(timestamp)
        position = self.offset_index.lookup(max(entry.offset, starting_offset)).position
        return self._log.search_for_timestamp(timestamp, position, starting_offset)

    def fetch_upper_bound_offset(self, start_position: int, fetch_size: int) -> int | None:
        """An offset at or after the end of a region read from `start_position`: that of the
        first offset index entry at or past its end (Kafka's fetchUpperBoundOffset); None when
        the index has none (the caller then takes the next segment's base or the log end)."""
        return self.offset_index.fetch_upper_bound_offset(start_position + fetch_size)

    def update_txn_index(self, *, producer_id: int, first_offset: int, last_offset: int,
                         is_aborted: bool, last_stable_offset: int) -> None:
        """A transaction ended with a marker at `last_offset` in this segment: an aborted one
        gets its AbortedTxn entry (a committed one needs none)."""
        if is_aborted:
            self.txn_index.append(AbortedTxn(producer_id, first_offset, last_offset, last_stable_offset))

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        return self.txn_index.collect_aborted_txns(fetch_offset, upper_bound_offset)

    def read_next_offset(self) -> int:
        """The offset after the last batch: scans from the last offset index entry."""
        position = self.offset_index.lookup(self.offset_index.last_offset).position
        next_offset = self._base_offset
        for _, header in self._log.batches(position):
            next_offset = header.next_offset
        return next_offset

    def first_batch_timestamp(self) -> int:
        """The first batch's maxTimestamp (NO_TIMESTAMP if it has none); int64 max if empty."""
        self._load_first_batch_timestamp()
        ts = self._rolling_based_timestamp
        return ts if ts is not None else (1 << 63) - 1

    # --- rolling ------------------------------------------------------------------------------

    def _load_first_batch_timestamp(self) -> None:
        if self._rolling_based_timestamp is None:
            for _, header in self._log.batches(0):
                self._rolling_based_timestamp = header.max_timestamp
                break

    def should_roll(self, incoming_size: int, incoming_max_timestamp: int, incoming_max_offset: int,
                    now_ms: int, segment_bytes: int, segment_ms: int) -> bool:
        """Kafka's five roll conditions (architecture.md §2): the batch would take the segment past
        segment_bytes; the segment is non-empty and the batch's max timestamp is more than
        segment_ms - jitter past the segment's first batch timestamp (wall-clock time since the
        segment was created when there is none); either index is full; or the batch's last offset
        does not fit the indexes."""
        size = self._log.size_in_bytes
        if size > segment_bytes - incoming_size or not 0 <= incoming_max_offset - self._base_offset <= INT32_MAX:
            return True  # full, or the batch's offsets would overflow the indexes
        if size > 0:
            first = self._rolling_based_timestamp
            if first is None:
                self._load_first_batch_timestamp()
                first = self._rolling_based_timestamp
            waited = incoming_max_timestamp - first if first is not None and first >= 0 else now_ms - self._created_ms
            if waited > segment_ms - self.rolling_jitter_ms:
                return True
        return self.offset_index.is_full or self.time_index.is_full

    def on_become_inactive(self) -> None:
        """On roll: the final time index entry; both indexes retired (no more entries) and the
        .log trimmed of a `preallocate` length. The files' unused blocks — the indexes' past their
        entries, the .log's allocated ahead — are given back by `flush(rolled=True)`, off the
        event loop: on a `discard` mount each truncate that frees blocks waits for the device."""
        self._recent_batches.clear()
        so_far = self._read_max_timestamp_and_offset_so_far()
        self.time_index.maybe_append(so_far.timestamp, so_far.offset, skip_full_check=True)
        self.offset_index.retire()
        self.time_index.retire()
        self._log.trim(blocks_ahead=False)

    def remap_trimmed_indexes(self) -> None:
        """After `flush(rolled=True)`: map the trimmed indexes at their new length. Cheap, no
        I/O; under the owning log's lock (readers use the mappings)."""
        for index in (self._offset_index, self._time_index):
            if index is not None:
                index.remap_to_file()

    def resize_indexes(self, size: int) -> None:
        """Give both indexes `size` bytes again (the active segment after a restart or recover)."""
        self.offset_index.resize(size)
        self.time_index.resize(size)

    # --- recovery and truncation ----------------------------------------------------------------

    def recover(self, max_message_size: int | None = None, *,
                on_batch: Callable[[int, BatchHeader], None] | None = None,
                from_offset: int | None = None) -> int:
        """Rebuild the indexes from the .log and cut it after its last valid batch.

        Each batch from the start must be complete, magic 2, at least a header long, CRC-32C
        correct, no larger than `max_message_size` (when given) and above the previous batch's
        offsets; the first that is not ends the segment (logged, then truncated). The indexes
        are rebuilt by the append rule, the time index gets its final entry and both are trimmed:
        for the active segment the caller then calls `resize_indexes`. `on_batch(position, header)`
        is called for each valid batch in order (producer state, leader epochs).

        With `from_offset` (a recovery point inside this segment: every byte and index entry
        below it was fsynced before it was recorded) only the tail is recovered: the index
        entries for offsets >= from_offset are dropped, the batches are validated from the
        last offset index entry kept (at most index.interval.bytes below the recovery point), and
        `on_batch` is called for the batches whose base offset is >= from_offset. When the kept
        entry does not name the last offset of the batch at its position (an index that cannot
        be trusted), the whole segment is recovered instead.

        Returns the number of bytes truncated. A batch whose offsets do not fit this segment's
        indexes raises LogSegmentOffsetOverflowError, as in Kafka (the log must split the segment).
        """
        self._recent_batches.clear()
        offset_index = self.offset_index
        time_index = self.time_index
        start = self.recovery_start(from_offset) if from_offset is not None else None
        if start is None:
            offset_index.reset()
            time_index.reset()
            self.txn_index.reset()
            start, max_so_far, from_offset = 0, TimestampOffset(NO_TIMESTAMP, -1), -1
        else:
            entry = time_index.last_entry
            max_so_far = entry if time_index.entries else TimestampOffset(NO_TIMESTAMP, -1)
        valid_bytes = last_index_entry = start
        self._max_timestamp_and_offset_so_far = max_so_far
        previous_last_offset: int | None = None
        try:
            for position, header, data in self._log.batches_with_data(start):
                _ensure_valid(header, data, position, max_message_size, previous_last_offset, self)
                last_offset = header.base_offset + header.last_offset_delta
                if not self.can_convert_to_relative_offset(last_offset):
                    raise LogSegmentOffsetOverflowError(
                        f"detected offset overflow at offset {last_offset} in segment {self!r}")
                if header.max_timestamp > max_so_far.timestamp:
                    max_so_far = TimestampOffset(header.max_timestamp, last_offset)
                    self._max_timestamp_and_offset_so_far = max_so_far
                if valid_bytes - last_index_entry > self.index_interval_bytes:
                    offset_index.append(last_offset, valid_bytes)
                    time_index.maybe_append(max_so_far.timestamp, max_so_far.offset)
                    last_index_entry = valid_bytes
                valid_bytes += header.batch_length + LOG_OVERHEAD
                previous_last_offset = last_offset
                if on_batch is not None and header.base_offset >= from_offset:
                    on_batch(position, header)
        except CorruptRecordError as e:
            log.warning("Found invalid messages in log segment %s at byte offset %d: %s",
                        self._log.path, valid_bytes, e)
        truncated = self._log.size_in_bytes - valid_bytes
        if truncated > 0:
            log.debug("Truncated %d invalid bytes at the end of segment %s during recovery",
                      truncated, self._log.path)
        self._log.truncate_to(valid_bytes)
        offset_index.trim_to_valid_size()
        time_index.maybe_append(max_so_far.timestamp, max_so_far.offset, skip_full_check=True)
        time_index.trim_to_valid_size()
        self._bytes_since_last_index_entry = valid_bytes - last_index_entry
        self._rolling_based_timestamp = None
        return truncated

    def recovery_start(self, from_offset: int) -> int | None:
        """Drop the index entries at and above `from_offset` and return the position of the
        last offset index entry kept (0 when none), where a tail recovery starts; None when
        that entry does not match the batch at its position (then recover the whole segment).
        Calling it again changes nothing more."""
        if from_offset <= self._base_offset:
            return None
        for index in (self.offset_index, self.time_index):
            index.truncate_to(from_offset)
            index.resize(index.max_index_size)  # room to append (a rolled segment's was trimmed)
        self.txn_index.truncate_to(from_offset)
        if not self.offset_index.entries:
            return 0
        entry = self.offset_index.last_entry
        header = next(iter(self._log.batches(entry.position)), (None, None))[1]
        if header is None or header.base_offset + header.last_offset_delta != entry.offset:
            log.warning("Offset index entry %s of %s does not match the batch at its position; "
                        "recovering the whole segment", entry, self._log.path)
            return None
        return entry.position

    def truncate_to(self, offset: int) -> int:
        """Remove every batch holding an offset >= `offset` (a batch that straddles it goes too)
        and the index entries for them; return the bytes removed. Beyond the end: no change.

        The indexes get their full size back, as the segment becomes the active one.
        """
        mapping = self.translate_offset(offset)
        self._recent_batches.clear()
        offset_index = self.offset_index
        time_index = self.time_index
        offset_index.truncate_to(offset)
        time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        offset_index.resize(offset_index.max_index_size)
        time_index.resize(time_index.max_index_size)
        truncated = 0 if mapping is None else self._log.truncate_to(mapping[0])
        if self._log.size_in_bytes == 0:
            self._created_ms = self._clock.time_ms()
            self._rolling_based_timestamp = None
        self._bytes_since_last_index_entry = 0
        if self.max_timestamp_so_far >= 0:
            self._load_largest_timestamp()
        return truncated

    def _load_largest_timestamp(self) -> None:
        last = self.time_index.last_entry
        self._max_timestamp_and_offset_so_far = last
        position = self.offset_index.lookup(last.offset).position
        after = self._log.largest_timestamp_after(position)
        if after.timestamp > last.timestamp:
            self._max_timestamp_and_offset_so_far = after

    def sanity_check(self, *, time_index_file_newly_created: bool = False) -> None:
        """Kafka's checks when loading a segment without recovering it.

        The offset index file must exist (FileNotFoundError); a time index that had to be created
        is emptied; each index passes its own check and the offset index's last position lies
        inside the .log (CorruptIndexError). On either error the log recovers the segment.
        """
        if not self._offset_index_path.exists():
            raise FileNotFoundError(f"Offset index file {self._offset_index_path} does not exist")
        if time_index_file_newly_created:
            self.time_index.resize(0)
        self.offset_index.sanity_check()
        self.time_index.sanity_check()
        self.txn_index.sanity_check()
        if self.offset_index.entries and self.offset_index.last_entry.position >= self.size:
            raise CorruptIndexError(
                f"Corrupt index found, index file ({self._offset_index_path}) has an entry at position "
                f"{self.offset_index.last_entry.position} past the end of {self._log.path} ({self.size} bytes)")

    # --- file lifecycle ----------------------------------------------------------------------

    def flush(self, *, rolled: bool = False) -> None:
        """fsync the .log and msync both indexes; for a `rolled` segment, first give back the
        .log's blocks allocated ahead and trim the retired indexes to their entries (then call
        `remap_trimmed_indexes` under the log's lock). Blocks on disk: run off the event loop,
        without the log's lock."""
        self._log.flush()
        if rolled:
            self._log.release_blocks_ahead()
            for index in (self._offset_index, self._time_index):
                if index is not None:
                    index.trim_retired()
        if self._offset_index is not None:
            self._offset_index.flush()
        if self._time_index is not None:
            self._time_index.flush()
        self.txn_index.flush()

    def close(self) -> None:
        """The final time index entry, then trim and close all three files (Kafka's close)."""
        try:
            if self._max_timestamp_and_offset_so_far != _UNKNOWN:
                so_far = self._max_timestamp_and_offset_so_far
                self.time_index.maybe_append(so_far.timestamp, so_far.offset, skip_full_check=True)
        except Exception as e:  # Kafka swallows this one: the index is rebuilt if it matters
            log.warning("Failed to append the final time index entry of %r: %s", self, e)
        finally:
            for index in (self._offset_index, self._time_index):
                if index is not None:
                    index.close()
            self.txn_index.close()
            self._log.close()

    def close_handlers(self) -> None:
        """Close the files without flushing or trimming."""
        for index in (self._offset_index, self._time_index):
            if index is not None:
                index.close_handler()
        self.txn_index.close()
        self._log.close_handlers()

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename all three files, e.g. ("", ".deleted"), (".cleaned", ".swap"), (".swap", "")."""
        self._log.rename_to(_replace_suffix(self._log.path, old_suffix, new_suffix))
        for attr in ("_offset_index", "_time_index"):
            index = getattr(self, attr)
            path_attr = attr + "_path"
            new_path = _replace_suffix(getattr(self, path_attr), old_suffix, new_suffix)
            if index is not None:
                index.rename_to(new_path)
            elif getattr(self, path_attr).exists():
                os.replace(getattr(self, path_attr), new_path)
            setattr(self, path_attr, new_path)
        self.txn_index.rename_to(_replace_suffix(self.txn_index.path, old_suffix, new_suffix))

    def delete(self) -> None:
        """Close and delete the segment's files (those that exist)."""
        self.close_handlers()
        self._log.delete()
        for path in (self._offset_index_path, self._time_index_path):
            path.unlink(missing_ok=True)
        self.txn_index.delete()

    def __repr__(self) -> str:
        return (f"LogSegment(base_offset={self._base_offset}, size={self.size}, "
                f"path={str(self._log.path)!r}, "
                f"largest_record_timestamp={self._max_timestamp_and_offset_so_far.timestamp})")


def _ensure_valid(header: BatchHeader, data: memoryview, position: int,
                  max_message_size: int | None, previous_last_offset: int | None,
                  segment: LogSegment) -> None:
    """Recovery's checks on one batch; CorruptRecordError says what failed and where."""
    where = f"at position {position} of {segment.log.path}"
    if header.magic != MAGIC:
        raise CorruptRecordError(f"record batch {where} has magic {header.magic}, expected {MAGIC}")
    size = header.batch_length + LOG_OVERHEAD
    if max_message_size is not None and size > max_message_size:
        raise CorruptRecordError(f"record batch {where} is {size} bytes, larger than the "
                                 f"largest allowable message size ({max_message_size})")
    if header.last_offset_delta < 0:
        raise CorruptRecordError(f"record batch {where} has a negative last offset delta "
                                 f"{header.last_offset_delta}")
    if previous_last_offset is not None and header.base_offset <= previous_last_offset:
        raise CorruptRecordError(f"record batch {where} starts at offset {header.base_offset}, not "
                                 f"after the previous batch's last offset {previous_last_offset}")
    computed = compute_crc(data, 0, size)
    if computed != header.crc:
        raise CorruptRecordError(f"record batch {where} is corrupt (stored crc = {header.crc}, "
                                 f"computed crc = {computed})")
