"""Reading and writing `__consumer_offsets`: the group coordinator's durable state.

Writes go through ReplicaManager.append_records with acks=-1 (Kafka's offsets.commit.required.acks
default) and Kafka's offsets.commit.timeout.ms, like a producer's, so a commit is answered only
once it is in the log and on every in-sync replica (in a cluster: once the high watermark passes
it). Errors are mapped as Kafka's GroupMetadataManager maps them, so clients retry what is
retriable: a partition that is not here or lacks replicas is COORDINATOR_NOT_AVAILABLE, one this
broker no longer leads NOT_COORDINATOR; an oversized batch is INVALID_COMMIT_OFFSET_SIZE for
offsets; a timeout stays REQUEST_TIMED_OUT for offsets and is REBALANCE_IN_PROGRESS for group
metadata (the members rejoin and the leader's assignment is stored again).

Loading (`replay`) walks a partition's log from its start to a given end (the log end offset: a
new leader's log is the truth, including what its followers have not yet copied), record by
record, and yields each (key, value) in offset order — later records of a key win, a null value
deletes. It blocks on disk and may run in a worker thread (Log reads take the log's lock).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from logbroker.errors import (
    CoordinatorNotAvailableError,
    InvalidCommitOffsetSizeError,
    KafkaError,
    NotCoordinatorError,
    RebalanceInProgressError,
    UnknownServerError,
)
from logbroker.records.builder import build_batch
from logbroker.records.control import EndTransactionMarker
from logbroker.records.record_batch import RecordBatch, iter_batches
from logbroker.storage.log import Log

COMMIT_TIMEOUT_MS = 5000  # Kafka's offsets.commit.timeout.ms
LOAD_BUFFER_BYTES = 5 * 1024 * 1024  # Kafka's offsets.load.buffer.size

_UNAVAILABLE = {"UNKNOWN_TOPIC_OR_PARTITION", "NOT_ENOUGH_REPLICAS", "NOT_ENOUGH_REPLICAS_AFTER_APPEND"}
_NOT_COORDINATOR = {"NOT_LEADER_OR_FOLLOWER", "KAFKA_STORAGE_ERROR"}
_TOO_LARGE = {"MESSAGE_TOO_LARGE", "RECORD_LIST_TOO_LARGE", "INVALID_FETCH_SIZE"}


def map_append_error(error: KafkaError, *, for_offsets: bool) -> KafkaError:
    """The error a client gets for a failed append of offsets (`for_offsets`) or group metadata."""
    what = "offsets" if for_offsets else "group metadata"
    if error.name in _UNAVAILABLE:
        return CoordinatorNotAvailableError(f"Storing {what} in __consumer_offsets failed with {error.name}; retry")
    if error.name in _NOT_COORDINATOR:
        return NotCoordinatorError(f"Storing {what} failed with {error.name}: find the coordinator again")
    if error.name in _TOO_LARGE:
        if for_offsets:
            return InvalidCommitOffsetSizeError(f"Storing offsets failed with {error.name}: commit fewer at once")
        return UnknownServerError(f"Storing group metadata failed with {error.name}")
    if error.name == "REQUEST_TIMED_OUT" and not for_offsets:
        return RebalanceInProgressError(f"Storing group metadata timed out: {error}")
    return error


def build_records(entries: list[tuple[bytes, bytes | None]], now_ms: int) -> bytearray:
    """One uncompressed v2 batch of keyed records (a None value is a tombstone)."""
    return bytearray(build_batch([(key, value, (), now_ms) for key, value in entries], now_ms=now_ms))


def replay(log: Log, end_offset: int, *, buffer_bytes: int = LOAD_BUFFER_BYTES
           ) -> Iterator[tuple[bytes, bytes | None]]:
    """Every (key, value) of `log` below `end_offset`, in offset order, read `buffer_bytes` at a
    time. Control batches and keyless records (never written by a coordinator) are skipped."""
    for key, value, _producer_id, marker in replay_transactional(log, end_offset, buffer_bytes=buffer_bytes):
        if marker is None:
            yield key, value


def replay_transactional(log: Log, end_offset: int, *, buffer_bytes: int = LOAD_BUFFER_BYTES
                         ) -> Iterator[tuple[bytes | None, bytes | None, int, bool | None]]:
    """Like `replay`, with what transactions need: (key, value, producer id, None) per record,
    the producer id -1 unless the record's batch is transactional; and (None, None, producer id,
    commit) for each transaction marker."""
    offset = log.log_start_offset
    while offset < end_offset:
        info = log.read(offset, max_bytes=buffer_bytes, max_offset=end_offset, min_one_message=True)
        region = info.region
        if region is None:
            return
        data = os.pread(region.fd, region.size, region.position)
        next_offset = offset
        for position, header in iter_batches(data):
            next_offset = header.next_offset
            if header.is_control:
                if header.next_offset > offset:
                    for record in RecordBatch(data, position).records():
                        try:
                            marker = EndTransactionMarker.decode(record.key, record.value)
                        except KafkaError:
                            continue
                        yield None, None, header.producer_id, marker.is_commit
                continue
            producer_id = header.producer_id if header.is_transactional else -1
            for record in RecordBatch(data, position).records():
                if record.offset >= offset and record.key is not None:
                    yield record.key, record.value, producer_id, None
        if next_offset <= offset:
            return  # nothing whole came back: a torn tail below the log end cannot happen
        offset = next_offset
