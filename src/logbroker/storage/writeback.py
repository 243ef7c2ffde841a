"""Starting the disk writes of a segment early: Linux's sync_file_range(SYNC_FILE_RANGE_WRITE).

Kafka leaves the page cache to the kernel and fsyncs a segment once, after it rolls. With the
default 1 GiB segment that fsync writes the whole gigabyte in one go (~0.4 s here), and the
kernel work it does (block allocation, building and completing ~8,000 requests: ~0.15 CPU-s per
GiB, in the fsyncing thread, softirqs and kworkers) lands in that burst, while produce goes on. On
a machine near its CPU limit that burst is what queues the produce requests behind a roll
(docs/benchmarks.md, "Latency across segment rolls").

`start_writeback` asks the kernel to start writing a range of a file and returns without waiting
for the disk: the same work, spread over the segment's life in small pieces, so the roll's fsync
finds little left. It changes nothing about durability: what is acknowledged, fsynced and
recovered is exactly as before (the fsync after the roll and flush.ms / flush.messages still
decide what is on disk); the kernel would write these pages back anyway, only later.

libc is reached through ctypes, loaded on first use (not at start: the idle broker does not need
it). Where sync_file_range does not exist (not Linux), `start_writeback` does nothing.
"""

from __future__ import annotations

import os
import threading

SYNC_FILE_RANGE_WRITE = 2  # <linux/fs.h>: start writeback of dirty pages in the range, do not wait
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096

_lock = threading.Lock()
_sync_file_range = None  # the libc function once loaded; False where there is none


def _load():
    global _sync_file_range
    with _lock:
        if _sync_file_range is None:
            try:
                import ctypes

                libc = ctypes.CDLL(None, use_errno=True)
                fn = libc.sync_file_range
                fn.argtypes = (ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint)
                fn.restype = ctypes.c_int
                _sync_file_range = fn
            except (OSError, AttributeError):
                _sync_file_range = False
    return _sync_file_range


def start_writeback(fd: int, offset: int, nbytes: int) -> None:
    """Start writing the dirty pages of [offset, offset + nbytes) of `fd` to disk; do not wait.

    Blocks only while the kernel queues the writes (it may wait for room in the device's queue),
    so call it from a worker thread. Raises OSError (e.g. EBADF for a descriptor closed meanwhile).
    """
    fn = _sync_file_range if _sync_file_range is not None else _load()
    if not fn or nbytes <= 0:
        return
    if fn(fd, offset, nbytes, SYNC_FILE_RANGE_WRITE) != 0:
        import ctypes

        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
