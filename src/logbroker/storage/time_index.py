"""The time index of a segment: `<20-digit base offset>.timeindex`."""

from __future__ import annotations

import os
import struct

from logbroker.records.batch import NO_TIMESTAMP
from logbroker.storage.abstract_index import (
    DEFAULT_MAX_INDEX_SIZE,
    AbstractIndex,
    CorruptIndexError,
    IndexFullError,
    InvalidOffsetError,
)
from logbroker.storage.values import TimestampOffset

_ENTRY = struct.Struct(">qi")
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")


class TimeIndex(AbstractIndex):
    """A sparse map from timestamps to offsets in the segment.

    Format: 12-byte entries, big-endian: timestamp int64, then relative offset int32
    (offset - base_offset). An entry (T, O) says that the largest timestamp seen up to offset O is
    T: any record with a timestamp above T comes after O. O is the last offset of the batch that
    carries T (architecture.md §2). Timestamps in this index strictly increase and offsets never
    decrease: an entry is added only when its timestamp is above the last one.

    The segment adds an entry together with each offset index entry, plus one final entry on roll
    and close (`skip_full_check=True`), for which the last slot is kept free: the index counts as
    full one entry early. Preallocated to `max_index_size` rounded down to a multiple of 12,
    trimmed on roll and close; see AbstractIndex for the mapping and the crash story.

    Blocking on disk, synchronous, not thread-safe (the log serialises).
    """

    ENTRY_SIZE = 12
    _ZERO_ENTRY_CAN_BE_REAL = True

    def __init__(self, path: str | os.PathLike, base_offset: int, *,
                 max_index_size: int = DEFAULT_MAX_INDEX_SIZE, writable: bool = True) -> None:
        super().__init__(path, base_offset, max_index_size=max_index_size, writable=writable)
        self._last_entry = self._read_last_entry()

    # --- entries ------------------------------------------------------------------------------

    def _parse(self, n: int) -> TimestampOffset:
        timestamp, relative = _ENTRY.unpack_from(self._mmap, n * 12)
        return TimestampOffset(timestamp, self.base_offset + relative)

    def _read_last_entry(self) -> TimestampOffset:
        if self._entries == 0:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return self._parse(self._entries - 1)

    @property
    def last_entry(self) -> TimestampOffset:
        """The last entry, or (NO_TIMESTAMP, base_offset) when empty."""
        return self._last_entry

    @property
    def is_full(self) -> bool:
        # The last slot is kept for the final entry written on roll or close.
        return self._entries >= self._max_entries - 1

    def entry(self, n: int) -> TimestampOffset:
        if not 0 <= n < self._entries:
            raise IndexError(f"attempt to fetch the {n}th entry from time index {self._path}, "
                             f"which has size {self._entries}")
        return self._parse(n)

    def all_entries(self) -> list[TimestampOffset]:
        """Every entry, in order (read-only listing for dump-log and tests)."""
        if self._entries == 0:
            return []
        base = self.base_offset
        return [TimestampOffset(ts, base + rel)
                for ts, rel in _ENTRY.iter_unpack(self._mmap[:self._entries * 12])]

    # --- append and lookup --------------------------------------------------------------------

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Add (timestamp, offset) if timestamp is above the last entry's; otherwise do nothing.

        An offset below the last entry's is InvalidOffsetError; a timestamp below it is a bug in
        the caller (ValueError). Appending the last entry again, as roll and close do, is a no-op.
        """
        if not skip_full_check and self.is_full:
            raise IndexFullError(f"attempt to append to a full time index {self._path} "
                                 f"(size = {self._entries})")
        last = self._last_entry
        if self._entries:
            if offset < last.offset:
                raise InvalidOffsetError(
                    f"attempt to append an offset ({offset}) to slot {self._entries} no larger than "
                    f"the last offset appended ({last.offset}) to {self._path}")
            if timestamp < last.timestamp:
                raise ValueError(
                    f"attempt to append a timestamp ({timestamp}) to slot {self._entries} no larger "
                    f"than the last timestamp appended ({last.timestamp}) to {self._path}")
        if timestamp > last.timestamp:
            if self._entries >= self._max_entries:
                raise IndexFullError(f"no slot left in time index {self._path} "
                                     f"(size = {self._entries})")
            self.ensure_room_for_entry()
            _ENTRY.pack_into(self._mmap, self._entries * 12, timestamp, self.relative_offset(offset))
            self._entries += 1
            self._last_entry = TimestampOffset(timestamp, offset)

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The entry with the largest timestamp <= target, or (NO_TIMESTAMP, base_offset)."""
        slot = self._largest_lower_bound_slot(target_timestamp, _INT64, 0)
        if slot == -1:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return self._parse(slot)

    # --- truncation and checks ----------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Remove every entry with offset >= `offset`."""
        slot = self._largest_lower_bound_slot(offset - self.base_offset, _INT32, 8)
        if slot < 0:
            new_entries = 0
        elif _INT32.unpack_from(self._mmap, slot * 12 + 8)[0] == offset - self.base_offset:
            new_entries = slot
        else:
            new_entries = slot + 1
        self._truncate_to_entries(new_entries)
        self._last_entry = self._read_last_entry()

    def _after_truncate(self) -> None:
        self._last_entry = self._read_last_entry()

    def _after_resize(self) -> None:
        self._last_entry = self._read_last_entry()

    def sanity_check(self) -> None:
        """Kafka's checks: a whole number of entries; the last entry not before the first.

        Raises CorruptIndexError naming the file. Cheap: reads the first and last entries.
        """
        last = self._last_entry
        if self._entries:
            first_timestamp = _INT64.unpack_from(self._mmap, 0)[0]
            if last.timestamp < first_timestamp:
                raise CorruptIndexError(
                    f"Corrupt time index found, time index file ({self._path}) has non-zero size but "
                    f"the last timestamp is {last.timestamp} which is less than the first timestamp "
                    f"{first_timestamp}")
            if last.offset < self.base_offset:
                raise CorruptIndexError(
                    f"Corrupt time index found, time index file ({self._path}) has non-zero size but "
                    f"the last offset is {last.offset} which is less than the first offset "
                    f"{self.base_offset}")
        if self._length % self.ENTRY_SIZE:
            raise CorruptIndexError(
                f"Time index file {self._path} is corrupt, found {self._length} bytes which is "
                f"neither positive nor a multiple of {self.ENTRY_SIZE}")
