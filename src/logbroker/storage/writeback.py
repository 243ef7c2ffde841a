"""Starting the disk writes of a segment early (Linux's sync_file_range(SYNC_FILE_RANGE_WRITE)),
and giving it its disk blocks ahead of the writes (fallocate(FALLOC_FL_KEEP_SIZE)).

Kafka leaves the page cache to the kernel and fsyncs a segment once, after it rolls. With the
default 1 GiB segment that fsync writes the whole gigabyte in one go (~0.4 s here), and the
kernel work it does (block allocation, building and completing ~8,000 requests: ~0.15 CPU-s per
GiB, in the fsyncing thread, softirqs and kworkers) lands in that burst, while produce goes on. On
a machine near its CPU limit that burst is what queues the produce requests behind a roll
(docs/benchmarks.md, "A broker").

`start_writeback` asks the kernel to start writing a range of a file and returns without waiting
for the disk: the same work, spread over the segment's life in small pieces, so the roll's fsync
finds little left. It changes nothing about durability: what is acknowledged, fsynced and
recovered is exactly as before (the fsync after the roll and flush.ms / flush.messages still
decide what is on disk); the kernel would write these pages back anyway, only later.

Writing back the file that is being appended to has a cost of its own on ext4: the writeback
allocates the blocks of the delayed-allocation pages it writes, holding the inode's i_data_sem,
and an append that needs the same semaphore to reserve its pages waits (perf sched: pwritev2 of
the event loop blocked 2-16 ms in ext4_da_get_block_prep → down_write). So the blocks are
allocated beforehand, a few tens of MiB ahead of the end, with `allocate_ahead`: the appends then
write into blocks that exist (unwritten extents) and need no allocation, and neither does the
writeback. KEEP_SIZE leaves the file's size alone — it stays the bytes appended, as Kafka's are,
so readers and recovery see nothing new; the blocks past the end are given back when the segment
is trimmed (a truncate to its size) on roll and close.

libc is reached through ctypes, loaded on first use (not at start: the idle broker does not need
it). Where sync_file_range or fallocate does not exist (not Linux), or the file system cannot
preallocate, `start_writeback` and `allocate_ahead` do nothing.
"""

from __future__ import annotations

import errno
import os
import threading

SYNC_FILE_RANGE_WRITE = 2  # <linux/fs.h>: start writeback of dirty pages in the range, do not wait
FALLOC_FL_KEEP_SIZE = 1  # <linux/falloc.h>: allocate blocks, leave the file size as it is
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096

_lock = threading.Lock()
_libc: dict[str, object] = {}  # name -> the libc function once loaded, None where there is none


def _function(name: str, *argtypes):
    fn = _libc.get(name, False)
    if fn is not False:
        return fn
    with _lock:
        try:
            import ctypes

            fn = getattr(ctypes.CDLL(None, use_errno=True), name)
            fn.argtypes = argtypes
            fn.restype = ctypes.c_int
        except (OSError, AttributeError):
            fn = None
        _libc[name] = fn
    return fn


def _raise_errno() -> None:
    import ctypes

    err = ctypes.get_errno()
    raise OSError(err, os.strerror(err))


def start_writeback(fd: int, offset: int, nbytes: int) -> None:
    """Start writing the dirty pages of [offset, offset + nbytes) of `fd` to disk; do not wait.

    Blocks only while the kernel queues the writes (it may wait for room in the device's queue),
    so call it from a worker thread. Raises OSError (e.g. EBADF for a descriptor closed meanwhile).
    """
    import ctypes

    fn = _function("sync_file_range", ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint)
    if fn is not None and nbytes > 0 and fn(fd, offset, nbytes, SYNC_FILE_RANGE_WRITE) != 0:
        _raise_errno()


def allocate_ahead(fd: int, offset: int, nbytes: int) -> bool:
    """Give [offset, offset + nbytes) of `fd` disk blocks without changing the file's size
    (fallocate KEEP_SIZE; the blocks read as zeros until written). False where that cannot be
    done (no fallocate, a file system without it); raises OSError otherwise (ENOSPC: the disk is
    full, and the appends will say so themselves). Worker thread: it takes the inode's locks."""
    import ctypes

    fn = _function("fallocate", ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
    if fn is None:
        return False
    if nbytes > 0 and fn(fd, FALLOC_FL_KEEP_SIZE, offset, nbytes) != 0:
        if ctypes.get_errno() in (errno.EOPNOTSUPP, errno.ENOSYS):
            return False
        _raise_errno()
    return True
