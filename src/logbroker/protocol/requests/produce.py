"""ProduceRequest v3-v12 (ProduceRequest.json), hand-decoded.

    transactional_id string?  acks int16  timeout_ms int32
    topic_data [name string, partition_data [index int32, records records?, <tags>], <tags>]
    <tags>

Flexible (compact lengths, tagged fields) from v9; v12 is v11 again. Produce is the request every
producer sends at its own rate, so it skips the general path (guard.py's walk, then kio's reader
building three dataclasses per partition): one pass over the bytes, NamedTuples out, and each
partition's records a read-only **view of the frame** rather than kio's copy — the log writes
them as they are (Log.append_as_leader patches a copy of their first 16 bytes), so a produced
batch reaches the page cache without being copied in Python. The frame's buffer is never written
again (framing.py), so the views stay valid for as long as they are held.

Same outcome as the general path for every input: what guard.py refuses is refused here with the
same words (a null in a non-nullable field, an impossible length, a truncated body), strings that
are not UTF-8 are refused as kio refuses them, and unknown tagged fields are skipped.
tests/protocol/test_produce_request.py holds the two decoders to that on fuzzed frames.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from logbroker.protocol.guard import BodyRejected
from logbroker.protocol.wire import read_uvarint, skip_tagged_fields

_I16 = struct.Struct(">h").unpack_from
_I32 = struct.Struct(">i").unpack_from
_ACKS_TIMEOUT = struct.Struct(">hi").unpack_from
_INDEX_SIZE = struct.Struct(">ii").unpack_from
_PARTITION_MIN_BYTES = {False: 8, True: 6}  # index + the shortest records + (flexible) tags
_TOPIC_MIN_BYTES = {False: 6, True: 3}
# NamedTuple(a, b) is a Python-level __new__ with keyword handling; tuple.__new__(cls, (a, b))
# builds the same object in half the time, which counts here: three are built per request.
_new = tuple.__new__


class PartitionProduceData(NamedTuple):
    index: int
    records: memoryview | None


class TopicProduceData(NamedTuple):
    name: str
    partition_data: tuple[PartitionProduceData, ...]


class ProduceRequest(NamedTuple):
    transactional_id: str | None
    acks: int
    timeout_ms: int
    topic_data: tuple[TopicProduceData, ...]


def decode_produce_request(frame: memoryview, pos: int, version: int) -> ProduceRequest:
    """The body of a Produce request of `version` (3-12) starting at `pos` of `frame` (a
    read-only memoryview). Raises BodyRejected; records are views of `frame`."""
    end = len(frame)
    try:
        if version >= 9:
            return _flexible(frame, pos, end)
        return _legacy(frame, pos, end)
    except UnicodeDecodeError as e:
        raise BodyRejected(f"a string is not UTF-8: {e}") from None
    except (struct.error, IndexError, ValueError) as e:  # ValueError: a varint over 5 bytes, a tag too long
        raise BodyRejected(f"truncated or malformed: {e}") from None


def _legacy(frame: memoryview, pos: int, end: int) -> ProduceRequest:
    (n,) = _I16(frame, pos)
    pos += 2
    if n < 0:
        if n < -1:
            raise BodyRejected(f"field ProduceRequest.transactional_id has string length {n}")
        transactional_id = None
    else:
        transactional_id = _text(frame, pos, n, end)
        pos += n
    acks, timeout_ms = _ACKS_TIMEOUT(frame, pos)
    pos += 6
    count, pos = _legacy_count(frame, pos, end, "ProduceRequest.topic_data", _TOPIC_MIN_BYTES[False])
    topics = []
    for _ in range(count):
        (n,) = _I16(frame, pos)
        pos += 2
        if n < 0:
            raise _null_or_negative("TopicProduceData.name", n, "string")
        name = _text(frame, pos, n, end)
        pos += n
        partitions_count, pos = _legacy_count(frame, pos, end, "TopicProduceData.partition_data",
                                              _PARTITION_MIN_BYTES[False])
        partitions = []
        for _ in range(partitions_count):
            index, size = _INDEX_SIZE(frame, pos)
            pos += 8
            if size < 0:
                if size < -1:
                    raise BodyRejected(f"field PartitionProduceData.records has bytes length {size}")
                partitions.append(PartitionProduceData(index, None))
                continue
            partitions.append(PartitionProduceData(index, _slice(frame, pos, size, end)))
            pos += size
        topics.append(TopicProduceData(name, tuple(partitions)))
    _check_end(pos, end)
    return ProduceRequest(transactional_id, acks, timeout_ms, tuple(topics))



def _flexible(frame: memoryview, pos: int, end: int) -> ProduceRequest:
    # Compact lengths are unsigned varints, one byte below 128 (always, for a small request), and
    # tagged-field sections are nearly always empty (one 0 byte): both are read inline here, and
    # read_uvarint / skip_tagged_fields called only for the longer forms. A call per field was
    # half of this decoder's cost on a request that arrives alone, with the caches cold.
    n = frame[pos]
    n, pos = (n, pos + 1) if n < 0x80 else read_uvarint(frame, pos)
    if n == 0:
        transactional_id = None
    else:
        transactional_id = _text(frame, pos, n - 1, end)
        pos += n - 1
    acks, timeout_ms = _ACKS_TIMEOUT(frame, pos)
    pos += 6
    count, pos = _compact_count(frame, pos, end, "ProduceRequest.topic_data", _TOPIC_MIN_BYTES[True])
    topics = []
    for _ in range(count):
        n = frame[pos]
        n, pos = (n, pos + 1) if n < 0x80 else read_uvarint(frame, pos)
        if n == 0:
            raise _null("TopicProduceData.name")
        name = _text(frame, pos, n - 1, end)
        pos += n - 1
        partitions_count, pos = _compact_count(frame, pos, end, "TopicProduceData.partition_data",
                                               _PARTITION_MIN_BYTES[True])
        partitions = []
        for _ in range(partitions_count):
            (index,) = _I32(frame, pos)
            n = frame[pos + 4]
            n, pos = (n, pos + 5) if n < 0x80 else read_uvarint(frame, pos + 4)
            if n == 0:
                partitions.append(_new(PartitionProduceData, (index, None)))
            else:
                stop = pos + n - 1
                if stop > end:
                    raise _past_end(stop, end)
                partitions.append(_new(PartitionProduceData, (index, frame[pos:stop])))
                pos = stop
            pos = pos + 1 if frame[pos] == 0 else skip_tagged_fields(frame, pos, end)
        pos = pos + 1 if frame[pos] == 0 else skip_tagged_fields(frame, pos, end)
        topics.append(_new(TopicProduceData, (name, tuple(partitions))))
    pos = pos + 1 if frame[pos] == 0 else skip_tagged_fields(frame, pos, end)
    if pos > end:
        raise _past_end(pos, end)
    return _new(ProduceRequest, (transactional_id, acks, timeout_ms, tuple(topics)))


def _legacy_count(frame, pos: int, end: int, name: str, min_size: int) -> tuple[int, int]:  # noqa: ANN001
    (count,) = _I32(frame, pos)
    pos += 4
    if count < 0:
        raise _null_or_negative(name, count, "array")
    if count * min_size > end - pos:
        raise BodyRejected(f"array {name} of {count} elements cannot fit in the {end - pos} bytes left")
    return count, pos


def _compact_count(frame, pos: int, end: int, name: str, min_size: int) -> tuple[int, int]:  # noqa: ANN001
    n = frame[pos]
    n, pos = (n, pos + 1) if n < 0x80 else read_uvarint(frame, pos)
    if n == 0:
        raise _null(name)
    count = n - 1
    if count * min_size > end - pos:
        raise BodyRejected(f"array {name} of {count} elements cannot fit in the {end - pos} bytes left")
    return count, pos


def _text(frame, pos: int, n: int, end: int) -> str:  # noqa: ANN001
    if pos + n > end:
        raise _past_end(pos + n, end)
    return str(frame[pos:pos + n], "utf-8")


def _slice(frame: memoryview, pos: int, n: int, end: int) -> memoryview:
    if pos + n > end:
        raise _past_end(pos + n, end)
    return frame[pos:pos + n]


def _check_end(pos: int, end: int) -> None:
    if pos > end:
        raise _past_end(pos, end)


def _past_end(pos: int, end: int) -> BodyRejected:
    return BodyRejected(f"runs {pos - end} bytes past the end of the frame")


def _null(name: str) -> BodyRejected:
    return BodyRejected(f"non-nullable field {name} was serialized as null")


def _null_or_negative(name: str, n: int, kind: str) -> BodyRejected:
    return _null(name) if n == -1 else BodyRejected(f"field {name} has {kind} length {n}")
