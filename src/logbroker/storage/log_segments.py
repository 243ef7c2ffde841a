"""The segments of one log, found by offset (Kafka's LogSegments).

`LogSegments` is only the sorted list: which segment holds an offset, which come after it, how
big they are together. It opens, closes and deletes nothing; `LocalLog` (local_log.py) does that
and keeps this list in step with the files.

Invariants: base offsets strictly increase; `base_offset_at(i) == self[i].base_offset` for every
i; the last segment is the active one (the only one appended to). The list is empty only while a
log is being emptied (`LocalLog.truncate_fully_and_start_at`).

Threads: not thread-safe; the owning `Log` calls everything under its lock. Nothing blocks.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator

from logbroker.storage.log_segment import LogSegment


class LogSegments:
    """The segments in base offset order, with a parallel list of base offsets to bisect."""

    def __init__(self, segments: Iterable[LogSegment] = ()) -> None:
        self._segments = list(segments)
        self._bases = [s.base_offset for s in self._segments]

    def __len__(self) -> int:
        return len(self._segments)

    def __iter__(self) -> Iterator[LogSegment]:
        return iter(self._segments)

    def __getitem__(self, i: int) -> LogSegment:
        return self._segments[i]

    def snapshot(self) -> tuple[LogSegment, ...]:
        """The segments as they are now (later changes do not show in it)."""
        return tuple(self._segments)

    @property
    def active(self) -> LogSegment:
        return self._segments[-1]

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    def base_offset_at(self, i: int) -> int:
        return self._bases[i]

    def floor_index(self, offset: int) -> int:
        """Index of the last segment whose base offset is <= `offset`, or -1."""
        return bisect.bisect_right(self._bases, offset) - 1

    def from_offset(self, offset: int) -> list[LogSegment]:
        """The segments from the one holding `offset` (or the first) on."""
        return self._segments[max(0, self.floor_index(offset)):]

    def from_index(self, i: int) -> list[LogSegment]:
        return self._segments[i:]

    def contains(self, segment: LogSegment) -> bool:
        """Whether this very segment object (not just its base offset) is in the list."""
        i = bisect.bisect_left(self._bases, segment.base_offset)
        return i < len(self._segments) and self._segments[i] is segment

    def add(self, segment: LogSegment) -> None:
        i = bisect.bisect_left(self._bases, segment.base_offset)
        self._segments.insert(i, segment)
        self._bases.insert(i, segment.base_offset)

    def remove(self, segment: LogSegment) -> None:
        """Take this segment out if it is in the list; nothing otherwise."""
        i = bisect.bisect_left(self._bases, segment.base_offset)
        if i < len(self._segments) and self._segments[i] is segment:
            del self._segments[i]
            del self._bases[i]

    def replace_range(self, first: LogSegment, last: LogSegment, new: LogSegment) -> None:
        """Put `new` in place of the run of segments from `first` to `last` (both in the list)."""
        i = bisect.bisect_left(self._bases, first.base_offset)
        j = bisect.bisect_left(self._bases, last.base_offset) + 1
        self._segments[i:j] = [new]
        self._bases[i:j] = [new.base_offset]
