"""A full file system under the log: clean KafkaStorageErrors, never a SIGBUS from an index page
without a block behind it, and appends work again once there is room."""

from __future__ import annotations

import os

import pytest

from logbroker.clock import ManualClock
from logbroker.errors import KafkaStorageError
from logbroker.records.builder import build_batch
from logbroker.storage.log import Log
from logbroker.storage.log_config import LogConfig
from logbroker.storage.offset_index import OffsetIndex
from logbroker.storage.time_index import TimeIndex

NOW = 1_700_000_000_000


def fill(directory, leave_bytes: int = 0):
    """Fill the file system with a file; returns it (delete it to make room)."""
    filler = directory / "filler"
    with open(filler, "wb") as f:
        try:
            while True:
                f.write(b"\xaa" * 65536)
                f.flush()
        except OSError:
            pass
    if leave_bytes:
        os.truncate(filler, max(0, os.path.getsize(filler) - leave_bytes))
    return filler


def test_index_append_on_a_full_disk_is_a_storage_error_not_sigbus(small_filesystem):
    # Without the reservation, storing entry 1024 (the third page) would kill the process.
    index = OffsetIndex(small_filesystem / "00000000000000000000.index", 0, max_index_size=1 << 20)
    time_index = TimeIndex(small_filesystem / "00000000000000000000.timeindex", 0, max_index_size=1 << 20)
    fill(small_filesystem)
    appended = 0
    with pytest.raises(KafkaStorageError, match="No room on disk"):
        for i in range(20_000):
            index.append(i + 1, (i + 1) * 10)
            appended += 1
    assert appended == index.entries
    with pytest.raises(KafkaStorageError, match="No room on disk"):
        for i in range(20_000):
            time_index.maybe_append(NOW + i, i)


def test_log_append_on_a_full_disk_fails_whole_and_works_again_with_room(small_filesystem):
    config = LogConfig.defaults().with_overrides({"index.interval.bytes": "1"})
    log = Log.open(small_filesystem / "t-0", config, clock=ManualClock(NOW), had_clean_shutdown=True)
    filler = fill(small_filesystem, leave_bytes=256 * 1024)
    batch = bytearray(build_batch([(None, b"v" * 4000)], now_ms=NOW))
    failures = 0
    for _ in range(200):
        end_before, size_before = log.log_end_offset, log.size_in_bytes
        try:
            log.append_as_leader(bytearray(batch), leader_epoch=0)
        except KafkaStorageError:
            failures += 1
            assert (log.log_end_offset, log.size_in_bytes) == (end_before, size_before)
    assert failures > 0
    written = log.log_end_offset
    filler.unlink()
    log.append_as_leader(bytearray(batch), leader_epoch=0)
    assert log.log_end_offset == written + 1
    log.close()
    reopened = Log.open(small_filesystem / "t-0", config, clock=ManualClock(NOW), had_clean_shutdown=False)
    assert reopened.log_end_offset == written + 1
    reopened.close()
