"""The transaction index of a segment: `<20-digit base offset>.txnindex` (Kafka's TransactionIndex).

One `AbortedTxn` per aborted transaction, appended when its ABORT marker is written to the
segment that holds the marker (by the leader, a follower, or recovery re-reading the log), so a
read_committed fetch can tell the consumer which producers' records in the range to drop.
"""

from __future__ import annotations

import bisect
import itertools
import os
import struct
from pathlib import Path
from typing import NamedTuple

from logbroker.storage.abstract_index import CorruptIndexError

ABORTED_TXN_VERSION = 0
_ENTRY = struct.Struct(">hqqqq")  # 34 bytes
_FIELDS = struct.Struct(">2xqqqq")  # the same entry, its version skipped
ABORTED_TXN_SIZE = _ENTRY.size
_SCAN_ENTRIES = 120  # entries read per pread when scanning (~4 KiB)


class AbortedTxn(NamedTuple):
    """One aborted transaction: its producer, its first and last offsets on this partition (the
    last is the ABORT marker's offset) and the last stable offset when the marker was written
    (the first offset of the oldest other transaction still open then, else last_offset + 1).
    A tuple: a read_committed fetch decodes hundreds of them from the file, and a tuple is
    built several times faster than an object with attributes."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(ABORTED_TXN_VERSION, self.producer_id, self.first_offset,
                           self.last_offset, self.last_stable_offset)


def decode_aborted_txns(buf) -> list[AbortedTxn]:
    """The whole entries in `buf` (a partial trailing entry is ignored, as Kafka's reader does).
    CorruptIndexError for an entry of an unknown version (above ABORTED_TXN_VERSION)."""
    view = memoryview(buf)[:len(buf) - len(buf) % ABORTED_TXN_SIZE]
    if view[0::ABORTED_TXN_SIZE].tobytes().strip(b"\x00") or view[1::ABORTED_TXN_SIZE].tobytes().strip(b"\x00"):
        for version, *_ in _ENTRY.iter_unpack(view):  # some version is not 0: which?
            if version > ABORTED_TXN_VERSION:
                raise _unknown_version(version)
    return list(map(AbortedTxn._make, _FIELDS.iter_unpack(view)))


def _unknown_version(version: int) -> CorruptIndexError:
    return CorruptIndexError(f"Unexpected aborted transaction version {version}, current version "
                             f"is {ABORTED_TXN_VERSION}")


class TransactionIndex:
    """The aborted transactions whose ABORT marker lies in one segment, in marker order.

    Format (Kafka's, byte-compatible): a plain sequence of 34-byte entries, big-endian, no header:

        version             int16   0
        producerId          int64
        firstOffset         int64   absolute offsets, not relative to the base offset
        lastOffset          int64   the ABORT marker's offset
        lastStableOffset    int64

    Invariants: lastOffset strictly increases along the file and every lastOffset is >= the
    segment's base offset. Unlike the offset and time indexes the file is not preallocated and
    is created only when the first entry is appended (most segments never get one).

    After a crash the file may end in a partial entry (ignored by readers, cut by the next
    truncation) or lack entries whose markers reached the .log; recovery rebuilds the index of
    every segment it recovers from the control batches (`reset`, then the log replays them).

    The entries stay on disk, as Kafka's: a read_committed fetch reads the ones it needs from
    the file (a binary search on lastOffset, then the entries from there until the stopping
    rule holds), so memory does not grow with the number of aborted transactions. In memory:
    the number of whole entries and the last one's lastOffset (for the order check of
    `append`), both learnt from the file on first use. Synchronous, blocks on disk (preads of
    the page cache), not thread-safe: the owning log serialises calls.
    """

    def __init__(self, base_offset: int, path: str | os.PathLike) -> None:
        self.base_offset = base_offset
        self._path = Path(path)
        self._fd: int | None = None
        self._count: int | None = None  # whole entries in the file, None until first use
        self._last_offset = -1  # the last entry's lastOffset (valid once _count is known)

    @property
    def path(self) -> Path:
        return self._path

    # --- reading ----------------------------------------------------------------------------

    def _reader(self) -> int | None:
        """The open descriptor, opening an existing file; None when there is no file."""
        if self._fd is None:
            try:
                self._fd = os.open(self._path, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)
            except FileNotFoundError:
                return None
            except PermissionError:  # a read-only data dir (tools): reading is all they do
                self._fd = os.open(self._path, os.O_RDONLY | os.O_CLOEXEC)
        return self._fd

    def _entry_count(self) -> int:
        if self._count is None:
            fd = self._reader()
            count = 0 if fd is None else os.fstat(fd).st_size // ABORTED_TXN_SIZE
            self._last_offset = self._raw(count - 1, 1)[0][3] if count else -1
            self._count = count
        return self._count

    def _read(self, first: int, count: int) -> list[AbortedTxn]:
        """Entries [first, first + count) of the file (fewer at its end)."""
        fd = self._reader()
        if fd is None or count <= 0:
            return []
        return decode_aborted_txns(os.pread(fd, count * ABORTED_TXN_SIZE, first * ABORTED_TXN_SIZE))

    def _raw(self, first: int, count: int) -> list[tuple[int, int, int, int, int]]:
        """Entries [first, first + count) as (version, producerId, firstOffset, lastOffset,
        lastStableOffset) tuples, unchecked: what the search reads."""
        fd = self._reader()
        if fd is None or count <= 0:
            return []
        data = os.pread(fd, count * ABORTED_TXN_SIZE, first * ABORTED_TXN_SIZE)
        return list(_ENTRY.iter_unpack(memoryview(data)[:len(data) - len(data) % ABORTED_TXN_SIZE]))

    def _search(self, offset: int) -> tuple[int, list[tuple[int, int, int, int, int]]]:
        """The first entry whose lastOffset >= `offset` (the entry count when none), and the raw
        entries read from there on: a binary search by single-entry preads down to
        _SCAN_ENTRIES entries, then one read of those."""
        lo, hi = 0, self._entry_count()
        while hi - lo > _SCAN_ENTRIES:
            mid = (lo + hi) // 2
            if self._raw(mid, 1)[0][3] < offset:
                lo = mid + 1
            else:
                hi = mid
        window = self._raw(lo, hi - lo)
        i = bisect.bisect_left([entry[3] for entry in window], offset)
        return lo + i, window[i:]

    def _raw_from(self, slot: int):
        """The raw entries from `slot` to the end, read _SCAN_ENTRIES at a time."""
        count = self._entry_count()
        while slot < count:
            chunk = self._raw(slot, min(_SCAN_ENTRIES, count - slot))
            if not chunk:
                return
            yield from chunk
            slot += len(chunk)

    def all_aborted_txns(self) -> list[AbortedTxn]:
        return self._read(0, self._entry_count())

    @property
    def is_empty(self) -> bool:
        return self._entry_count() == 0

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        """The entries overlapping [fetch_offset, upper_bound_offset) (lastOffset >= fetch_offset
        and firstOffset < upper_bound_offset), and whether the search is complete: an entry here
        has lastStableOffset >= upper_bound_offset, so every transaction aborted later (in later
        segments) started at or after the upper bound — Kafka's stopping rule. The entries before
        the first with lastOffset >= fetch_offset are not read: their lastStableOffset is at most
        lastOffset + 1 <= fetch_offset, below any upper bound of a non-empty read.
        CorruptIndexError for an entry of an unknown version met on the way."""
        found: list[AbortedTxn] = []
        if self._entry_count() == 0:
            return found, False
        slot, window = self._search(fetch_offset)
        for version, producer_id, first, last, lso in itertools.chain(
                window, self._raw_from(slot + len(window))):
            if version > ABORTED_TXN_VERSION:
                raise _unknown_version(version)
            if first < upper_bound_offset:
                found.append(AbortedTxn(producer_id, first, last, lso))
            if lso >= upper_bound_offset:
                return found, True
        return found, False

    def sanity_check(self) -> None:
        """CorruptIndexError when an entry's last offset is below the base offset (Kafka's check;
        lastOffset increases along the file, so the first entry decides)."""
        first = self._read(0, 1) if self._entry_count() else []
        if first and first[0].last_offset < self.base_offset:
            raise CorruptIndexError(
                f"Last offset of aborted transaction {first[0]} in index {self._path} is less "
                f"than start offset {self.base_offset}")

    # --- writing ----------------------------------------------------------------------------

    def _channel(self) -> int:
        if self._reader() is None:
            self._fd = os.open(self._path, os.O_CREAT | os.O_RDWR | os.O_APPEND | os.O_CLOEXEC, 0o644)
        return self._fd

    def append(self, txn: AbortedTxn) -> None:
        """Append one entry (creating the file). ValueError unless its last offset is above the
        last entry's (Kafka's IllegalArgumentException)."""
        count = self._entry_count()
        if count and self._last_offset >= txn.last_offset:
            raise ValueError(
                f"The last offset of appended transactions must increase sequentially, but "
                f"{txn.last_offset} is not greater than current last offset "
                f"{self._last_offset} of index {self._path}")
        fd = self._channel()
        # A torn entry left by a crash would shift every later one: cut it first.
        size = os.fstat(fd).st_size
        if size % ABORTED_TXN_SIZE:
            os.ftruncate(fd, size - size % ABORTED_TXN_SIZE)
        os.write(fd, txn.encode())
        self._count = count + 1
        self._last_offset = txn.last_offset

    def truncate_to(self, offset: int) -> None:
        """Remove the entries whose last offset is >= `offset` (their markers were truncated)."""
        keep = self._search(offset)[0]
        if keep < self._entry_count():
            os.truncate(self._path, keep * ABORTED_TXN_SIZE)
            self._count = None  # re-read the new last entry on next use

    def reset(self) -> None:
        """Remove every entry (recovery rebuilds them); the file, if any, becomes empty."""
        if self._path.exists():
            os.truncate(self._path, 0)
        self._count, self._last_offset = 0, -1

    def flush(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def rename_to(self, path: str | os.PathLike) -> None:
        """Rename the file if it exists; the index follows the new name either way."""
        path = Path(path)
        try:
            if self._path.exists():
                os.replace(self._path, path)
        finally:
            self._path = path

    def delete(self) -> bool:
        """Close and delete the file; False if there was none."""
        self.close()
        try:
            self._path.unlink()
            return True
        except FileNotFoundError:
            return False

    def __repr__(self) -> str:
        return f"TransactionIndex(base_offset={self.base_offset}, path={str(self._path)!r})"
