"""Value types at the storage boundary: what appends and reads return.

NamedTuples rather than frozen dataclasses: several are built for every produce and fetch, and a
frozen dataclass's __init__ sets each field through object.__setattr__ (~0.6 µs for five fields,
against ~0.2 µs for a NamedTuple). They are immutable and hashable either way."""

from __future__ import annotations

from typing import NamedTuple


class OffsetPosition(NamedTuple):
    """An offset index entry: an absolute offset and the file position of a batch."""

    offset: int
    position: int


class TimestampOffset(NamedTuple):
    """A time index entry: a timestamp and the absolute offset of the batch that carries it."""

    timestamp: int
    offset: int


class TimestampAndOffset(NamedTuple):
    """A ListOffsets answer: the offset found, the timestamp there, and its leader epoch (-1 if unknown)."""

    timestamp: int
    offset: int
    leader_epoch: int = -1


class FileRegion(NamedTuple):
    """A byte range of an open segment file, to leave the process with os.sendfile.

    `fd` stays valid while the segment is open; a segment deleted meanwhile is only renamed
    (.deleted) and closed after file.delete.delay.ms, so a region handed out just before is
    still readable when it is sent.
    """

    fd: int
    position: int
    size: int


class FetchDataInfo(NamedTuple):
    """What a read returns: where the first batch lies and the bytes to send.

    `region` is None when there is nothing to return (offset at the end, or max_offset reached).
    `aborted_transactions` is None unless the read asked for them (read_committed).
    """

    fetch_offset: int
    region: FileRegion | None
    first_entry_incomplete: bool = False
    # read_committed only: the aborted transactions overlapping the region (AbortedTxn values).
    aborted_transactions: tuple | None = None

    @property
    def size(self) -> int:
        return self.region.size if self.region else 0


class LogAppendInfo(NamedTuple):
    """The result of appending one batch (Kafka's LogAppendInfo).

    `log_append_time_ms` is -1 unless the topic uses LogAppendTime. `first_offset` is the
    batch's base offset; for a duplicate idempotent batch, the offsets it was first written at.
    """

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time_ms: int
    log_start_offset: int
    record_count: int
    valid_bytes: int
    duplicate: bool = False
