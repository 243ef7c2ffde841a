"""What the offset index and the time index share: a preallocated, memory-mapped file of
fixed-size big-endian entries, searched by binary search favouring the recent tail.

Kafka's AbstractIndex. Both index files of a segment are created at their maximum size
(`segment.index.bytes`, 10 MiB, rounded down to a multiple of the entry size), zero filled by the
file system, mapped shared and read-write, and filled from the front. On roll and close the file
is trimmed to its entries, so a file that is not a multiple of the entry size, or an index whose
last entry is out of order, is corrupt.

After a crash, an active segment's index is still at its preallocated size with zeros after its
last entry. Kafka takes the whole file as entries and relies on recovery to rebuild it; here the
entry count on open is the file size less the trailing all-zero entries, which gives the right
count for both a trimmed file and a preallocated one (an offset index entry always has a position
> 0, since a segment's first append never gets an entry). The zeros are looked for below the
file's first hole (lseek SEEK_HOLE): the preallocated part was never written, and reading it
would fault in megabytes of zero pages per index. Truncation zeroes the entries it drops
so that this stays true. Recovery still rebuilds the indexes of every segment after the recovery
point: nothing here is checksummed.

A full disk: the preallocated file is sparse, and a store into a mapped page that has no block
behind it cannot fail politely — the kernel sends SIGBUS and the whole broker dies. So before an
entry is stored past the part of the file known to have blocks (`_backed_bytes`), the next
64 KiB are reserved with posix_fallocate; ENOSPC there is a KafkaStorageError before anything is
written (`ensure_room_for_entry`, which LogSegment calls before it writes the batch, so a failed
append leaves the segment as it was). Reserving 64 KiB at a time keeps disk use close to what is
written (one reservation per ~8,000 offset index entries), unlike preallocating 10 MiB for real.

A writable mapping is advised MADV_RANDOM: a page fault then brings in that page alone. Without
it the kernel reads around the fault (read_ahead_kb of the device, 8 MiB on some VMs), so the
first entry of a new segment's index filled megabytes of page cache with zeros, ~3 ms per index on
the event loop right after every roll, and trimming the index on the next roll dropped them again
(~1 ms per index). The entries are written and searched a page at a time anyway.

A rolled segment's index is *retired* on the event loop (`retire`: it takes no more entries) and
trimmed later, off the loop, by the flush that follows the roll (`trim_retired`, then
`remap_to_file` under the log's lock). The trim frees the rest of the last 64 KiB reservation, and
on a file system mounted with `discard` and without a journal, ext4 discards freed blocks inside
the truncate and waits for the device: 1-7 ms per index on the loop at every roll, measured
(docs/benchmarks.md). Kafka trims at the roll itself; the file is the same once trimmed, and until
then it is what an active segment's index is after a crash (preallocated, zeros after the
entries), which opening already handles. Between the trim and the remap the mapping is longer
than the file; nothing touches it past the entries (a retired index refuses appends), so no
access can fault past the end.

All methods block on the file system (page faults on the map, ftruncate, fsync) and run on the
caller's thread; appends and lookups are memory accesses. Not thread-safe: the owning log
serialises writers. `flush` and `trim_retired` may run on a worker thread while the event loop
reads and appends; changes of the file's size are serialised by `_size_lock`.
"""

from __future__ import annotations

import errno
import mmap
import os
import struct
import threading
from pathlib import Path

from logbroker.errors import KafkaStorageError

INT32_MAX = (1 << 31) - 1
DEFAULT_MAX_INDEX_SIZE = 10 * 1024 * 1024
_WARM_BYTES = 8192  # Kafka's warm section: the last 8 KiB of entries, two 4 KiB pages
_SCAN_CHUNK_ENTRIES = 8192
_RESERVE_BYTES = 64 * 1024  # reserved ahead of the entries, see the module docstring


class CorruptIndexError(KafkaStorageError):
    """An index file fails its sanity check (size, order of its last entry). Recovery rebuilds it."""


class InvalidOffsetError(KafkaStorageError):
    """An index append would break the order of the index (offsets strictly increase)."""


class IndexOffsetOverflowError(KafkaStorageError):
    """An offset does not fit the index: it is below the base offset or more than int32 past it."""


class IndexFullError(KafkaStorageError):
    """An append to an index with no free slot: the segment should have been rolled."""


_MADV_RANDOM = getattr(mmap, "MADV_RANDOM", None)  # not on every platform


def _data_end(fd: int, length: int) -> int:
    """Where the first hole of the file starts (lseek SEEK_HOLE): `length` for a file without
    holes, or where holes cannot be told (no SEEK_HOLE, a file system that does not say)."""
    seek_hole = getattr(os, "SEEK_HOLE", None)
    if seek_hole is None or length == 0:
        return length
    try:
        return min(os.lseek(fd, 0, seek_hole), length)
    except OSError:
        return length


def round_down_to_multiple(number: int, factor: int) -> int:
    return factor * (number // factor)


class AbstractIndex:
    """Base of OffsetIndex and TimeIndex: file, mapping, entry count, resize and search.

    Subclasses set ENTRY_SIZE and implement the entry format; see their docstrings.
    """

    ENTRY_SIZE: int = 0
    # An all-zero entry can be real only in the time index (timestamp 0 at the base offset).
    _ZERO_ENTRY_CAN_BE_REAL = False

    def __init__(self, path: str | os.PathLike, base_offset: int, *,
                 max_index_size: int = DEFAULT_MAX_INDEX_SIZE, writable: bool = True) -> None:
        """Open or create the index at `path`. Blocks on disk.

        A new file is preallocated to `max_index_size` rounded down to the entry size; an existing
        one keeps its size and its entries are counted as the module docstring says. A read-only
        index (`writable=False`, for tools) needs the file to exist and never changes it.
        """
        self._path = Path(path)
        self.base_offset = base_offset
        self.max_index_size = max_index_size
        self.writable = writable
        self._warm_entries = _WARM_BYTES // self.ENTRY_SIZE
        self._mmap: mmap.mmap | None = None
        self._size_lock = threading.Lock()  # the file's size: resize against a worker's trim_retired
        self._trim_pending = False  # retired, its file not yet trimmed
        newly_created = False
        if writable:
            try:
                fd = os.open(self._path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
                newly_created = True
            except FileExistsError:
                fd = os.open(self._path, os.O_RDWR)
        else:
            fd = os.open(self._path, os.O_RDONLY)
        try:
            if newly_created:
                if max_index_size < self.ENTRY_SIZE:
                    raise ValueError(f"invalid max index size {max_index_size} for {self._path}")
                os.ftruncate(fd, round_down_to_multiple(max_index_size, self.ENTRY_SIZE))
            self._length = os.fstat(fd).st_size
            self._map(fd)
            data_end = self._length if newly_created else _data_end(fd, self._length)
        finally:
            os.close(fd)  # the mapping keeps its own descriptor
        self._max_entries = self._length // self.ENTRY_SIZE
        self._entries = 0 if newly_created else self._count_entries(data_end)
        # What is known to have blocks: the entries (the rest of an existing file may be sparse).
        self._backed_bytes = self._entries * self.ENTRY_SIZE

    # --- the mapping ------------------------------------------------------------------------

    def _map(self, fd: int) -> None:
        if self._length == 0:
            self._mmap = None  # mmap refuses empty files; an empty index needs no mapping
        elif self.writable:
            self._mmap = mmap.mmap(fd, self._length, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            if _MADV_RANDOM is not None:
                self._mmap.madvise(_MADV_RANDOM)
        else:
            self._mmap = mmap.mmap(fd, self._length, mmap.MAP_SHARED, mmap.PROT_READ)

    def _unmap(self) -> None:
        if self._mmap is not None:
            self._mmap.close()
            self._mmap = None

    def _map_file(self) -> None:
        """Map the file again at `_length` (after `_unmap` and any change of its size)."""
        fd = os.open(self._path, os.O_RDWR)
        try:
            self._map(fd)
        finally:
            os.close(fd)

    def _count_entries(self, data_end: int) -> int:
        """Entries in an existing file: its whole entries less the trailing all-zero ones.
        `data_end`: where the file's first hole starts (its length when it has none); the
        zeros are looked for below it only, so a preallocated index left by a crash is not read
        through its megabytes of holes (page faults of zeros, ~0.15 s an index)."""
        es = self.ENTRY_SIZE
        whole = self._length // es
        if whole == 0:
            return 0
        mm = self._mmap
        end = whole * es
        # Fast path: a trimmed file ends with a real entry.
        if mm[end - es:end].count(0) != es:
            return whole
        end = min(end, -(-data_end // es) * es)
        chunk = _SCAN_CHUNK_ENTRIES * es
        while end > 0:
            start = max(0, end - chunk)
            used = len(mm[start:end].rstrip(b"\x00"))
            if used:
                return (start + used + es - 1) // es
            end = start
        if self._ZERO_ENTRY_CAN_BE_REAL and self._length == es:
            return 1  # a trimmed file holding exactly one entry, which happens to be all zeros
        return 0

    # --- properties ---------------------------------------------------------------------------

    @property
    def path(self) -> Path:
        return self._path

    @property
    def entries(self) -> int:
        return self._entries

    @property
    def max_entries(self) -> int:
        return self._max_entries

    @property
    def length(self) -> int:
        """The file's length in bytes (preallocated or trimmed)."""
        return self._length

    @property
    def size_in_bytes(self) -> int:
        """Bytes of real entries."""
        return self._entries * self.ENTRY_SIZE

    @property
    def is_full(self) -> bool:
        return self._entries >= self._max_entries

    def can_append_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= INT32_MAX

    def relative_offset(self, offset: int) -> int:
        relative = offset - self.base_offset
        if not 0 <= relative <= INT32_MAX:
            raise IndexOffsetOverflowError(f"Integer overflow for offset: {offset} ({self._path})")
        return relative

    # --- search -----------------------------------------------------------------------------

    def _largest_lower_bound_slot(self, target: int, field: struct.Struct, field_offset: int) -> int:
        """The slot of the largest entry whose field is <= target, or -1 if there is none.

        Why the tail first: entries are appended at the end and the readers that matter (followers
        and caught-up consumers) look up recent offsets. A plain binary search over 10 MiB touches
        pages all over the file, and the OS may have evicted the cold ones, so each lookup could
        fault. Kafka keeps lookups for the last 8 KiB of entries (the warm section) inside those
        pages and only searches the whole index for a target older than that.
        """
        n = self._entries
        if n == 0:
            return -1
        mm = self._mmap
        es = self.ENTRY_SIZE
        unpack = field.unpack_from
        first_hot = max(0, n - 1 - self._warm_entries)
        if unpack(mm, first_hot * es + field_offset)[0] < target:
            lo, hi = first_hot, n - 1
        else:
            if unpack(mm, field_offset)[0] > target:
                return -1
            lo, hi = 0, first_hot
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            found = unpack(mm, mid * es + field_offset)[0]
            if found > target:
                hi = mid - 1
            elif found < target:
                lo = mid
            else:
                return mid
        return lo

    # --- room on disk -------------------------------------------------------------------------

    def ensure_room_for_entry(self) -> None:
        """Make sure the next entry's bytes have blocks on disk, so that storing it cannot SIGBUS.
        KafkaStorageError (nothing changed) if the file system has no room. Blocks briefly."""
        end = (self._entries + 1) * self.ENTRY_SIZE
        if end <= self._backed_bytes or end > self._length:
            return
        upto = min(self._length, end + _RESERVE_BYTES)
        try:
            fd = os.open(self._path, os.O_RDWR)
            try:
                os.posix_fallocate(fd, self._backed_bytes, upto - self._backed_bytes)
            finally:
                os.close(fd)
        except OSError as e:
            if e.errno in (errno.EOPNOTSUPP, errno.EINVAL):
                self._backed_bytes = self._length  # cannot reserve here: write as before
                return
            raise KafkaStorageError(f"No room on disk for the next entry of index {self._path}: "
                                    f"{e.strerror or e}") from e
        self._backed_bytes = upto

    # --- changing size ----------------------------------------------------------------------

    def _check_writable(self) -> None:
        if not self.writable:
            raise ValueError(f"index {self._path} is open read-only")

    def resize(self, new_size: int) -> bool:
        """Set the file to `new_size` bytes rounded down to the entry size and remap it.

        Returns False if the length is already that. Growing makes room for more entries (the
        active segment after a restart); it never drops entries (ValueError if it would).
        """
        self._check_writable()
        rounded = round_down_to_multiple(new_size, self.ENTRY_SIZE)
        with self._size_lock:
            self._trim_pending = False  # a retired index resized (closed, or active again): done here
            if rounded == self._length and (self._mmap is None or len(self._mmap) == rounded):
                self._max_entries = rounded // self.ENTRY_SIZE  # a retired index, active again
                return False
            if rounded < self._entries * self.ENTRY_SIZE:
                raise ValueError(f"cannot resize {self._path} to {rounded} bytes: it holds "
                                 f"{self._entries} entries of {self.ENTRY_SIZE} bytes")
            self._unmap()
            os.truncate(self._path, rounded)
            self._length = rounded
            self._map_file()
            self._max_entries = rounded // self.ENTRY_SIZE
            self._backed_bytes = min(self._backed_bytes, rounded)
        self._after_resize()
        return True

    def _after_resize(self) -> None:
        """Hook for subclasses that cache the last entry."""

    def trim_to_valid_size(self) -> None:
        """Shrink the file to its entries (on close and recovery)."""
        self.resize(self._entries * self.ENTRY_SIZE)

    # --- retiring: a rolled segment's index, trimmed off the event loop ----------------------

    def retire(self) -> None:
        """On roll: take no more entries from now on (IndexFullError), and leave the file to be
        trimmed to the entries by `trim_retired`. Cheap: no I/O."""
        self._check_writable()
        self._max_entries = self._entries
        self._trim_pending = True

    def trim_retired(self) -> bool:
        """Shrink a retired index's file to its entries, leaving the mapping as it is (see the
        module docstring; `remap_to_file` follows). Blocks on disk (the truncate may wait for the
        device's discards): a worker thread, without the owning log's lock. Returns whether the
        file was cut; False when there was nothing to do (not retired, resized or deleted since)."""
        with self._size_lock:
            if not self._trim_pending:
                return False
            self._trim_pending = False
            size = self._entries * self.ENTRY_SIZE
            try:
                os.truncate(self._path, size)
            except FileNotFoundError:  # deleted (or renamed for deletion) meanwhile
                return False
            self._length = size
            self._backed_bytes = min(self._backed_bytes, size)
            return True

    def remap_to_file(self) -> None:
        """Map the file at its length again after `trim_retired`: no I/O, but readers use the
        mapping, so under the owning log's lock. A no-op when the mapping already fits."""
        with self._size_lock:
            mm = self._mmap
            if mm is None or len(mm) == self._length:
                return
            self._unmap()
            self._map_file()

    def _truncate_to_entries(self, entries: int) -> None:
        """Keep the first `entries` entries; zero the dropped ones (see the module docstring)."""
        self._check_writable()
        if entries < self._entries:
            es = self.ENTRY_SIZE
            start, end = entries * es, self._entries * es
            self._mmap[start:end] = bytes(end - start)
        self._entries = entries

    def truncate(self) -> None:
        """Remove every entry."""
        self._truncate_to_entries(0)
        self._after_truncate()

    def _after_truncate(self) -> None:
        """Hook for subclasses that cache the last entry."""

    def reset(self) -> None:
        """Empty the index and give it its full preallocated size again (before recovery)."""
        self.truncate()
        self.resize(self.max_index_size)

    # --- file lifecycle ----------------------------------------------------------------------

    def flush(self) -> None:
        """Write the mapped entries to disk. Blocks on disk; may run on a worker thread.

        On Linux, pages dirtied through a shared mapping are dirty pages of the file, and
        msync(MS_SYNC) is an fsync of it; fsync through a descriptor of our own does the same
        while releasing the GIL, which CPython's mmap.flush (msync) holds throughout.
        """
        if self._mmap is None or not self.writable:
            return
        try:
            fd = os.open(self._path, os.O_RDONLY)
        except FileNotFoundError:  # renamed meanwhile: msync through the mapping instead
            mm = self._mmap
            if mm is not None:
                mm.flush()
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def close(self) -> None:
        """Trim the file to its entries and unmap it."""
        if self.writable and (self._mmap is not None or self._length):
            self.trim_to_valid_size()
        self._unmap()

    def close_handler(self) -> None:
        """Unmap without trimming (on errors, before deletion)."""
        self._unmap()

    def delete(self) -> bool:
        """Unmap and delete the file. Returns whether a file was there."""
        self._unmap()
        try:
            os.unlink(self._path)
        except FileNotFoundError:
            return False
        return True

    def rename_to(self, path: str | os.PathLike) -> None:
        """Rename the file; the mapping stays valid."""
        path = Path(path)
        os.replace(self._path, path)
        self._path = path

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(path={str(self._path)!r}, base_offset={self.base_offset}, "
                f"entries={self._entries}, max_entries={self._max_entries})")
