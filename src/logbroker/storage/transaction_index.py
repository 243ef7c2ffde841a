"""The transaction index of a segment: `<20-digit base offset>.txnindex` (Kafka's TransactionIndex).

One `AbortedTxn` per aborted transaction, appended when its ABORT marker is written to the
segment that holds the marker (by the leader, a follower, or recovery re-reading the log), so a
read_committed fetch can tell the consumer which producers' records in the range to drop.
"""

from __future__ import annotations

import bisect
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from logbroker.storage.abstract_index import CorruptIndexError

ABORTED_TXN_VERSION = 0
_ENTRY = struct.Struct(">hqqqq")  # 34 bytes
ABORTED_TXN_SIZE = _ENTRY.size


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """One aborted transaction: its producer, its first and last offsets on this partition (the
    last is the ABORT marker's offset) and the last stable offset when the marker was written
    (the first offset of the oldest other transaction still open then, else last_offset + 1)."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(ABORTED_TXN_VERSION, self.producer_id, self.first_offset,
                           self.last_offset, self.last_stable_offset)


def decode_aborted_txns(buf) -> list[AbortedTxn]:
    """The whole entries in `buf` (a partial trailing entry is ignored, as Kafka's reader does).
    CorruptIndexError for an entry of an unknown version."""
    entries = []
    whole = len(buf) - len(buf) % ABORTED_TXN_SIZE
    for version, producer_id, first, last, lso in _ENTRY.iter_unpack(memoryview(buf)[:whole]):
        if version > ABORTED_TXN_VERSION:
            raise CorruptIndexError(f"Unexpected aborted transaction version {version}, current "
                                    f"version is {ABORTED_TXN_VERSION}")
        entries.append(AbortedTxn(producer_id, first, last, lso))
    return entries


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

    The entries are kept in memory once read (34 bytes each on disk, one small object each here)
    so a read_committed fetch does not read the file. Synchronous, blocks on disk, not
    thread-safe: the owning log serialises calls.
    """

    def __init__(self, base_offset: int, path: str | os.PathLike) -> None:
        self.base_offset = base_offset
        self._path = Path(path)
        self._fd: int | None = None
        self._entries: list[AbortedTxn] | None = None  # loaded on first use
        self._last_offsets: list[int] = []
        self._max_lso = -1

    @property
    def path(self) -> Path:
        return self._path

    # --- reading ----------------------------------------------------------------------------

    def _load(self) -> list[AbortedTxn]:
        if self._entries is None:
            try:
                data = self._path.read_bytes()
            except FileNotFoundError:
                data = b""
            self._set_entries(decode_aborted_txns(data))
        return self._entries

    def _set_entries(self, entries: list[AbortedTxn]) -> None:
        self._entries = entries
        self._last_offsets = [e.last_offset for e in entries]
        self._max_lso = max((e.last_stable_offset for e in entries), default=-1)

    def all_aborted_txns(self) -> list[AbortedTxn]:
        return list(self._load())

    @property
    def is_empty(self) -> bool:
        return not self._load()

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        """The entries overlapping [fetch_offset, upper_bound_offset) (lastOffset >= fetch_offset
        and firstOffset < upper_bound_offset), and whether the search is complete: an entry here
        has lastStableOffset >= upper_bound_offset, so every transaction aborted later (in later
        segments) started at or after the upper bound — Kafka's stopping rule."""
        entries = self._load()
        found = []
        for i in range(bisect.bisect_left(self._last_offsets, fetch_offset), len(entries)):
            txn = entries[i]
            if txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return found, True
        return found, self._max_lso >= upper_bound_offset

    def sanity_check(self) -> None:
        """CorruptIndexError when an entry's last offset is below the base offset (Kafka's check)."""
        for txn in self._load():
            if txn.last_offset < self.base_offset:
                raise CorruptIndexError(
                    f"Last offset of aborted transaction {txn} in index {self._path} is less "
                    f"than start offset {self.base_offset}")

    # --- writing ----------------------------------------------------------------------------

    def _channel(self) -> int:
        if self._fd is None:
            self._fd = os.open(self._path, os.O_CREAT | os.O_RDWR | os.O_APPEND | os.O_CLOEXEC, 0o644)
        return self._fd

    def append(self, txn: AbortedTxn) -> None:
        """Append one entry (creating the file). ValueError unless its last offset is above the
        last entry's (Kafka's IllegalArgumentException)."""
        entries = self._load()
        if entries and entries[-1].last_offset >= txn.last_offset:
            raise ValueError(
                f"The last offset of appended transactions must increase sequentially, but "
                f"{txn.last_offset} is not greater than current last offset "
                f"{entries[-1].last_offset} of index {self._path}")
        fd = self._channel()
        # A torn entry left by a crash would shift every later one: cut it first.
        size = os.fstat(fd).st_size
        if size % ABORTED_TXN_SIZE:
            os.ftruncate(fd, size - size % ABORTED_TXN_SIZE)
        os.write(fd, txn.encode())
        entries.append(txn)
        self._last_offsets.append(txn.last_offset)
        self._max_lso = max(self._max_lso, txn.last_stable_offset)

    def truncate_to(self, offset: int) -> None:
        """Remove the entries whose last offset is >= `offset` (their markers were truncated)."""
        entries = self._load()
        keep = bisect.bisect_left(self._last_offsets, offset)
        if keep < len(entries):
            os.truncate(self._path, keep * ABORTED_TXN_SIZE)
            self._set_entries(entries[:keep])

    def reset(self) -> None:
        """Remove every entry (recovery rebuilds them); the file, if any, becomes empty."""
        if self._path.exists():
            os.truncate(self._path, 0)
        self._set_entries([])

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
