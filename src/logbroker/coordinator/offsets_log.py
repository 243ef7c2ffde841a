"""Reading and writing `__consumer_offsets`: the group coordinator's durable state.

Writes go through ReplicaManager.append_records with acks=-1, like a producer's, so a commit is
answered only once it is in the log and (in a cluster) on every in-sync replica. Errors are mapped
as Kafka's GroupMetadataManager maps them, so clients retry what is retriable: a partition that
is not here or not writable is COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR; an oversized batch is
INVALID_COMMIT_OFFSET_SIZE for offsets.

Loading (`replay`) walks a partition's log from its start to the high watermark, record by
record, and yields each (key, value) in offset order — later records of a key win, a null value
deletes. It blocks on disk and runs once per partition at startup, before the listeners open.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from logbroker.errors import (
    CoordinatorNotAvailableError,
    InvalidCommitOffsetSizeError,
    KafkaError,
    NotCoordinatorError,
    UnknownServerError,
)
from logbroker.records.builder import build_batch
from logbroker.records.record_batch import RecordBatch, iter_batches
from logbroker.storage.log import Log

COMMIT_TIMEOUT_MS = 5000  # Kafka's offsets.commit.timeout.ms
LOAD_BUFFER_BYTES = 5 * 1024 * 1024  # Kafka's offsets.load.buffer.size

_UNAVAILABLE = {"UNKNOWN_TOPIC_OR_PARTITION", "NOT_ENOUGH_REPLICAS", "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
                "REQUEST_TIMED_OUT"}
_NOT_COORDINATOR = {"NOT_LEADER_OR_FOLLOWER", "KAFKA_STORAGE_ERROR"}
_TOO_LARGE = {"MESSAGE_TOO_LARGE", "RECORD_LIST_TOO_LARGE", "INVALID_FETCH_SIZE"}


def map_append_error(error: KafkaError, *, for_offsets: bool) -> KafkaError:
    if error.name in _UNAVAILABLE:
        return CoordinatorNotAvailableError(f"__consumer_offsets append failed: {error.name}")
    if error.name in _NOT_COORDINATOR:
        return NotCoordinatorError(f"__consumer_offsets append failed: {error.name}")
    if for_offsets and error.name in _TOO_LARGE:
        return InvalidCommitOffsetSizeError(f"__consumer_offsets append failed: {error.name}")
    return UnknownServerError(f"__consumer_offsets append failed: {error.name}: {error}")


def build_records(entries: list[tuple[bytes, bytes | None]], now_ms: int) -> bytearray:
    """One uncompressed v2 batch of keyed records (a None value is a tombstone)."""
    return bytearray(build_batch([(key, value, (), now_ms) for key, value in entries], now_ms=now_ms))


def replay(log: Log) -> Iterator[tuple[bytes, bytes | None]]:
    """Every (key, value) of the committed part of `log`, in offset order. Control batches and
    keyless records (never written by a coordinator) are skipped."""
    offset = log.log_start_offset
    end = log.high_watermark
    while offset < end:
        info = log.read(offset, max_bytes=LOAD_BUFFER_BYTES, max_offset=end, min_one_message=True)
        region = info.region
        if region is None:
            return
        data = os.pread(region.fd, region.size, region.position)
        next_offset = offset
        for position, header in iter_batches(data):
            next_offset = header.next_offset
            if header.is_control:
                continue
            for record in RecordBatch(data, position).records():
                if record.offset >= offset and record.key is not None:
                    yield record.key, record.value
        if next_offset <= offset:
            return  # nothing whole came back: a torn tail below the high watermark cannot happen
        offset = next_offset
