"""Control records: the single record of a control batch (transaction markers and KRaft's).

A control record's key is `version int16 (0), type int16`; types are 0 ABORT, 1 COMMIT,
2 LEADER_CHANGE, 3 SNAPSHOT_HEADER, 4 SNAPSHOT_FOOTER, 5 KRAFT_VERSION, 6 KRAFT_VOTERS.
An end-transaction marker (ABORT or COMMIT) has the value `version int16 (0), coordinatorEpoch
int32`. A marker batch is transactional and control, carries the producer id and epoch of the
transaction it ends, and has no sequence.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from logbroker.errors import CorruptRecordError
from logbroker.records.batch import NO_PARTITION_LEADER_EPOCH
from logbroker.records.builder import build_batch
from logbroker.records.record_batch import RecordBatch

CONTROL_TYPES = {0: "ABORT", 1: "COMMIT", 2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER",
                 4: "SNAPSHOT_FOOTER", 5: "KRAFT_VERSION", 6: "KRAFT_VOTERS"}
ABORT = 0
COMMIT = 1

_KEY = struct.Struct(">hh")
_END_TXN_VALUE = struct.Struct(">hi")
CONTROL_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0


def control_record_type(key: bytes | None) -> int:
    """The type id in a control record key."""
    if key is None or len(key) < _KEY.size:
        raise CorruptRecordError(f"control record key of {0 if key is None else len(key)} bytes, expected >= 4")
    version, type_id = _KEY.unpack_from(key)
    if version < 0:
        raise CorruptRecordError(f"control record key has a negative version {version}")
    return type_id


def control_type_name(type_id: int) -> str:
    return CONTROL_TYPES.get(type_id, "UNKNOWN")


@dataclass(frozen=True, slots=True)
class EndTransactionMarker:
    """The decoded value of an ABORT or COMMIT control record."""

    control_type: int
    coordinator_epoch: int

    @property
    def is_commit(self) -> bool:
        return self.control_type == COMMIT

    @classmethod
    def decode(cls, key: bytes | None, value: bytes | None) -> EndTransactionMarker:
        type_id = control_record_type(key)
        if type_id not in (ABORT, COMMIT):
            raise CorruptRecordError(f"control record type {type_id} is not a transaction marker")
        if value is None or len(value) < _END_TXN_VALUE.size:
            raise CorruptRecordError("end transaction marker value is too short")
        _version, coordinator_epoch = _END_TXN_VALUE.unpack_from(value)
        return cls(type_id, coordinator_epoch)

    def key(self) -> bytes:
        return _KEY.pack(CONTROL_KEY_VERSION, self.control_type)

    def value(self) -> bytes:
        return _END_TXN_VALUE.pack(END_TXN_MARKER_VERSION, self.coordinator_epoch)


def build_end_txn_marker_batch(*, commit: bool, producer_id: int, producer_epoch: int,
                               coordinator_epoch: int, timestamp_ms: int, base_offset: int = 0,
                               partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH) -> bytes:
    """A control batch holding one COMMIT or ABORT marker, as the transaction coordinator writes."""
    marker = EndTransactionMarker(COMMIT if commit else ABORT, coordinator_epoch)
    return build_batch([(marker.key(), marker.value(), (), timestamp_ms)], base_offset=base_offset,
                       producer_id=producer_id, producer_epoch=producer_epoch,
                       partition_leader_epoch=partition_leader_epoch, transactional=True, control=True)


def read_end_txn_marker(batch) -> EndTransactionMarker | None:
    """The COMMIT/ABORT marker in the bytes of one whole control batch (decodes its record);
    None when the batch is empty (what compaction leaves) or holds another control type.
    Raises CorruptRecordError for an undecodable record."""
    records = RecordBatch(batch, 0).records()
    if not records:
        return None
    record = records[0]
    if control_record_type(record.key) not in (ABORT, COMMIT):
        return None
    return EndTransactionMarker.decode(record.key, record.value)
