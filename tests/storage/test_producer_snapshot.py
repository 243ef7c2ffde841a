"""Producer snapshot files: Kafka's PID_SNAPSHOT_MAP_SCHEMA bytes, decoded back or refused.

The files a ProducerStateManager writes and loads are tested in test_producer_state.py."""

from __future__ import annotations

import struct

import crc32c
import pytest

from logbroker.storage.producer_snapshot import (
    CorruptSnapshotError,
    decode_snapshot,
    encode_snapshot,
)
from logbroker.storage.producer_state_entry import ProducerStateEntry


def test_empty_snapshot_is_ten_bytes() -> None:
    data = encode_snapshot([])
    assert data == struct.pack(">hIi", 1, crc32c.crc32c(b"\0\0\0\0"), 0)
    assert decode_snapshot(data) == []


def test_snapshot_entry_without_batch_or_transaction_decodes_to_empty_entry() -> None:
    data = encode_snapshot([ProducerStateEntry(9, producer_epoch=4, coordinator_epoch=2)])
    (entry,) = decode_snapshot(data)
    assert entry == ProducerStateEntry(9, producer_epoch=4, coordinator_epoch=2)
    assert (entry.last_seq, entry.last_data_offset, entry.last_offset_delta) == (-1, -1, 0)


@pytest.mark.parametrize("damage", ["flip", "truncate", "version", "count"])
def test_damaged_snapshot_bytes_are_corrupt(damage: str) -> None:
    data = bytearray(encode_snapshot([ProducerStateEntry(1, producer_epoch=0)]))
    if damage == "flip":
        data[20] ^= 0x01
    elif damage == "truncate":
        del data[-3:]
    elif damage == "version":
        data[1] = 2
    else:  # a count too large, with a CRC that matches it
        struct.pack_into(">i", data, 6, 2)
        struct.pack_into(">I", data, 2, crc32c.crc32c(bytes(data[6:])))
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(bytes(data))
