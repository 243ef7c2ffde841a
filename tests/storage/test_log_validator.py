"""log_validator: every way a produced batch can be refused, with Kafka's error class, and
nothing written to the log when it is."""

from __future__ import annotations

import struct

import pytest

from logbroker.clock import ManualClock
from logbroker.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    MessageTooLargeError,
    RecordListTooLargeError,
)
from logbroker.records.batch import ATTRIBUTES_OFFSET, CRC_OFFSET, compute_crc
from logbroker.records.builder import build_batch
from logbroker.storage.log import Log
from logbroker.storage.log_config import LogConfig
from logbroker.storage.log_validator import iter_replicated_batches, validate_batch

NOW = 1_700_000_000_000
CONFIG = LogConfig.defaults()


def batch(n: int = 3, *, value: bytes = b"value", **kwargs) -> bytearray:
    kwargs.setdefault("now_ms", NOW)
    return bytearray(build_batch([(b"key", value)] * n, **kwargs))


def refix_crc(buf: bytearray) -> bytearray:
    struct.pack_into(">I", buf, CRC_OFFSET, compute_crc(buf, 0, len(buf)))
    return buf


def patched(buf: bytearray, fmt: str, offset: int, value: int) -> bytearray:
    struct.pack_into(fmt, buf, offset, value)
    return refix_crc(buf)


def test_valid_batch_returns_its_header():
    header = validate_batch(batch(3), config=CONFIG, now_ms=NOW)
    assert header.records_count == 3
    assert header.last_offset_delta == 2
    assert header.magic == 2


@pytest.mark.parametrize("size", [0, 5, 11, 30, 60])
def test_too_short_buffer_is_invalid_record(size):
    with pytest.raises(InvalidRecordError):
        validate_batch(batch()[:size] if size >= 12 else bytes(size), config=CONFIG, now_ms=NOW)


def test_truncated_batch_is_invalid_record():
    buf = batch()
    with pytest.raises(InvalidRecordError):
        validate_batch(buf[:-1], config=CONFIG, now_ms=NOW)


def test_two_batches_are_invalid_record():
    with pytest.raises(InvalidRecordError, match="exactly one"):
        validate_batch(batch() + batch(), config=CONFIG, now_ms=NOW)


def test_trailing_garbage_is_invalid_record():
    with pytest.raises(InvalidRecordError):
        validate_batch(batch() + b"\x00\x01", config=CONFIG, now_ms=NOW)


def test_batch_length_below_header_is_corrupt():
    buf = batch()
    struct.pack_into(">i", buf, 8, 20)
    with pytest.raises(CorruptRecordError):
        validate_batch(buf, config=CONFIG, now_ms=NOW)


@pytest.mark.parametrize("magic", [3, 7, -1])
def test_unknown_magic_is_corrupt(magic):
    buf = batch()
    struct.pack_into(">b", buf, 16, magic)
    with pytest.raises(CorruptRecordError):
        validate_batch(buf, config=CONFIG, now_ms=NOW)


@pytest.mark.parametrize("magic", [0, 1])
def test_old_magic_from_a_producer_is_invalid_record(magic):
    """Produce v3+ may carry only magic 2; Kafka answers INVALID_RECORD (87) for older batches."""
    buf = batch()
    struct.pack_into(">b", buf, 16, magic)
    with pytest.raises(InvalidRecordError):
        validate_batch(buf, config=CONFIG, now_ms=NOW)


def test_bad_crc_is_corrupt_message():
    buf = batch()
    buf[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="crc"):
        validate_batch(buf, config=CONFIG, now_ms=NOW)


def test_base_offset_other_than_zero_from_client_is_invalid_record():
    buf = batch(base_offset=5)
    with pytest.raises(InvalidRecordError, match="baseOffset"):
        validate_batch(buf, config=CONFIG, now_ms=NOW)
    validate_batch(buf, config=CONFIG, now_ms=NOW, is_from_client=False)


def test_batch_over_max_message_bytes_is_message_too_large():
    buf = batch(value=b"x" * 500)
    config = CONFIG.with_overrides({"max.message.bytes": len(buf) - 1})
    with pytest.raises(MessageTooLargeError):
        validate_batch(buf, config=config, now_ms=NOW)
    validate_batch(buf, config=CONFIG.with_overrides({"max.message.bytes": len(buf)}), now_ms=NOW)


def test_size_is_checked_before_crc_as_kafka_does():
    buf = batch(value=b"x" * 500)
    buf[-1] ^= 0xFF
    with pytest.raises(MessageTooLargeError):
        validate_batch(buf, config=CONFIG.with_overrides({"max.message.bytes": 100}), now_ms=NOW)


def test_batch_over_segment_bytes_is_record_list_too_large():
    buf = batch(value=b"x" * 500)
    config = CONFIG.with_overrides({"segment.bytes": len(buf) - 1})
    with pytest.raises(RecordListTooLargeError):
        validate_batch(buf, config=config, now_ms=NOW)


def test_count_not_matching_last_offset_delta_is_invalid_record():
    with pytest.raises(InvalidRecordError, match="Inconsistent"):
        validate_batch(patched(batch(3), ">i", 57, 4), config=CONFIG, now_ms=NOW)


def test_zero_count_is_invalid_record():
    buf = patched(batch(1), ">i", 57, 0)
    with pytest.raises(InvalidRecordError):
        validate_batch(buf, config=CONFIG, now_ms=NOW)


def test_negative_last_offset_delta_is_invalid_record():
    with pytest.raises(InvalidRecordError, match="offset range"):
        validate_batch(patched(batch(1), ">i", 23, -1), config=CONFIG, now_ms=NOW)


def test_control_batch_from_client_is_invalid_record():
    buf = batch(control=True, producer_id=1, producer_epoch=0, base_sequence=0)
    with pytest.raises(InvalidRecordError, match="control"):
        validate_batch(buf, config=CONFIG, now_ms=NOW)
    validate_batch(buf, config=CONFIG, now_ms=NOW, is_from_client=False)


def test_producer_id_without_sequence_is_invalid_record():
    buf = batch(producer_id=7, producer_epoch=0, base_sequence=-1)
    with pytest.raises(InvalidRecordError, match="sequence"):
        validate_batch(buf, config=CONFIG, now_ms=NOW)
    validate_batch(batch(producer_id=7, producer_epoch=0, base_sequence=0), config=CONFIG, now_ms=NOW)


def test_timestamp_too_old_is_invalid_timestamp():
    config = CONFIG.with_overrides({"message.timestamp.before.max.ms": 1000})
    validate_batch(batch(now_ms=NOW - 1000), config=config, now_ms=NOW)
    with pytest.raises(InvalidTimestampError):
        validate_batch(batch(now_ms=NOW - 1001), config=config, now_ms=NOW)


def test_timestamp_too_far_in_future_is_invalid_timestamp():
    config = CONFIG.with_overrides({"message.timestamp.after.max.ms": 1000})
    validate_batch(batch(now_ms=NOW + 1000), config=config, now_ms=NOW)
    with pytest.raises(InvalidTimestampError):
        validate_batch(batch(now_ms=NOW + 1001), config=config, now_ms=NOW)


def test_deprecated_difference_applies_when_before_and_after_are_unset():
    config = CONFIG.with_overrides({"message.timestamp.difference.max.ms": 10})
    with pytest.raises(InvalidTimestampError):
        validate_batch(batch(now_ms=NOW - 11), config=config, now_ms=NOW)
    with pytest.raises(InvalidTimestampError):
        validate_batch(batch(now_ms=NOW + 11), config=config, now_ms=NOW)


def test_no_timestamp_is_accepted_whatever_the_bounds():
    config = CONFIG.with_overrides({"message.timestamp.difference.max.ms": 0})
    validate_batch(batch(base_timestamp=-1, now_ms=-1), config=config, now_ms=NOW)


def test_timestamps_are_not_checked_for_log_append_time_topics():
    config = CONFIG.with_overrides({"message.timestamp.difference.max.ms": 10,
                                    "message.timestamp.type": "LogAppendTime"})
    validate_batch(batch(now_ms=0), config=config, now_ms=NOW)


def test_producer_set_log_append_time_is_invalid_timestamp():
    with pytest.raises(InvalidTimestampError):
        validate_batch(batch(log_append_time=True), config=CONFIG, now_ms=NOW)


def test_null_key_on_compacted_topic_is_invalid_record():
    config = CONFIG.with_overrides({"cleanup.policy": "compact"})
    buf = bytearray(build_batch([(b"k", b"v"), (None, b"v")], now_ms=NOW))
    with pytest.raises(InvalidRecordError, match="without key"):
        validate_batch(buf, config=config, now_ms=NOW)
    validate_batch(buf, config=CONFIG, now_ms=NOW)


def test_null_key_in_compressed_batch_on_compacted_topic_is_refused():
    config = CONFIG.with_overrides({"cleanup.policy": "compact,delete"})
    buf = bytearray(build_batch([(None, b"v" * 100)], compression="gzip", now_ms=NOW))
    with pytest.raises(InvalidRecordError):
        validate_batch(buf, config=config, now_ms=NOW)


def test_record_errors_name_every_keyless_record_of_a_compacted_topic():
    config = CONFIG.with_overrides({"cleanup.policy": "compact"})
    buf = bytearray(build_batch([(None if i in (0, 3) else b"k", b"v") for i in range(5)],
                                compression="lz4", now_ms=NOW))
    with pytest.raises(InvalidRecordError) as info:
        validate_batch(buf, config=config, now_ms=NOW, topic_partition="t-0")
    assert info.value.record_errors == (
        (0, "Compacted topic cannot accept message without key in topic partition t-0"),
        (3, "Compacted topic cannot accept message without key in topic partition t-0"))
    assert str(info.value).startswith("One or more records have been rejected due to 2 record "
                                      "errors in total, and only showing the first three errors at "
                                      "most: [RecordError(batchIndex=0, message='Compacted topic")


def test_record_errors_name_the_records_with_timestamps_out_of_range():
    config = CONFIG.with_overrides({"message.timestamp.after.max.ms": "1000"})
    records = [(b"k", b"v", None, NOW + (60_000 if i in (1, 2) else 0)) for i in range(4)]
    with pytest.raises(InvalidTimestampError) as info:
        validate_batch(bytearray(build_batch(records, now_ms=NOW)), config=config, now_ms=NOW)
    assert [index for index, _ in info.value.record_errors] == [1, 2]
    assert info.value.record_errors[0][1] == (
        f"Timestamp {NOW + 60_000} of message with offset 1 is out of range. The timestamp should "
        f"be within [{NOW - (2**63 - 1)}, {NOW + 1000}]")
    assert str(info.value) == "One or more records have been rejected due to invalid timestamp"


def test_a_bad_timestamp_makes_a_keyless_batch_invalid_timestamp():
    config = CONFIG.with_overrides({"cleanup.policy": "compact", "message.timestamp.after.max.ms": "1000"})
    records = [(None, b"v", None, NOW), (b"k", b"v", None, NOW + 60_000)]
    with pytest.raises(InvalidTimestampError) as info:
        validate_batch(bytearray(build_batch(records, now_ms=NOW)), config=config, now_ms=NOW)
    assert [index for index, _ in info.value.record_errors] == [0, 1]


def test_a_record_that_does_not_decode_is_named():
    config = CONFIG.with_overrides({"cleanup.policy": "compact"})
    buf = bytearray(build_batch([(b"k", b"v"), (b"k", b"v"), (b"k", b"v")], now_ms=NOW))
    struct.pack_into(">i", buf, 57, 4)  # one more record than the batch holds
    struct.pack_into(">i", buf, 23, 3)  # lastOffsetDelta, to match
    with pytest.raises(InvalidRecordError) as info:
        validate_batch(refix_crc(buf), config=config, now_ms=NOW, topic_partition="t-0")
    [(index, message)] = info.value.record_errors
    assert index == 3 and message.startswith("Found invalid record in topic partition t-0")


def test_validate_batch_does_not_change_the_buffer():
    buf = batch()
    before = bytes(buf)
    validate_batch(buf, config=CONFIG, now_ms=NOW)
    assert bytes(buf) == before


# --- through the log: nothing is written when a batch is refused ---------------------------


REFUSED = [
    (lambda: batch() + batch(), {}, InvalidRecordError),
    (lambda: batch()[:-3], {}, InvalidRecordError),
    (lambda: bytearray(batch()[:40]), {}, InvalidRecordError),
    (lambda: patched(batch(), ">b", 16, 1), {}, InvalidRecordError),
    (lambda: patched(batch(), ">b", 16, 5), {}, CorruptRecordError),
    (lambda: bytearray(batch()[:-1] + b"\x7f"), {}, CorruptRecordError),
    (lambda: batch(value=b"x" * 300), {"max.message.bytes": 200}, MessageTooLargeError),
    (lambda: batch(value=b"x" * 300), {"segment.bytes": 200}, RecordListTooLargeError),
    (lambda: patched(batch(2), ">i", 57, 3), {}, InvalidRecordError),
    (lambda: batch(control=True), {}, InvalidRecordError),
    (lambda: batch(producer_id=3, producer_epoch=0), {}, InvalidRecordError),
    (lambda: batch(now_ms=NOW - 5000), {"message.timestamp.before.max.ms": 10}, InvalidTimestampError),
    (lambda: batch(now_ms=NOW + 5000), {"message.timestamp.after.max.ms": 10}, InvalidTimestampError),
    (lambda: bytearray(build_batch([(None, b"v")], now_ms=NOW)), {"cleanup.policy": "compact"},
     InvalidRecordError),
]


@pytest.mark.parametrize("make, overrides, error", REFUSED)
def test_refused_batch_leaves_the_log_untouched(tmp_path, make, overrides, error):
    clock = ManualClock(NOW)
    log = Log.open(tmp_path / "t-0", CONFIG.with_overrides(overrides), clock=clock)
    log.append_as_leader(batch(), leader_epoch=0)
    size, end = log.size_in_bytes, log.log_end_offset
    with pytest.raises(error):
        log.append_as_leader(make(), leader_epoch=0)
    assert (log.size_in_bytes, log.log_end_offset) == (size, end)
    assert (tmp_path / "t-0" / "00000000000000000000.log").stat().st_size == size
    log.close()


# --- follower batches ---------------------------------------------------------------------


def test_replicated_batches_stop_at_a_partial_tail():
    data = batch(2, base_offset=0) + batch(3, base_offset=2)
    full = list(iter_replicated_batches(data))
    assert [h.base_offset for _, h in full] == [0, 2]
    cut = list(iter_replicated_batches(data[:-5]))
    assert [h.base_offset for _, h in cut] == [0]


def test_replicated_batch_with_bad_crc_is_corrupt():
    data = batch(2) + batch(3, base_offset=2)
    data[ATTRIBUTES_OFFSET + 3] ^= 0x01
    with pytest.raises(CorruptRecordError):
        list(iter_replicated_batches(data))


def legacy_message(magic: int, key: bytes | None, value: bytes) -> bytes:
    """One magic-0/1 message (offset, size, crc, magic, attributes, [timestamp], key, value)."""
    body = struct.pack(">bb", magic, 0) + (struct.pack(">q", NOW) if magic == 1 else b"")
    body += struct.pack(">i", -1) if key is None else struct.pack(">i", len(key)) + key
    body += struct.pack(">i", len(value)) + value
    import zlib
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", 0, len(message)) + message


@pytest.mark.parametrize("magic", [0, 1])
def test_small_old_message_set_from_a_producer_is_invalid_record_not_corrupt(magic):
    """Shorter than a v2 batch header: Kafka reads the magic first (INVALID_RECORD, 87)."""
    buf = legacy_message(magic, None, b"v")
    assert len(buf) - 12 < 49
    with pytest.raises(InvalidRecordError):
        validate_batch(buf, config=CONFIG, now_ms=NOW)


def test_size_below_a_v0_message_is_corrupt():
    buf = bytearray(legacy_message(0, None, b""))
    struct.pack_into(">i", buf, 8, 13)
    with pytest.raises(CorruptRecordError):
        validate_batch(bytes(buf[:25]), config=CONFIG, now_ms=NOW)
