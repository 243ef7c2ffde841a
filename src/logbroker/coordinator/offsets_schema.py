"""The record schemas of `__consumer_offsets`, byte for byte as Kafka writes them.

Every record key and value starts with an int16 schema version, then the fields of that version,
big-endian, strings as int16 length + UTF-8 (-1 for null), bytes as int32 length + bytes:

- OffsetCommitKey v0/v1: group string, topic string, partition int32.
- OffsetCommitValue v3 (what we write): offset int64, leader_epoch int32, metadata string,
  commit_timestamp int64. We read v0-v3 (v1 adds expire_timestamp int64 after commit_timestamp;
  v0 and v2 have no leader_epoch) — v4 is v3 plus tagged fields.
- GroupMetadataKey v2: group string.
- GroupMetadataValue v3 (what we write): protocol_type string, generation int32, protocol nullable
  string, leader nullable string, current_state_timestamp int64 (v2+), then an int32 count of
  members, each: member_id string, group_instance_id nullable string (v3+), client_id string,
  client_host string, rebalance_timeout int32 (v1+), session_timeout int32, subscription bytes,
  assignment bytes.

A null value is a tombstone: the offset (or the whole group) is deleted, and compaction later
drops the key. Kafka's kafka-console-consumer with its OffsetsMessageFormatter and
GroupMetadataMessageFormatter reads these records, and we read Kafka's.

Also here: which partition of `__consumer_offsets` holds a group, by Java's String.hashCode (the
same rule places transactional ids and share-partition keys), and the group id of any key.
Pure functions, no I/O.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

OFFSETS_TOPIC = "__consumer_offsets"

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_VALUE_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U16 = struct.Struct(">H")


def java_string_hash(text: str) -> int:
    """Java's String.hashCode: s[0]*31^(n-1) + … over UTF-16 code units, as a signed int32."""
    data = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for (unit,) in _U16.iter_unpack(data):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def hash_partition(key: str, num_partitions: int) -> int:
    """The partition of a coordinator key (group id, transactional id, share-partition key), as
    Kafka places it: `Utils.abs(key.hashCode()) % num_partitions`, where Utils.abs maps
    Integer.MIN_VALUE to 0 and is Math.abs otherwise. (Masking the sign bit instead, `& 0x7fffffff`,
    gives another partition for every negative hash.)"""
    h = java_string_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


def partition_for(group_id: str, num_partitions: int) -> int:
    """The `__consumer_offsets` partition of a group, as Kafka computes it."""
    return hash_partition(group_id, num_partitions)


def key_group(key: bytes) -> str:
    """The group id of any `__consumer_offsets` record key: every key version Kafka writes (0-16)
    is its int16 version then, first of its fields, the group id (int16-length UTF-8; keys are
    never flexible). Raises UnknownSchemaError for a key too short to hold one."""
    r = SchemaReader(key)
    r.i16()
    group = r.string()
    if group is None:
        raise UnknownSchemaError("a __consumer_offsets key with a null group id")
    return group


# -- value types ------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """A committed offset. `expire_timestamp_ms` is -1 unless the commit asked for a retention."""

    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp_ms: int = -1
    expire_timestamp_ms: int = -1


@dataclass(frozen=True, slots=True)
class MemberRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataRecord:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp_ms: int
    members: tuple[MemberRecord, ...]


# -- writing ----------------------------------------------------------------------------------
def _string(out: bytearray, value: str | None) -> None:
    if value is None:
        out += _I16.pack(-1)
        return
    data = value.encode()
    out += _I16.pack(len(data))
    out += data


def _bytes(out: bytearray, value: bytes | None) -> None:
    if value is None:
        out += _I32.pack(-1)
        return
    out += _I32.pack(len(value))
    out += value


def encode_offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    out = bytearray(_I16.pack(OFFSET_COMMIT_KEY_VERSION))
    _string(out, group)
    _string(out, topic)
    out += _I32.pack(partition)
    return bytes(out)


def encode_group_metadata_key(group: str) -> bytes:
    out = bytearray(_I16.pack(GROUP_METADATA_KEY_VERSION))
    _string(out, group)
    return bytes(out)


def encode_offset_commit_value(value: OffsetAndMetadata) -> bytes:
    out = bytearray(_I16.pack(OFFSET_COMMIT_VALUE_VERSION))
    out += _I64.pack(value.offset)
    out += _I32.pack(value.leader_epoch)
    _string(out, value.metadata or "")
    out += _I64.pack(value.commit_timestamp_ms)
    return bytes(out)


def encode_group_metadata_value(value: GroupMetadataRecord) -> bytes:
    out = bytearray(_I16.pack(GROUP_METADATA_VALUE_VERSION))
    _string(out, value.protocol_type or "")
    out += _I32.pack(value.generation)
    _string(out, value.protocol)
    _string(out, value.leader)
    out += _I64.pack(value.current_state_timestamp_ms)
    out += _I32.pack(len(value.members))
    for m in value.members:
        _string(out, m.member_id)
        _string(out, m.group_instance_id)
        _string(out, m.client_id)
        _string(out, m.client_host)
        out += _I32.pack(m.rebalance_timeout_ms)
        out += _I32.pack(m.session_timeout_ms)
        _bytes(out, m.subscription)
        _bytes(out, m.assignment)
    return bytes(out)


# -- reading ----------------------------------------------------------------------------------
class SchemaReader:
    """Reads the big-endian fields of a coordinator record, from `pos` on."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)
        self.pos = 0

    def _take(self, s: struct.Struct) -> int:
        (v,) = s.unpack_from(self.data, self.pos)
        self.pos += s.size
        return v

    def i16(self) -> int:
        return self._take(_I16)

    def i32(self) -> int:
        return self._take(_I32)

    def i64(self) -> int:
        return self._take(_I64)

    def string(self) -> str | None:
        n = self.i16()
        if n < 0:
            return None
        v = bytes(self.data[self.pos:self.pos + n]).decode()
        self.pos += n
        return v

    def bytes_(self) -> bytes | None:
        n = self.i32()
        if n < 0:
            return None
        v = bytes(self.data[self.pos:self.pos + n])
        self.pos += n
        return v


class UnknownSchemaError(ValueError):
    """A record of `__consumer_offsets` this broker cannot read (a newer Kafka's record type)."""


def decode_key(data: bytes) -> OffsetCommitKey | GroupMetadataKey:
    r = SchemaReader(data)
    version = r.i16()
    if version in (0, 1):
        return OffsetCommitKey(r.string(), r.string(), r.i32())
    if version == 2:
        return GroupMetadataKey(r.string())
    raise UnknownSchemaError(f"unknown __consumer_offsets key version {version}")


def decode_offset_commit_value(data: bytes) -> OffsetAndMetadata:
    r = SchemaReader(data)
    version = r.i16()
    if not 0 <= version <= 4:
        raise UnknownSchemaError(f"unknown OffsetCommitValue version {version}")
    offset = r.i64()
    leader_epoch = r.i32() if version >= 3 else -1
    metadata = r.string() or ""
    commit_timestamp = r.i64()
    expire_timestamp = r.i64() if version == 1 else -1
    return OffsetAndMetadata(offset, leader_epoch, metadata, commit_timestamp, expire_timestamp)


def decode_group_metadata_value(data: bytes) -> GroupMetadataRecord:
    r = SchemaReader(data)
    version = r.i16()
    if not 0 <= version <= 3:
        # v4 is flexible (compact strings); Kafka writes it only with KIP-848 groups on.
        raise UnknownSchemaError(f"unsupported GroupMetadataValue version {version}")
    protocol_type = r.string() or ""
    generation = r.i32()
    protocol = r.string()
    leader = r.string()
    current_state_timestamp = r.i64() if version >= 2 else -1
    members = []
    for _ in range(r.i32()):
        member_id = r.string()
        group_instance_id = r.string() if version >= 3 else None
        client_id = r.string()
        client_host = r.string()
        rebalance_timeout = r.i32() if version >= 1 else -1
        session_timeout = r.i32()
        if rebalance_timeout < 0:
            rebalance_timeout = session_timeout
        members.append(MemberRecord(member_id, group_instance_id, client_id, client_host,
                                    rebalance_timeout, session_timeout, r.bytes_() or b"",
                                    r.bytes_() or b""))
    return GroupMetadataRecord(protocol_type, generation, protocol, leader, current_state_timestamp,
                               tuple(members))


def subscribed_topics(subscription: bytes) -> set[str]:
    """The topics of a "consumer" protocol member's ConsumerProtocolSubscription (v0-v3 share
    their first two fields: version int16, topics [string]). Empty when it cannot be read."""
    try:
        r = SchemaReader(subscription)
        r.i16()
        return {r.string() for _ in range(r.i32())}
    except (struct.error, UnicodeDecodeError):
        return set()
