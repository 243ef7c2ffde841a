"""The record schemas of `__transaction_state`, byte for byte as Kafka writes them.

Each record key and value starts with an int16 schema version (Kafka's TransactionLogKey and
TransactionLogValue message JSONs, coordinator/transaction_metadata.py has the state codes):

- TransactionLogKey v0: transactional_id string (int16 length + UTF-8).
- TransactionLogValue v0 (what we write, as Kafka does for clients without transactions v2):
  producer_id int64, producer_epoch int16, transaction_timeout_ms int32, transaction_status int8,
  transaction_partitions nullable array (int32 count, -1 null) of {topic string, partition_ids
  int32 array}, transaction_last_update_timestamp_ms int64, transaction_start_timestamp_ms int64.
- TransactionLogValue v1 is flexible: the same fields with compact (unsigned varint length + 1)
  arrays and strings, an empty tagged-field section after each partitions entry, and tagged
  fields at the end: 0 previous_producer_id int64, 1 next_producer_id int64, 2
  client_transaction_version int16. We read it (a Kafka 4 data directory) and never write it.

A null value is a tombstone: the transactional id expired (or was removed) and compaction drops
the key later. Also here: which partition holds a transactional id — Kafka's
`Utils.abs(transactionalId.hashCode) % partitions` (offsets_schema.hash_partition, as for
groups). Pure functions, no I/O.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from logbroker.coordinator.offsets_schema import SchemaReader, UnknownSchemaError, hash_partition
from logbroker.types import TopicPartition

TRANSACTION_STATE_TOPIC = "__transaction_state"

KEY_VERSION = 0
VALUE_VERSION = 0

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_VALUE_HEAD = struct.Struct(">hqhib")  # version, producer id, epoch, timeout, status
_TIMESTAMPS = struct.Struct(">qq")


def partition_for(transactional_id: str, num_partitions: int) -> int:
    """The `__transaction_state` partition of a transactional id, as Kafka computes it."""
    return hash_partition(transactional_id, num_partitions)


@dataclass(frozen=True, slots=True)
class TransactionLogValue:
    """One stored transaction: `partitions` sorted by topic then partition."""

    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    state: int  # a TransactionState id
    partitions: tuple[TopicPartition, ...] = ()
    last_update_timestamp_ms: int = -1
    start_timestamp_ms: int = -1
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0


def _string(out: bytearray, value: str) -> None:
    data = value.encode()
    out += _I16.pack(len(data))
    out += data


def encode_key(transactional_id: str) -> bytes:
    out = bytearray(_I16.pack(KEY_VERSION))
    _string(out, transactional_id)
    return bytes(out)


def encode_value(value: TransactionLogValue) -> bytes:
    """TransactionLogValue v0."""
    out = bytearray(_VALUE_HEAD.pack(VALUE_VERSION, value.producer_id, value.producer_epoch,
                                     value.transaction_timeout_ms, value.state))
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(value.partitions):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    out += _I32.pack(len(by_topic))
    for topic, partitions in by_topic.items():
        _string(out, topic)
        out += _I32.pack(len(partitions))
        for p in partitions:
            out += _I32.pack(p)
    out += _TIMESTAMPS.pack(value.last_update_timestamp_ms, value.start_timestamp_ms)
    return bytes(out)


class _Reader(SchemaReader):
    """Adds the flexible (v1) encodings: unsigned varint lengths + 1, tagged fields."""

    __slots__ = ("flexible",)

    def __init__(self, data: bytes, *, flexible: bool = False) -> None:
        super().__init__(data)
        self.pos = 2  # past the version
        self.flexible = flexible

    def i8(self) -> int:
        return self._take(_I8)

    def uvarint(self) -> int:
        shift = result = 0
        while True:
            if self.pos >= len(self.data):
                raise ValueError("truncated varint")
            byte = self.data[self.pos]
            self.pos += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7
            if shift > 28:
                raise ValueError("varint too long")

    def length(self) -> int:
        """An array or string length; -1 for null."""
        return self.uvarint() - 1 if self.flexible else self.i32()

    def string(self) -> str:  # non-null here
        n = self.uvarint() - 1 if self.flexible else self.i16()
        if n < 0:
            raise ValueError("null string where one is required")
        text = bytes(self.data[self.pos:self.pos + n])
        if len(text) != n:
            raise ValueError("truncated string")
        self.pos += n
        return text.decode()

    def tagged_fields(self) -> dict[int, bytes]:
        if not self.flexible:
            return {}
        fields = {}
        for _ in range(self.uvarint()):
            tag, size = self.uvarint(), self.uvarint()
            fields[tag] = bytes(self.data[self.pos:self.pos + size])
            self.pos += size
        return fields


def decode_key(data: bytes) -> str:
    """The transactional id of a TransactionLogKey; UnknownSchemaError for a newer version."""
    version = _I16.unpack_from(data)[0]
    if version != KEY_VERSION:
        raise UnknownSchemaError(f"unknown TransactionLogKey version {version}")
    return _Reader(data).string()


def decode_value(data: bytes) -> TransactionLogValue:
    version = _I16.unpack_from(data)[0]
    if version not in (0, 1):
        raise UnknownSchemaError(f"unknown TransactionLogValue version {version}")
    r = _Reader(data, flexible=version >= 1)
    producer_id, producer_epoch, timeout_ms, state = r.i64(), r.i16(), r.i32(), r.i8()
    partitions = []
    count = r.length()
    for _ in range(max(count, 0)):
        topic = r.string()
        for _ in range(r.length()):
            partitions.append(TopicPartition(topic, r.i32()))
        r.tagged_fields()
    last_update_ms, start_ms = r.i64(), r.i64()
    tagged = r.tagged_fields()
    previous = _I64.unpack(tagged[0])[0] if len(tagged.get(0, b"")) == 8 else -1
    next_ = _I64.unpack(tagged[1])[0] if len(tagged.get(1, b"")) == 8 else -1
    client_version = _I16.unpack(tagged[2])[0] if len(tagged.get(2, b"")) == 2 else 0
    return TransactionLogValue(producer_id, producer_epoch, timeout_ms, state, tuple(partitions),
                               last_update_ms, start_ms, previous, next_, client_version)
