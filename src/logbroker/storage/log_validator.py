"""Validation of record batches before they are appended (Kafka's LogValidator and
UnifiedLog.analyzeAndValidateRecords, header-only).

The produce path checks one batch from its 61-byte header (architecture.md §1): framing, magic, size
limits, CRC-32C, offsets and count, control and producer fields, timestamps. Records are decoded
only for a compacted topic, which refuses null keys, and for a batch whose header timestamps are
out of range, to name the records at fault. Nothing here writes or changes the buffer.

Record-level errors (KIP-467, Kafka's RecordValidationException): when the records are decoded,
every record at fault is named by its index in the batch — a null key on a compacted topic, a
timestamp out of range, a record that does not decode — and the error raised carries them as
`record_errors`, which a Produce v8+ answer lists. The whole batch is still refused (Kafka
appends nothing either); clients fail those records and may re-send the others.

Which error a client sees, as Kafka (in the order Kafka checks):

    no complete batch, bytes after the batch    INVALID_RECORD (87)
    size below a v0 message (14), magic > 2,
    magic 2 with batchLength below its header   CORRUPT_MESSAGE (2)
    magic 0 or 1 (any size from 14)             INVALID_RECORD in a Produce (v3+ carries
                                                only v2), UNSUPPORTED_FOR_MESSAGE_FORMAT (43)
                                                from a leader
    baseOffset != 0 from a client               INVALID_RECORD
    size > max.message.bytes                    MESSAGE_TOO_LARGE (10)
    CRC-32C mismatch                            CORRUPT_MESSAGE
    size > segment.bytes                        RECORD_LIST_TOO_LARGE (18)
    count != lastOffsetDelta + 1, count <= 0,
    control batch, producer id without sequence,
    null key on a compacted topic               INVALID_RECORD
    timestamp out of range, LogAppendTime set
    by the producer                             INVALID_TIMESTAMP (32)

Pure functions of the bytes and the config: no I/O, safe on the event loop.
"""

from __future__ import annotations

from collections.abc import Iterator

from logbroker.errors import (
    CorruptRecordError,
    KafkaError,
    InvalidRecordError,
    InvalidTimestampError,
    MessageTooLargeError,
    RecordListTooLargeError,
    UnsupportedForMessageFormatError,
)
from logbroker.records.batch import (
    BATCH_LENGTH,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    MAGIC_OFFSET,
    MIN_BATCH_LENGTH,
    NO_TIMESTAMP,
    BatchHeader,
    compute_crc,
    read_header,
)
from logbroker.records.compression import decompress
from logbroker.records.record import Record, decode_record
from logbroker.storage.log_config import LogConfig

# Kafka's LegacyRecord.RECORD_OVERHEAD_V0: crc, magic, attributes, key and value lengths.
LEGACY_RECORD_OVERHEAD_V0 = 14


def _check_framing(view: memoryview, position: int) -> int:
    """The size of the batch at `position`, after Kafka's checks on its length and magic.

    Raises CorruptRecordError for an impossible length or magic, returns -1 when fewer bytes
    remain than the batch needs (a torn tail: no batch here).
    """
    remaining = len(view) - position
    if remaining < LOG_OVERHEAD:
        return -1
    (length,) = BATCH_LENGTH.unpack_from(view, position + 8)
    # Kafka's ByteBufferLogInputStream: only a size below the smallest (v0) message is corrupt
    # before the magic is read, so a small magic-0/1 message set is an old format, not corrupt.
    if length < LEGACY_RECORD_OVERHEAD_V0:
        raise CorruptRecordError(
            f"Record size {length} is less than the minimum record overhead "
            f"({LEGACY_RECORD_OVERHEAD_V0})")
    if remaining <= MAGIC_OFFSET:
        return -1
    magic = view[position + MAGIC_OFFSET]
    if magic > 127:
        magic -= 256
    if magic < 0 or magic > MAGIC:
        raise CorruptRecordError(f"Invalid magic found in record: {magic}")
    if magic != MAGIC:
        raise UnsupportedForMessageFormatError(
            f"Record batch has magic {magic}; logbroker accepts only magic {MAGIC} (v2) batches "
            f"(Kafka clients since 0.11 send them)")
    if length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(
            f"Record batch size {length} is less than the minimum v2 batch overhead "
            f"({MIN_BATCH_LENGTH})")
    size = length + LOG_OVERHEAD
    return size if size <= remaining else -1


def validate_batch(buf, *, config: LogConfig, now_ms: int, is_from_client: bool = True,
                   topic_partition: object = None) -> BatchHeader:
    """Check that `buf` is exactly one valid v2 batch for a topic with `config`; return its
    header. Raises the KafkaError listed in the module docstring, with `record_errors` when
    records were decoded and some failed (`topic_partition` names the partition in them).

    `is_from_client=False` (the broker's own coordinators) skips the checks that only make sense
    for producers: baseOffset 0, the record count, control batches, producer sequences and the
    LogAppendTime attribute. Header-only unless the topic is compacted or a header timestamp is
    out of range.
    """
    view = memoryview(buf)
    try:
        size = _check_framing(view, 0)
    except UnsupportedForMessageFormatError as exc:
        # Produce v3+ carries only magic 2: Kafka answers INVALID_RECORD for anything older.
        raise InvalidRecordError(str(exc)) from None
    if size < 0:
        raise InvalidRecordError(
            f"Produce request must contain exactly one complete record batch per partition, got "
            f"{len(view)} bytes that do not hold one")
    if size != len(view):
        raise InvalidRecordError(
            f"Produce request must contain exactly one record batch per partition, got "
            f"{len(view) - size} bytes after a batch of {size} bytes")
    header = read_header(view, 0)
    if is_from_client and header.base_offset != 0:
        raise InvalidRecordError(
            f"The baseOffset of the record batch should be 0, but it is {header.base_offset}")
    if size > config.max_message_bytes:
        raise MessageTooLargeError(
            f"The record batch size is {size} bytes which exceeds the maximum configured value "
            f"of {config.max_message_bytes} (max.message.bytes)")
    computed = compute_crc(view, 0, size)
    if computed != header.crc:
        raise CorruptRecordError(
            f"Record is corrupt (stored crc = {header.crc}, computed crc = {computed})")
    if size > config.segment_bytes:
        raise RecordListTooLargeError(
            f"Message batch size is {size} bytes which exceeds the maximum configured segment "
            f"size of {config.segment_bytes} (segment.bytes)")
    if is_from_client:
        _check_client_fields(header)
    timestamp_error = _check_timestamps(header, config, now_ms, is_from_client)
    check_keys = config.compact and not header.is_control
    if check_keys or timestamp_error is not None:
        _check_records(view, header, check_keys=check_keys,
                       time_range=None if timestamp_error is None else _time_range(config, now_ms),
                       topic_partition=topic_partition)
    if timestamp_error is not None:
        raise timestamp_error  # the header's timestamps are out of range, none of the records'
    return header


def _check_client_fields(header: BatchHeader) -> None:
    count_from_offsets = header.last_offset_delta + 1
    if count_from_offsets <= 0:
        raise InvalidRecordError(
            f"Batch has an invalid offset range: [{header.base_offset}, {header.last_offset}]")
    if header.records_count <= 0:
        raise InvalidRecordError(f"Invalid reported count for record batch: {header.records_count}")
    if count_from_offsets != header.records_count:
        raise InvalidRecordError(
            f"Inconsistent batch offset range [{header.base_offset}, {header.last_offset}] and "
            f"count of records {header.records_count}")
    if header.is_control:
        raise InvalidRecordError("Clients are not allowed to write control records")
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise InvalidRecordError(
            f"Invalid sequence number {header.base_sequence} in record batch with producerId "
            f"{header.producer_id}")


def _time_range(config: LogConfig, now_ms: int) -> tuple[int, int]:
    return now_ms - config.timestamp_before_max_ms, now_ms + config.timestamp_after_max_ms


def _check_timestamps(header: BatchHeader, config: LogConfig, now_ms: int,
                      is_from_client: bool) -> InvalidTimestampError | None:
    """Kafka checks every record's timestamp; from the header, baseTimestamp stands for the
    smallest and maxTimestamp for the largest (for batches built by Kafka's clients the first
    record's timestamp is the base, and later records rarely go back in time). Returns the error
    for a header out of range, for `_check_records` to name the records at fault."""
    if header.is_log_append_time:
        if is_from_client:
            raise InvalidTimestampError(
                "Invalid timestamp type in record batch: producers must not set the timestamp "
                "type to LogAppendTime")
        return None
    if config.log_append_time:
        return None  # the broker stamps its own time
    low, high = now_ms - config.timestamp_before_max_ms, now_ms + config.timestamp_after_max_ms
    for ts in (header.base_timestamp, header.max_timestamp):
        if ts != NO_TIMESTAMP and (ts < low or ts > high):
            return InvalidTimestampError(
                f"Timestamp {ts} of message with offset {header.base_offset} is out of range. "
                f"The timestamp should be within [{low}, {high}]")
    return None


def _iter_records(data: bytes, header: BatchHeader) -> Iterator[tuple[Record, int]]:
    """The batch's records one by one, each with the position after it, so that the one that
    does not decode can be named."""
    position = 0
    for _ in range(header.records_count):
        record, position = decode_record(data, position, base_offset=header.base_offset,
                                         base_timestamp=header.base_timestamp,
                                         base_sequence=header.base_sequence)
        yield record, position


def _check_records(view: memoryview, header: BatchHeader, *, check_keys: bool,
                   time_range: tuple[int, int] | None, topic_partition: object) -> None:
    """Decode every record and raise, as Kafka's LogValidator, one error naming all the records
    at fault: INVALID_TIMESTAMP when any timestamp is out of range, else INVALID_RECORD."""
    data = view[HEADER_SIZE:header.size_in_bytes]
    if header.compression_codec:
        try:
            data = decompress(header.compression_codec, data)
        except CorruptRecordError as exc:
            raise InvalidRecordError(
                f"Found invalid compressed records in topic partition {topic_partition}: {exc}") from None
    data = bytes(data)
    record_errors: list[tuple[int, str]] = []
    bad_timestamp = False
    decoded = end = 0
    try:
        for record, end in _iter_records(data, header):
            if check_keys and record.key is None:
                record_errors.append((decoded, f"Compacted topic cannot accept message without key "
                                               f"in topic partition {topic_partition}"))
            elif (time_range is not None and record.timestamp != NO_TIMESTAMP
                  and not time_range[0] <= record.timestamp <= time_range[1]):
                bad_timestamp = True
                record_errors.append((decoded, f"Timestamp {record.timestamp} of message with offset "
                                               f"{record.offset} is out of range. The timestamp should "
                                               f"be within [{time_range[0]}, {time_range[1]}]"))
            decoded += 1
    except CorruptRecordError as exc:
        record_errors.append((decoded, f"Found invalid record in topic partition {topic_partition}: {exc}"))
    else:
        if end != len(data):
            raise InvalidRecordError(
                f"Record batch in topic partition {topic_partition} declares {header.records_count} "
                f"records but has bytes after them")
    if not record_errors:
        return
    if bad_timestamp:
        error: KafkaError = InvalidTimestampError(
            "One or more records have been rejected due to invalid timestamp")
    else:
        shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in record_errors[:3])
        error = InvalidRecordError(
            f"One or more records have been rejected due to {len(record_errors)} record errors in "
            f"total, and only showing the first three errors at most: [{shown}]")
    error.record_errors = tuple(record_errors)
    raise error


def iter_replicated_batches(buf) -> Iterator[tuple[int, BatchHeader]]:
    """`(position, header)` of each complete batch a follower fetched, CRC checked.

    Stops quietly at a torn tail (a fetch response cut at max_bytes), as Kafka's follower does;
    raises CorruptRecordError for an impossible header or a bad CRC, and
    UnsupportedForMessageFormatError for an old magic. Sizes are not checked against
    max.message.bytes: the leader accepted the batch already (Kafka's ignoreRecordSize).
    """
    view = memoryview(buf)
    position = 0
    while True:
        size = _check_framing(view, position)
        if size < 0:
            return
        header = read_header(view, position)
        computed = compute_crc(view, position, size)
        if computed != header.crc:
            raise CorruptRecordError(
                f"Record is corrupt (stored crc = {header.crc}, computed crc = {computed}) "
                f"in the batch at offset {header.base_offset}")
        yield position, header
        position += size
