"""Producer snapshot files (Kafka's ProducerStateManager.readSnapshot/writeSnapshot and its
SnapshotFile): the producer state of a partition, persisted at an offset.

A snapshot lives in the partition directory, named by the offset it covers up to (exclusive), 20
digits zero padded: `00000000000000001234.snapshot` holds the state after applying every batch
below offset 1234. Kafka's format (PID_SNAPSHOT_MAP_SCHEMA v1), big-endian:

    version       int16   1
    crc           uint32  CRC-32C of every byte after this field
    entries       int32   count, then per producer 46 bytes:
      producer_id               int64
      epoch                     int16
      last_sequence             int32   -1 if no batch is retained
      last_offset               int64   -1 if no batch is retained
      offset_delta              int32   last_offset - first offset of the last batch
      timestamp                 int64   max timestamp of the last batch
      coordinator_epoch         int32
      current_txn_first_offset  int64   -1 if no transaction is open

Only the last batch of each producer is stored, so after a reload a producer's retry of one of its
four older batches is no longer recognised as a duplicate (as in Kafka).

Crash behaviour: a snapshot is written to `<name>.tmp`, fsynced (or later, `flush_snapshot`) and
renamed into place, so a crash leaves either the old set of snapshots or the new one; a leftover
`.tmp` is never complete and is removed at startup (`remove_tmp_snapshot_files`); a snapshot whose
CRC does not match (torn by a crash before its fsync, or damaged) fails to decode with
CorruptSnapshotError, and the manager deletes it and uses the next older one.

Encoding and decoding are pure functions; the file functions block on disk.
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Iterable
from pathlib import Path

from logbroker.records.batch import crc32c_of
from logbroker.storage.checkpoints import fsync_file, write_file_atomically
from logbroker.storage.producer_state_entry import BatchMetadata, ProducerStateEntry

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_TMP_SUFFIX = ".snapshot.tmp"
DELETED_SUFFIX = ".deleted"
PRODUCER_SNAPSHOT_VERSION = 1

_SNAPSHOT_HEADER = struct.Struct(">hIi")  # version, crc, entry count
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")  # 46 bytes, field order of PID_SNAPSHOT_MAP_SCHEMA
_CRC_END = 6  # the CRC covers bytes [6, end): the entry count and the entries
_SNAPSHOT_NAME = re.compile(r"^(\d+)\.snapshot$")
_SNAPSHOT_TMP_NAME = re.compile(r"^\d+\.snapshot\.tmp$")


class CorruptSnapshotError(Exception):
    """A producer snapshot file failed its CRC, version or size check. Never reaches a client."""


def snapshot_file_name(offset: int) -> str:
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


def encode_snapshot(entries: Iterable[ProducerStateEntry]) -> bytes:
    """Kafka's producer snapshot bytes for `entries` (written in the order given)."""
    body = bytearray(_SNAPSHOT_HEADER.size)
    count = 0
    for e in entries:
        body += _SNAPSHOT_ENTRY.pack(e.producer_id, e.producer_epoch, e.last_seq,
                                     e.last_data_offset, e.last_offset_delta, e.last_timestamp,
                                     e.coordinator_epoch, e.current_txn_first_offset)
        count += 1
    struct.pack_into(">i", body, _CRC_END, count)
    _SNAPSHOT_HEADER.pack_into(body, 0, PRODUCER_SNAPSHOT_VERSION,
                               crc32c_of(memoryview(body)[_CRC_END:]), count)
    return bytes(body)


def decode_snapshot(buf: bytes) -> list[ProducerStateEntry]:
    """Parse snapshot bytes; raise CorruptSnapshotError on a bad version, CRC or size.

    As in Kafka, an entry keeps one batch when its last offset is >= 0 and an open transaction
    when its current_txn_first_offset is >= 0. Bytes after the entries are tolerated when the
    CRC (which covers them) matches, as Kafka's reader does.
    """
    if len(buf) < _SNAPSHOT_HEADER.size:
        raise CorruptSnapshotError(f"snapshot is {len(buf)} bytes, shorter than its header")
    version, crc, count = _SNAPSHOT_HEADER.unpack_from(buf, 0)
    if version != PRODUCER_SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"snapshot contained an unknown file version {version}")
    computed = crc32c_of(memoryview(buf)[_CRC_END:])
    if crc != computed:
        raise CorruptSnapshotError(f"snapshot is corrupt (stored crc {crc}, computed {computed})")
    if count < 0 or _SNAPSHOT_HEADER.size + count * _SNAPSHOT_ENTRY.size > len(buf):
        raise CorruptSnapshotError(f"snapshot claims {count} entries in {len(buf)} bytes")
    entries = []
    for (producer_id, epoch, last_seq, last_offset, offset_delta, timestamp, coordinator_epoch,
         txn_first_offset) in _SNAPSHOT_ENTRY.iter_unpack(
            memoryview(buf)[_SNAPSHOT_HEADER.size:_SNAPSHOT_HEADER.size
                            + count * _SNAPSHOT_ENTRY.size]):
        batches = [BatchMetadata(last_seq, last_offset, offset_delta, timestamp)] \
            if last_offset >= 0 else []
        entries.append(ProducerStateEntry(
            producer_id, producer_epoch=epoch, coordinator_epoch=coordinator_epoch,
            last_timestamp=timestamp,
            current_txn_first_offset=txn_first_offset if txn_first_offset >= 0 else -1,
            batch_metadata=batches))
    return entries


def read_snapshot(path: Path) -> list[ProducerStateEntry]:
    """Read and decode one snapshot file (blocks on disk)."""
    return decode_snapshot(path.read_bytes())


def flush_snapshot(path: Path) -> None:
    """fsync a snapshot written with `take_snapshot(sync=False)`, and its directory.

    Safe to run off the event loop (it touches no manager state) and on a file already deleted.
    """
    fsync_file(path)


def write_snapshot(path: Path, entries: Iterable[ProducerStateEntry], *, sync: bool) -> None:
    """Write `entries` to `path` through a temporary file renamed into place; fsynced unless
    `sync=False` (then `flush_snapshot(path)` later, off the event loop)."""
    write_file_atomically(path, encode_snapshot(entries), sync=sync)


def _scan_dir(directory: Path) -> list[os.DirEntry]:
    try:
        with os.scandir(directory) as it:
            return list(it)
    except FileNotFoundError:
        return []


def list_snapshot_files(directory: Path) -> dict[int, Path]:
    """The snapshot files in `directory`, by offset."""
    snapshots = {}
    for item in _scan_dir(directory):
        match = _SNAPSHOT_NAME.match(item.name)
        if match and item.is_file():
            snapshots[int(match.group(1))] = Path(item.path)
    return snapshots


def remove_tmp_snapshot_files(directory: Path) -> None:
    """Delete the `.snapshot.tmp` files left by a crash between writing a snapshot and renaming
    it: never complete."""
    for item in _scan_dir(directory):
        if _SNAPSHOT_TMP_NAME.match(item.name):
            Path(item.path).unlink(missing_ok=True)
