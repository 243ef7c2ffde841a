"""The .log file of a segment: record batches back to back, as they came on the wire."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

from logbroker.errors import CorruptRecordError
from logbroker.records.batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    NO_PARTITION_LEADER_EPOCH,
    NO_TIMESTAMP,
    BatchHeader,
    read_header,
)
from logbroker.records.compression import decompress
from logbroker.records.record import decode_records
from logbroker.storage.values import FileRegion, TimestampAndOffset, TimestampOffset
from logbroker.storage.writeback import PAGE_SIZE, allocate_ahead, start_writeback

INT32_MAX = (1 << 31) - 1
_READ_CHUNK = 64 * 1024
WRITEBACK_BYTES = 8 << 20  # start the disk writes of a growing file every this many bytes
ALLOCATE_AHEAD_BYTES = 24 << 20  # then keep blocks allocated up to this far past its end


class FileRecords:
    """A segment's .log file: v2 record batches back to back, no framing of our own.

    Format (architecture.md §2): each batch is the 61-byte header (baseOffset int64, batchLength int32,
    …) then its records, exactly the bytes a producer sent with baseOffset and
    partitionLeaderEpoch patched. Byte-compatible with Kafka's .log files both ways.

    The file only grows at its end, by `append` (one os.pwrite of the caller's buffer into the page
    cache; no copy, no per-record work); `size_in_bytes` is where the next batch goes. With
    `preallocate` a new file is first extended to `init_file_size` (sparse, as Kafka's
    RandomAccessFile.setLength) and the logical size tracked here; `close` trims it back.

    `start_writeback` (a worker thread, every WRITEBACK_BYTES appended: `writeback_due`) has the
    kernel start writing what was appended so far, so that the fsync after a roll has little left,
    and keeps disk blocks allocated up to ALLOCATE_AHEAD_BYTES past the end (never past the
    segment's `max_size`) without changing the file's size (writeback.py); `trim` gives those
    back. A file that never grows by WRITEBACK_BYTES (a quiet partition) gets neither. It moves
    nothing that durability depends on, and the size of the file stays the bytes appended.

    After a crash the file may end in a torn batch, or in zeros past the last write of a
    preallocated file: readers here stop at the first incomplete batch, and LogSegment.recover
    validates every batch and truncates the file at the first invalid one.

    Every method blocks on disk and is synchronous; call from the event loop only for the small
    reads of fetch and lookups, and run `flush` (fsync) in a worker thread. Not thread-safe apart
    from `flush` running beside readers.
    """

    def __init__(self, path: Path, fd: int, size: int, *, writable: bool) -> None:
        self._path = path
        self._fd = fd
        self._size = size
        self._writeback_from = size & ~(PAGE_SIZE - 1)  # writeback started below this (page) position
        # Blocks allocated past the end up to here (0: none known); None: this file system cannot.
        self._allocated_to: int | None = 0
        self.writable = writable

    @classmethod
    def open(cls, path: str | os.PathLike, *, file_already_exists: bool = False,
             preallocate: bool = False, init_file_size: int = 0, writable: bool = True) -> FileRecords:
        """Open (creating if missing) the .log file at `path`.

        With `preallocate` and not `file_already_exists`, the file is set to `init_file_size`
        bytes (segment.bytes) and starts empty; otherwise its size is the file's length.
        """
        path = Path(path)
        fd = os.open(path, (os.O_RDWR | os.O_CREAT) if writable else os.O_RDONLY, 0o644)
        preallocated = writable and preallocate and not file_already_exists and init_file_size > 0
        try:
            if preallocated:
                os.ftruncate(fd, init_file_size)
            stat = os.fstat(fd)
        except BaseException:
            os.close(fd)
            raise
        size = 0 if preallocated else stat.st_size
        records = cls(path, fd, size, writable=writable)
        if stat.st_blocks * 512 > size + (256 << 10):  # allocated past the end before a crash (metadata is less)
            records._allocated_to = stat.st_blocks * 512
        return records

    # --- properties ---------------------------------------------------------------------------

    @property
    def path(self) -> Path:
        return self._path

    @property
    def fd(self) -> int:
        """The open descriptor, for os.sendfile. Valid until close/delete."""
        if self._fd < 0:
            raise ValueError(f"{self._path} is closed")
        return self._fd

    @property
    def size_in_bytes(self) -> int:
        return self._size

    def __len__(self) -> int:
        return self._size

    # --- writing ----------------------------------------------------------------------------

    def append(self, buf, *, head=None) -> int:
        """Write `buf` (bytes-like, whole batches) at the end; return the bytes written.

        With `head`, the first len(head) bytes written are `head` instead of buf's own: the leader
        patches a batch's baseOffset and leader epoch (the first 16 bytes) that way without copying
        a read-only buffer. One pwrite/pwritev into the page cache, looped only if the kernel
        writes short. The buffer is not copied or inspected.
        """
        view = memoryview(buf)
        total = view.nbytes
        if total > INT32_MAX - self._size:
            raise ValueError(f"append of {total} bytes is too large for segment {self._path} "
                             f"with current file position at {self._size}")
        fd = self.fd
        if head is None:
            written = os.pwrite(fd, view, self._size)
        else:
            written = os.pwritev(fd, [head, view[len(head):]], self._size)
            if written < total:  # rare: finish from one contiguous copy
                view = memoryview(bytes(head) + view[len(head):])
        while written < total:  # rare: a short write (signal, nearly full disk)
            n = os.pwrite(fd, view[written:], self._size + written)
            if n == 0:
                raise OSError(f"short write to {self._path}")
            written += n
        self._size += total
        return total

    def writeback_due(self) -> bool:
        """Whether WRITEBACK_BYTES were appended since the last `start_writeback`. Cheap."""
        return self._size - self._writeback_from >= WRITEBACK_BYTES

    def start_writeback(self, max_size: int = INT32_MAX) -> None:
        """Allocate blocks up to ALLOCATE_AHEAD_BYTES past the end (at most `max_size`, the
        segment's) when fewer than two WRITEBACK_BYTES steps are left, then start the disk
        writes of the whole pages appended since the last call without waiting for them
        (writeback.py). Blocks only while the kernel allocates and queues: run it in a worker
        thread, beside appends. Raises OSError (e.g. the file closed meanwhile); a full disk only
        ends the allocating ahead for this file."""
        size = self._size
        allocated = self._allocated_to
        target = min(size + ALLOCATE_AHEAD_BYTES, max_size)
        if allocated is not None and allocated - size < 2 * WRITEBACK_BYTES and target > max(allocated, size):
            start = max(allocated, size)
            try:
                done = allocate_ahead(self.fd, start, target - start)
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
                done = False  # a full disk: the appends will say so; stop asking for this file
            self._allocated_to = target if done else None
        start, end = self._writeback_from, size & ~(PAGE_SIZE - 1)
        if end > start:
            self._writeback_from = end
            start_writeback(self.fd, start, end - start)

    def truncate_to(self, target_size: int) -> int:
        """Cut the file to `target_size` bytes; return how many bytes were removed."""
        original = self._size
        if not 0 <= target_size <= original:
            raise ValueError(f"attempt to truncate log segment {self._path} to {target_size} bytes "
                             f"failed, size of this log segment is {original} bytes")
        if target_size < os.fstat(self.fd).st_size or (self._allocated_to or 0) > target_size:
            os.ftruncate(self.fd, target_size)  # also gives back the blocks allocated past the end
            if self._allocated_to is not None:
                self._allocated_to = 0
        self._size = target_size
        self._writeback_from = min(self._writeback_from, target_size & ~(PAGE_SIZE - 1))
        return original - target_size

    def trim(self, *, blocks_ahead: bool = True) -> None:
        """Drop the preallocated space past the logical end: the `preallocate` config's file
        length, and (with `blocks_ahead`) the blocks `start_writeback` allocated ahead. The roll
        leaves the latter to `release_blocks_ahead` in the flush that follows it: on a file system
        mounted with `discard` the truncate that frees them waits for the device (7 ms seen), which
        the event loop should not."""
        if blocks_ahead or self._size < os.fstat(self.fd).st_size:
            self.truncate_to(self._size)

    def release_blocks_ahead(self) -> None:
        """Give back the blocks allocated past the end (a rolled segment's, after its flush).
        Blocks on disk: worker thread. A no-op when there are none."""
        if (self._allocated_to or 0) > self._size and self._fd >= 0:
            self.truncate_to(self._size)

    def flush(self) -> None:
        """fsync the file. Blocks on disk: run it off the event loop."""
        if self._fd >= 0:
            os.fsync(self._fd)

    # --- reading ----------------------------------------------------------------------------

    def read(self, position: int, size: int) -> bytes:
        """Up to `size` bytes from `position` (fewer at the end of the file)."""
        if position < 0 or size < 0:
            raise ValueError(f"invalid read of {size} bytes at {position} from {self._path}")
        size = min(size, self._size - position)
        if size <= 0:
            return b""
        return os.pread(self.fd, size, position)

    def region(self, position: int, size: int) -> FileRegion:
        """The bytes [position, position + size) clamped to the end of the file, for sendfile."""
        if position < 0 or size < 0:
            raise ValueError(f"invalid region of {size} bytes at {position} of {self._path}")
        if position > self._size:
            raise ValueError(f"slice from position {position} exceeds end position of {self._path} "
                             f"({self._size} bytes)")
        return FileRegion(self.fd, position, min(size, self._size - position))

    def _scan(self, start: int, with_data: bool):
        """Walk the batches from `start`: (position, header[, memoryview of the whole batch]).

        Reads 64 KiB at a time and parses headers out of that buffer, so walking small batches is
        one syscall per chunk; a header right after a batch larger than the chunk is read alone.
        Stops before a batch that runs past the end (a torn tail). A length too small for a v2
        batch is corruption (CorruptRecordError), as it would be in Kafka.
        """
        end = self._size
        fd = self.fd
        pos = start
        buf = b""
        buf_start = start
        want = _READ_CHUNK
        while end - pos >= HEADER_SIZE:
            rel = pos - buf_start
            if rel + HEADER_SIZE > len(buf):
                buf = os.pread(fd, min(want, end - pos), pos)
                buf_start, rel = pos, 0
                if len(buf) < HEADER_SIZE:
                    return  # the file shrank under us
            header = read_header(buf, rel)
            if header.batch_length < MIN_BATCH_LENGTH:
                raise CorruptRecordError(
                    f"found record batch size {header.batch_length} smaller than the minimum batch "
                    f"overhead ({MIN_BATCH_LENGTH}) at position {pos} in file {self._path}")
            size = header.batch_length + LOG_OVERHEAD
            if size > end - pos:
                return
            if with_data:
                if rel + size > len(buf):
                    buf = os.pread(fd, max(size, min(_READ_CHUNK, end - pos)), pos)
                    buf_start, rel = pos, 0
                    if len(buf) < size:
                        return
                yield pos, header, memoryview(buf)[rel:rel + size]
            else:
                yield pos, header
            want = HEADER_SIZE if size >= _READ_CHUNK else _READ_CHUNK
            pos += size

    def batches(self, start_position: int = 0) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of each complete batch from `start_position` (a batch boundary)."""
        return self._scan(start_position, False)

    def batches_with_data(self, start_position: int = 0) -> Iterator[tuple[int, BatchHeader, memoryview]]:
        """(position, header, batch bytes) of each complete batch, for recovery and validation."""
        return self._scan(start_position, True)

    def search_for_offset_with_size(self, target_offset: int,
                                    starting_position: int) -> tuple[int, int] | None:
        """(position, size) of the first batch from `starting_position` whose last offset is
        >= target_offset, i.e. the batch holding it or the next one; None past the end."""
        for position, header in self._scan(starting_position, False):
            if header.base_offset + header.last_offset_delta >= target_offset:
                return position, header.batch_length + LOG_OVERHEAD
        return None

    def search_for_timestamp(self, target_timestamp: int, starting_position: int,
                             starting_offset: int) -> TimestampAndOffset | None:
        """The first record at or after `starting_offset` with timestamp >= target, or None.

        Batches are skipped on their maxTimestamp; only a batch that reaches the target is decoded
        (decompressed if need be) to find the exact record, as Kafka's FileRecords does.
        """
        for _, header, data in self._scan(starting_position, True):
            if header.max_timestamp < target_timestamp:
                continue
            found = first_record_at_or_after(header, data, target_timestamp, starting_offset)
            if found is not None:
                epoch = header.partition_leader_epoch
                return TimestampAndOffset(found[0], found[1],
                                          -1 if epoch == NO_PARTITION_LEADER_EPOCH else epoch)
        return None

    def largest_timestamp_after(self, position: int) -> TimestampOffset:
        """The largest batch maxTimestamp from `position` on, with that batch's last offset;
        (NO_TIMESTAMP, -1) if no batch has a timestamp."""
        max_timestamp = NO_TIMESTAMP
        offset = -1
        for _, header in self._scan(position, False):
            if header.max_timestamp > max_timestamp:
                max_timestamp = header.max_timestamp
                offset = header.base_offset + header.last_offset_delta
        return TimestampOffset(max_timestamp, offset)

    # --- file lifecycle ----------------------------------------------------------------------

    def close(self) -> None:
        """fsync, trim preallocated space and close. Blocks on disk."""
        if self._fd < 0:
            return
        try:
            if self.writable:
                self.flush()
                self.trim()
        finally:
            self.close_handlers()

    def close_handlers(self) -> None:
        """Close the descriptor without flushing (on errors, before deletion)."""
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)

    def rename_to(self, path: str | os.PathLike) -> None:
        """Rename the file; the descriptor (and regions handed out) stay valid."""
        path = Path(path)
        os.replace(self._path, path)
        self._path = path

    def delete(self) -> bool:
        """Close and delete the file. Returns whether a file was there."""
        self.close_handlers()
        try:
            os.unlink(self._path)
        except FileNotFoundError:
            return False
        return True

    def __repr__(self) -> str:
        return f"FileRecords(path={str(self._path)!r}, size={self._size})"


def first_record_at_or_after(header: BatchHeader, data: memoryview, target_timestamp: int,
                              starting_offset: int) -> tuple[int, int] | None:
    """(timestamp, offset) of the first record of this batch with timestamp >= target and
    offset >= starting_offset, or None."""
    section = data[HEADER_SIZE:]
    if header.compression_codec:
        section = decompress(header.compression_codec, section)
    records = decode_records(
        section, header.records_count, base_offset=header.base_offset,
        base_timestamp=header.base_timestamp,
        log_append_time_ms=header.max_timestamp if header.is_log_append_time else None)
    for record in records:
        if record.timestamp >= target_timestamp and record.offset >= starting_offset:
            return record.timestamp, record.offset
    return None
