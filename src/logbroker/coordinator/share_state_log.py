"""`__share_group_state`: the records the share coordinator keeps share-partition state in.

Kafka's share coordinator schemas (share-coordinator/src/main/resources/common/message/):
the key's version says the record type — 0 ShareSnapshot (the whole state of one
share-partition), 1 ShareUpdate (a delta on top of the last snapshot) — and is followed by
GroupId (string), TopicId (uuid), Partition (int32), non-flexible. The values are flexible v0:

    ShareSnapshotValue: SnapshotEpoch uint16, StateEpoch int32, LeaderEpoch int32,
                        StartOffset int64, StateBatches [FirstOffset int64, LastOffset int64,
                        DeliveryState int8, DeliveryCount int16]
    ShareUpdateValue:   SnapshotEpoch uint16, LeaderEpoch int32, StartOffset int64,
                        StateBatches (the same)

logbroker writes only snapshots (a window is at most group.share.partition.max.record.locks
offsets, kept as runs, so a snapshot stays small) and reads both. A null value deletes the key.

Placement, as Kafka's share coordinator: the key "groupId:topicId:partition" (the topic id in
Kafka's base64 form) goes to partition Utils.abs(Java hashCode) % partitions
(offsets_schema.hash_partition). Pure functions, no I/O.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

from logbroker.coordinator.internal_topics import SHARE_STATE_TOPIC  # noqa: F401 - its users import it from here
from logbroker.coordinator.offsets_schema import hash_partition
from logbroker.coordinator.share_partition import StateBatch
from logbroker.errors import CorruptMessageError
from logbroker.metadata.model import topic_id_to_str
from logbroker.protocol import wire

SNAPSHOT_KEY_VERSION = 0
UPDATE_KEY_VERSION = 1

_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_KEY_TAIL = struct.Struct(">16si")
_HEAD = struct.Struct(">Hiiq")   # snapshot epoch, state epoch, leader epoch, start offset
_UPDATE_HEAD = struct.Struct(">Hiq")
_BATCH = struct.Struct(">qqbh")


@dataclass(frozen=True, slots=True)
class SharePartitionKey:
    group_id: str
    topic_id: uuid.UUID
    partition: int

    def coordinator_key(self) -> str:
        return f"{self.group_id}:{topic_id_to_str(self.topic_id)}:{self.partition}"


@dataclass(frozen=True, slots=True)
class ShareSnapshot:
    """The persisted state of one share-partition."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple[StateBatch, ...] = ()


@dataclass(frozen=True, slots=True)
class ShareStateSummary:
    """What ReadShareGroupStateSummary gives: the epochs and start offset, and how many offsets at
    or past the start offset are settled (acknowledged or archived); -1s for a key never
    initialized."""

    state_epoch: int = -1
    leader_epoch: int = -1
    start_offset: int = -1
    delivery_complete_count: int = -1


_SETTLED_STATES = (2, 4)  # ACKNOWLEDGED, ARCHIVED
_INT32_MAX = 2**31 - 1


def summary_of(snapshot: ShareSnapshot | None) -> ShareStateSummary:
    if snapshot is None:
        return ShareStateSummary()
    complete = sum(max(b.last_offset - max(b.first_offset, snapshot.start_offset) + 1, 0)
                   for b in snapshot.state_batches if b.state in _SETTLED_STATES)
    return ShareStateSummary(snapshot.state_epoch, snapshot.leader_epoch, snapshot.start_offset,
                             min(complete, _INT32_MAX))  # an int32 on the wire


def partition_for(key: SharePartitionKey, num_partitions: int) -> int:
    return hash_partition(key.coordinator_key(), num_partitions)


def encode_key(key: SharePartitionKey, version: int = SNAPSHOT_KEY_VERSION) -> bytes:
    return (_I16.pack(version) + wire.legacy_string(key.group_id)
            + _KEY_TAIL.pack(key.topic_id.bytes, key.partition))


def decode_key(data: bytes) -> tuple[int, SharePartitionKey]:
    """(record type, key)."""
    try:
        (version,) = _I16.unpack_from(data, 0)
        (length,) = _I16.unpack_from(data, 2)
        group_id = bytes(data[4:4 + length]).decode()
        topic_id, partition = _KEY_TAIL.unpack_from(data, 4 + length)
    except (struct.error, UnicodeDecodeError) as exc:
        raise CorruptMessageError(f"Malformed {SHARE_STATE_TOPIC} key: {exc}") from exc
    return version, SharePartitionKey(group_id, uuid.UUID(bytes=topic_id), partition)


def _encode_batches(batches) -> bytes:
    out = [wire.array_length(len(batches), True)]
    for b in batches:
        out.append(_BATCH.pack(b.first_offset, b.last_offset, b.state, b.delivery_count) + b"\x00")
    return b"".join(out)


def encode_snapshot_value(snapshot: ShareSnapshot) -> bytes:
    return (_I16.pack(0) + _HEAD.pack(snapshot.snapshot_epoch & 0xFFFF, snapshot.state_epoch,
                                      snapshot.leader_epoch, snapshot.start_offset)
            + _encode_batches(snapshot.state_batches) + b"\x00")


def _decode_batches(data: bytes, pos: int) -> tuple[tuple[StateBatch, ...], int]:
    count, pos = wire.read_uvarint(data, pos)
    batches = []
    for _ in range(count - 1):
        first, last, state, delivery_count = _BATCH.unpack_from(data, pos)
        pos += _BATCH.size
        pos = _skip_tags(data, pos)
        batches.append(StateBatch(first, last, state, delivery_count))
    return tuple(batches), pos


def _skip_tags(data: bytes, pos: int) -> int:
    count, pos = wire.read_uvarint(data, pos)
    for _ in range(count):
        _tag, pos = wire.read_uvarint(data, pos)
        size, pos = wire.read_uvarint(data, pos)
        pos += size
    return pos


def decode_value(record_type: int, data: bytes, previous: ShareSnapshot | None) -> ShareSnapshot:
    """The state after a ShareSnapshot (`record_type` 0) or a ShareUpdate (1, applied on top of
    `previous`: its batches replace the overlapping offsets' states)."""
    try:
        if record_type == SNAPSHOT_KEY_VERSION:
            snapshot_epoch, state_epoch, leader_epoch, start_offset = _HEAD.unpack_from(data, 2)
            batches, _ = _decode_batches(data, 2 + _HEAD.size)
            return ShareSnapshot(snapshot_epoch, state_epoch, leader_epoch, start_offset, batches)
        snapshot_epoch, leader_epoch, start_offset = _UPDATE_HEAD.unpack_from(data, 2)
        batches, _ = _decode_batches(data, 2 + _UPDATE_HEAD.size)
    except (struct.error, IndexError) as exc:
        raise CorruptMessageError(f"Malformed {SHARE_STATE_TOPIC} value: {exc}") from exc
    base = previous or ShareSnapshot(snapshot_epoch, 0, leader_epoch, start_offset)
    start = max(start_offset, base.start_offset) if start_offset >= 0 else base.start_offset
    return ShareSnapshot(base.snapshot_epoch, base.state_epoch, leader_epoch, start,
                         merge_batches(base.state_batches, batches, start))


def merge_batches(old: tuple[StateBatch, ...], new: tuple[StateBatch, ...], start_offset: int
                  ) -> tuple[StateBatch, ...]:
    """`old` overwritten by `new` where they overlap, dropping offsets below `start_offset`."""
    states: dict[int, tuple[int, int]] = {}
    for batch in (*old, *new):
        for offset in range(max(batch.first_offset, start_offset), batch.last_offset + 1):
            states[offset] = (batch.state, batch.delivery_count)
    runs: list[StateBatch] = []
    for offset in sorted(states):
        state, count = states[offset]
        if runs and runs[-1].last_offset == offset - 1 and (runs[-1].state, runs[-1].delivery_count) == (state, count):
            runs[-1] = StateBatch(runs[-1].first_offset, offset, state, count)
        else:
            runs.append(StateBatch(offset, offset, state, count))
    return tuple(runs)
