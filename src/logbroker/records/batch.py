"""The v2 record batch header (magic 2), as on the wire and on disk.

Layout, big-endian, 61 bytes before the records:

    0  baseOffset            int64
    8  batchLength           int32   bytes after this field (so a batch is batchLength + 12 bytes)
    12 partitionLeaderEpoch  int32
    16 magic                 int8    always 2
    17 crc                   uint32  CRC-32C of bytes [21, end of batch)
    21 attributes            int16   bits 0-2 codec, 3 timestamp type, 4 transactional, 5 control,
                                     6 delete horizon set (compaction)
    23 lastOffsetDelta       int32
    27 baseTimestamp         int64
    35 maxTimestamp          int64
    43 producerId            int64
    51 producerEpoch         int16
    53 baseSequence          int32
    57 recordsCount          int32
    61 records …

baseOffset and partitionLeaderEpoch lie before the CRC'd range, so the broker assigns offsets and
stamps epochs by patching bytes in place without recomputing the CRC. Everything here reads the
header only; record bodies are never touched.
"""

from __future__ import annotations

import importlib.util
import struct
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple


def _load_crc32c() -> Callable[[bytes | memoryview], int]:
    """The `crc32c` package's CRC-32C function, loaded from its extension module alone.

    The package's `__init__` asks importlib.metadata for its own version, which imports
    importlib.metadata and the email package: ~25 ms of start and ~7 MiB of a broker's idle
    memory, for a version string nobody reads. The extension module does not need its package;
    when it cannot be found that way (another layout), import the package as usual.
    """
    spec = importlib.util.find_spec("crc32c")  # finds the package without running it
    for directory in (spec.submodule_search_locations or []) if spec else []:
        for path in sorted(Path(directory).glob("_crc32c*.so")):
            ext_spec = importlib.util.spec_from_file_location("crc32c._crc32c", path)
            module = importlib.util.module_from_spec(ext_spec)
            ext_spec.loader.exec_module(module)
            return module.crc32c
    import crc32c

    return crc32c.crc32c


crc32c_of = _load_crc32c()

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes not counted in batchLength
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD  # 49: a batchLength below this cannot hold a header
MAGIC = 2

BASE_OFFSET = struct.Struct(">q")  # at 0
BATCH_LENGTH = struct.Struct(">i")  # at 8
PARTITION_LEADER_EPOCH = struct.Struct(">i")  # at 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21  # first byte covered by the CRC
PATCHED_HEADER_BYTES = 16  # baseOffset, batchLength, partitionLeaderEpoch: what the leader patches

COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG_MASK = 0x10
CONTROL_FLAG_MASK = 0x20
DELETE_HORIZON_FLAG_MASK = 0x40

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

CODEC_NAMES = ("none", "gzip", "snappy", "lz4", "zstd")


class BatchHeader(NamedTuple):
    """The 61-byte header of one v2 batch, field for field."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size_in_bytes(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression_codec(self) -> int:
        return self.attributes & COMPRESSION_CODEC_MASK

    @property
    def compression_name(self) -> str:
        codec = self.compression_codec
        return CODEC_NAMES[codec] if codec < len(CODEC_NAMES) else f"unknown({codec})"

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_MASK)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_FLAG_MASK)

    @property
    def last_sequence(self) -> int:
        """The sequence of the last record, wrapping at int32 as Kafka's DefaultRecordBatch does."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


def read_header(buf, position: int = 0) -> BatchHeader:
    """Unpack the header at `position`. The caller checks that 61 bytes are there."""
    return BatchHeader._make(HEADER.unpack_from(buf, position))


def compute_crc(buf, position: int, size_in_bytes: int) -> int:
    """CRC-32C of the batch at `position` as stored in its crc field (attributes to the end)."""
    start = position + ATTRIBUTES_OFFSET
    return crc32c_of(memoryview(buf)[start:position + size_in_bytes])


def patch_base_offset(buf: bytearray | memoryview, position: int, base_offset: int) -> None:
    """Assign offsets: write baseOffset in place. Outside the CRC, so the CRC stays valid."""
    BASE_OFFSET.pack_into(buf, position, base_offset)


def patch_partition_leader_epoch(buf: bytearray | memoryview, position: int, epoch: int) -> None:
    """Stamp the leader epoch in place. Outside the CRC, so the CRC stays valid."""
    PARTITION_LEADER_EPOCH.pack_into(buf, position + 12, epoch)
