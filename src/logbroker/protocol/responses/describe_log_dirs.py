"""DescribeLogDirsResponse v1-v4 (DescribeLogDirsResponse.json), hand-encoded and hand-decoded,
with one field Kafka does not have: a tiered partition's remote log.

    throttle_time_ms int32, error_code int16 (v3+),
    results [error_code int16, log_dir string,
             topics [name string,
                     partitions [partition_index int32, partition_size int64, offset_lag int64,
                                 is_future_key bool, <tagged: REMOTE_LOG_TAG> (v2+)]],
             total_bytes int64 (v4+), usable_bytes int64 (v4+)]

Flexible from v2. Kafka has no API that carries the bytes a partition holds in the remote store
(KIP-1187 proposes adding them to DescribeLogDirs; it is under discussion, and DescribeLogDirs v5
went to log dir cordoning, KIP-1066), so logbroker carries them in a tagged field of the
partition (KIP-482), sent only for partitions this broker holds remote segment metadata of:

    REMOTE_LOG_TAG: remote_log_size_bytes int64, remote_segment_count int32,
                    remote_log_start_offset int64, remote_log_end_offset int64 (-1, -1: none),
                    tagged fields

A client reads past a tagged field it does not know (KIP-482): the Java clients' generated readers
keep it aside, kafka-python skips it, so their DescribeLogDirs answers and kafka-log-dirs' output
stay as they were; v1 (not flexible) never carries it. kio (0.6) refuses unknown tags, which is
why logbroker's own tools decode this answer here. The tag number is far above the ones Kafka
hands out (from 0, in order), so a field Kafka adds later does not take it. The sizes are Kafka's
RemoteLogSegmentMetadata.segmentSizeInBytes summed: the `.log` objects, as PartitionSize counts
the local `.log` files.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import NamedTuple

from logbroker.protocol import wire
from logbroker.protocol.responses.common import check_version, frame, topic_prefix

REMOTE_LOG_TAG = 0x4C42  # "LB"
_PARTITION = struct.Struct(">iqq?")
_REMOTE = struct.Struct(">qiqq")
_I64_I64 = struct.Struct(">qq")
_I16 = struct.Struct(">h")


class RemoteLogInfo(NamedTuple):
    """The COPY_SEGMENT_FINISHED segments of one partition: `size_bytes >= 0`; the offsets are
    -1 when `segment_count` is 0."""

    size_bytes: int
    segment_count: int
    start_offset: int
    end_offset: int


class LogDirPartition(NamedTuple):
    partition_index: int
    partition_size: int
    offset_lag: int
    is_future_key: bool
    remote: RemoteLogInfo | None = None  # v2+, tiered partitions only


class LogDirTopic(NamedTuple):
    name: str
    partitions: Sequence[LogDirPartition]


class LogDirResult(NamedTuple):
    error_code: int
    log_dir: str
    topics: Sequence[LogDirTopic]
    total_bytes: int = -1  # v4+
    usable_bytes: int = -1  # v4+


def encode_describe_log_dirs_response(version: int, correlation_id: int, *, throttle_time_ms: int,
                                      error_code: int, results: Sequence[LogDirResult]) -> list[bytes]:
    """The whole frame, as one chunk in a list (the dispatcher's ready-chunks form)."""
    check_version("DescribeLogDirs", version, 1, 4)
    flexible = version >= 2
    parts = [b"", wire.I32.pack(throttle_time_ms)]
    if version >= 3:
        parts.append(_I16.pack(error_code))
    parts.append(wire.array_length(len(results), flexible))
    for d in results:
        parts += [_I16.pack(d.error_code), wire.string(d.log_dir, flexible),
                  wire.array_length(len(d.topics), flexible)]
        for t in d.topics:
            parts.append(topic_prefix(t.name, len(t.partitions), flexible))
            for p in t.partitions:
                parts.append(_PARTITION.pack(p.partition_index, p.partition_size, p.offset_lag,
                                             p.is_future_key))
                if flexible:
                    parts.append(wire.NO_TAGGED_FIELDS if p.remote is None else wire.tagged_fields(
                        [(REMOTE_LOG_TAG, _REMOTE.pack(*p.remote) + wire.NO_TAGGED_FIELDS)]))
            if flexible:
                parts.append(wire.NO_TAGGED_FIELDS)
        if version >= 4:
            parts.append(_I64_I64.pack(d.total_bytes, d.usable_bytes))
        if flexible:
            parts.append(wire.NO_TAGGED_FIELDS)
    if flexible:
        parts.append(wire.NO_TAGGED_FIELDS)
    return [frame(parts, correlation_id, flexible)]


def decode_describe_log_dirs_response(version: int, frame_: bytes) -> tuple[int, list[LogDirResult]]:
    """(top-level error code, results) of a response frame without its size prefix (correlation
    id first). Tagged fields other than REMOTE_LOG_TAG are skipped. Raises ValueError on a frame
    that ends early."""
    check_version("DescribeLogDirs", version, 1, 4)
    reader = _Reader(frame_, 5 if version >= 2 else 4)
    reader.take(4)  # throttle time
    error_code = _I16.unpack(reader.take(2))[0] if version >= 3 else 0
    results = []
    for _ in range(reader.length()):
        dir_error = _I16.unpack(reader.take(2))[0]
        log_dir = reader.string()
        topics = []
        for _ in range(reader.length()):
            name = reader.string()
            partitions = []
            for _ in range(reader.length()):
                fields = _PARTITION.unpack(reader.take(_PARTITION.size))
                remote = reader.tags().get(REMOTE_LOG_TAG) if reader.flexible else None
                partitions.append(LogDirPartition(
                    *fields, remote=None if remote is None else RemoteLogInfo(*_REMOTE.unpack_from(remote))))
            reader.tags()
            topics.append(LogDirTopic(name, partitions))
        total, usable = _I64_I64.unpack(reader.take(16)) if version >= 4 else (-1, -1)
        reader.tags()
        results.append(LogDirResult(dir_error, log_dir, topics, total, usable))
    reader.tags()
    return error_code, results


class _Reader:
    def __init__(self, buf: bytes, pos: int) -> None:
        self.buf, self.pos = memoryview(buf), pos
        self.flexible = pos == 5

    def take(self, size: int) -> memoryview:
        if self.pos + size > len(self.buf):
            raise ValueError("DescribeLogDirs response ends early")
        chunk = self.buf[self.pos:self.pos + size]
        self.pos += size
        return chunk

    def uvarint(self) -> int:
        if self.pos >= len(self.buf):
            raise ValueError("DescribeLogDirs response ends early")
        value, self.pos = wire.read_uvarint(self.buf, self.pos)
        return value

    def length(self) -> int:
        if self.flexible:
            return max(self.uvarint() - 1, 0)
        return max(wire.I32.unpack(self.take(4))[0], 0)

    def string(self) -> str:
        size = self.uvarint() - 1 if self.flexible else _I16.unpack(self.take(2))[0]
        return bytes(self.take(max(size, 0))).decode()

    def tags(self) -> dict[int, bytes]:
        """A tagged-field section (flexible only; {} otherwise): tag → value bytes."""
        if not self.flexible:
            return {}
        found = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            found[tag] = bytes(self.take(self.uvarint()))
        return found
