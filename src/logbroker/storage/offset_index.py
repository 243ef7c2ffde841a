"""The offset index of a segment: `<20-digit base offset>.index`."""

from __future__ import annotations

import os
import struct

from logbroker.storage.abstract_index import (
    DEFAULT_MAX_INDEX_SIZE,
    AbstractIndex,
    CorruptIndexError,
    IndexFullError,
    InvalidOffsetError,
    INT32_MAX,
)
from logbroker.storage.values import OffsetPosition

_ENTRY = struct.Struct(">ii")
_INT32 = struct.Struct(">i")


class OffsetIndex(AbstractIndex):
    """A sparse map from offsets to positions in the segment's .log file.

    Format: 8-byte entries, big-endian: relative offset int32 (offset - base_offset), then the
    file position int32 of the batch that holds the offset. An entry maps the **last** offset of
    an append to the position where that append starts (architecture.md §2); segment code decides when
    to add one, this class only stores them. Offsets in this index strictly increase, and so do
    positions. Preallocated to `max_index_size`, trimmed on roll and close; see AbstractIndex for
    the mapping, the hot-tail search and what happens after a crash (recovery rebuilds the file).

    `lookup(offset)` gives the largest entry whose offset is <= the target, from which a scan of
    the log finds the batch. Blocking on disk, synchronous, not thread-safe (the log serialises).
    """

    ENTRY_SIZE = 8

    def __init__(self, path: str | os.PathLike, base_offset: int, *,
                 max_index_size: int = DEFAULT_MAX_INDEX_SIZE, writable: bool = True) -> None:
        super().__init__(path, base_offset, max_index_size=max_index_size, writable=writable)
        self._last_offset = self._read_last_entry().offset

    # --- entries ------------------------------------------------------------------------------

    def _parse(self, n: int) -> OffsetPosition:
        relative, position = _ENTRY.unpack_from(self._mmap, n * 8)
        return OffsetPosition(self.base_offset + relative, position)

    def _read_last_entry(self) -> OffsetPosition:
        if self._entries == 0:
            return OffsetPosition(self.base_offset, 0)
        return self._parse(self._entries - 1)

    @property
    def last_offset(self) -> int:
        """The offset of the last entry, or the base offset when empty."""
        return self._last_offset

    @property
    def last_entry(self) -> OffsetPosition:
        return self._read_last_entry()

    def entry(self, n: int) -> OffsetPosition:
        """The n-th entry (0-based)."""
        if not 0 <= n < self._entries:
            raise IndexError(f"attempt to fetch the {n}th entry from index {self._path}, "
                             f"which has size {self._entries}")
        return self._parse(n)

    def all_entries(self) -> list[OffsetPosition]:
        """Every entry, in order (read-only listing for dump-log and tests)."""
        if self._entries == 0:
            return []
        base = self.base_offset
        return [OffsetPosition(base + rel, pos)
                for rel, pos in _ENTRY.iter_unpack(self._mmap[:self._entries * 8])]

    # --- append and lookup --------------------------------------------------------------------

    def append(self, offset: int, position: int) -> None:
        """Add an entry. The offset must be larger than the last one (InvalidOffsetError)."""
        if self.is_full:
            raise IndexFullError(f"attempt to append to a full index {self._path} "
                                 f"(size = {self._entries})")
        if self._entries and offset <= self._last_offset:
            raise InvalidOffsetError(
                f"attempt to append an offset ({offset}) to position {self._entries} no larger than "
                f"the last offset appended ({self._last_offset}) to {self._path}")
        if not 0 <= position <= INT32_MAX:
            raise ValueError(f"position {position} does not fit an index entry of {self._path}")
        self.ensure_room_for_entry()
        _ENTRY.pack_into(self._mmap, self._entries * 8, self.relative_offset(offset), position)
        self._entries += 1
        self._last_offset = offset

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The largest entry with offset <= target_offset, or (base_offset, 0) if there is none."""
        slot = self._largest_lower_bound_slot(target_offset - self.base_offset, _INT32, 0)
        if slot == -1:
            return OffsetPosition(self.base_offset, 0)
        return self._parse(slot)

    def fetch_upper_bound_offset(self, position: int) -> int | None:
        """The offset of the first entry whose position is >= `position`, or None."""
        slot = self._largest_lower_bound_slot(position, _INT32, 4)
        if slot >= 0 and self._parse(slot).position == position:
            return self._parse(slot).offset
        if slot + 1 < self._entries:
            return self._parse(slot + 1).offset
        return None

    # --- truncation and checks ------------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Remove every entry with offset >= `offset`. A larger offset than the last changes nothing."""
        slot = self._largest_lower_bound_slot(offset - self.base_offset, _INT32, 0)
        if slot < 0:
            new_entries = 0
        elif _INT32.unpack_from(self._mmap, slot * 8)[0] == offset - self.base_offset:
            new_entries = slot
        else:
            new_entries = slot + 1
        self._truncate_to_entries(new_entries)
        self._last_offset = self._read_last_entry().offset

    def _after_truncate(self) -> None:
        self._last_offset = self._read_last_entry().offset

    def _after_resize(self) -> None:
        self._last_offset = self._read_last_entry().offset

    def sanity_check(self) -> None:
        """Kafka's checks on open: a whole number of entries, and a last offset not below the base.

        Raises CorruptIndexError naming the file. Cheap: it reads the last entry only.
        """
        if self._entries and self._last_offset < self.base_offset:
            raise CorruptIndexError(
                f"Corrupt index found, index file ({self._path}) has non-zero size but the last "
                f"offset is {self._last_offset} which is less than the base offset {self.base_offset}.")
        if self._length % self.ENTRY_SIZE:
            raise CorruptIndexError(
                f"Index file {self._path} is corrupt, found {self._length} bytes which is neither "
                f"positive nor a multiple of {self.ENTRY_SIZE}.")
