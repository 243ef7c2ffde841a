"""The leader epoch cache of one partition and its `leader-epoch-checkpoint` file.

Kafka's LeaderEpochFileCache: for each leader epoch, the first offset written in it. Followers
use it to truncate after a leader change (KIP-101: OffsetForLeaderEpoch asks the new leader
where the follower's last epoch ended, instead of trusting the follower's high watermark), and
ListOffsets / fetch validation use it to tell which epoch an offset belongs to.
"""

from __future__ import annotations

import bisect
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from logbroker.storage.checkpoints import CheckpointFile, fsync_file, parse_checkpoint_text

log = logging.getLogger("kafka.server.epoch.LeaderEpochFileCache")

LEADER_EPOCH_CHECKPOINT_FILE = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


@dataclass(frozen=True, slots=True)
class EpochEntry:
    """An epoch and the first offset a leader wrote in it."""

    epoch: int
    start_offset: int


def _parse_epoch_entry(fields: list[str]) -> EpochEntry:
    if len(fields) != 2:
        raise ValueError(fields)
    return EpochEntry(int(fields[0]), int(fields[1]))


class LeaderEpochCheckpointFile(CheckpointFile):
    """`leader-epoch-checkpoint`: version `0`, a count, then `epoch startOffset` lines:

        0
        2
        0 0
        3 1200
    """

    def write(self, entries: list[EpochEntry], *, sync: bool = True) -> None:
        self._write_lines([f"{e.epoch} {e.start_offset}" for e in entries], sync=sync)

    def read(self) -> list[EpochEntry]:
        return self._read_lines(_parse_epoch_entry)


def decode_leader_epoch_checkpoint(text: str, *, source: str) -> list[EpochEntry]:
    """The entries of a `leader-epoch-checkpoint`'s text (a copy from elsewhere: the remote
    store's `.leader_epoch_checkpoint`, named by `source`). ValueError for text not in that
    format."""
    return parse_checkpoint_text(text, version=LeaderEpochCheckpointFile.VERSION,
                                 parse=_parse_epoch_entry, source=source)


class LeaderEpochFileCache:
    """Epoch → start offset, kept in memory and mirrored to `leader-epoch-checkpoint`.

    Invariant: epochs strictly increase and so do start offsets along the entries (an assignment
    that would break this first removes the entries in its way, as Kafka's does).

    Writes: a new epoch (`assign`) rewrites the file atomically without fsync, on the produce or
    replication path, and leaves it dirty; `flush` (called by Log.flush, off the event loop)
    fsyncs it before the recovery point moves past it. Losing an unsynced assignment in a crash
    is harmless: the batches after the recovery point are recovered and re-assign their epochs.
    Truncations rewrite with fsync, as Kafka's do. Everything here blocks on disk when it
    writes; not thread-safe (the owning Log serialises callers under its lock).
    """

    def __init__(self, path: str | os.PathLike, *, entries: list[EpochEntry] | None = None) -> None:
        """Load the cache from `path` (missing: empty), unless `entries` are given.

        KafkaStorageError naming the file if it is malformed.
        """
        self._file = LeaderEpochCheckpointFile(path)
        loaded = self._file.read() if entries is None else list(entries)
        self._epochs: list[int] = []
        self._offsets: list[int] = []
        for entry in loaded:
            self._assign_in_memory(entry.epoch, entry.start_offset)
        self._dirty = False

    # --- reading -------------------------------------------------------------------------------

    @property
    def path(self) -> Path:
        return self._file.path

    def set_path(self, path: str | os.PathLike) -> None:
        """Follow the partition directory after a rename."""
        self._file = LeaderEpochCheckpointFile(path)

    @property
    def entries(self) -> list[EpochEntry]:
        return [EpochEntry(e, o) for e, o in zip(self._epochs, self._offsets)]

    def is_empty(self) -> bool:
        return not self._epochs

    @property
    def latest_epoch(self) -> int | None:
        return self._epochs[-1] if self._epochs else None

    @property
    def latest_entry(self) -> EpochEntry | None:
        return EpochEntry(self._epochs[-1], self._offsets[-1]) if self._epochs else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        return EpochEntry(self._epochs[0], self._offsets[0]) if self._epochs else None

    def previous_epoch(self) -> int | None:
        """The epoch before the latest one, if any."""
        return self._epochs[-2] if len(self._epochs) > 1 else None

    def epoch_entry(self, epoch: int) -> EpochEntry | None:
        i = bisect.bisect_left(self._epochs, epoch)
        if i < len(self._epochs) and self._epochs[i] == epoch:
            return EpochEntry(epoch, self._offsets[i])
        return None

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch that `offset` was written in: the last entry starting at or before it."""
        i = bisect.bisect_right(self._offsets, offset)
        return self._epochs[i - 1] if i else None

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch (KIP-101), as Kafka's LeaderEpochFileCache.endOffsetFor:
        `(epoch, end_offset)` where end_offset is the first offset after `requested_epoch`.

        - undefined epoch (-1) or an epoch above all known: (-1, -1);
        - the latest epoch: (epoch, log_end_offset), the leader is still writing in it;
        - an epoch below every known one: (requested_epoch, start offset of the first epoch);
        - otherwise: (the largest known epoch <= requested, start offset of the next epoch).
        """
        if requested_epoch == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self._epochs[-1]:
            return requested_epoch, log_end_offset
        higher = bisect.bisect_right(self._epochs, requested_epoch)
        if higher == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return requested_epoch, self._offsets[0]
        return self._epochs[higher - 1], self._offsets[higher]

    # --- changing ------------------------------------------------------------------------------

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` started at `start_offset`; True if the cache changed.

        Nothing changes when `epoch` is already the latest with a start at or before
        `start_offset` (the common case on every append). Entries with an epoch >= `epoch` or a
        start offset >= `start_offset` are removed first, keeping the cache monotonic.
        """
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"Received invalid partition leader epoch entry ({epoch}, {start_offset})")
        if self._epochs and self._epochs[-1] == epoch and start_offset >= self._offsets[-1]:
            return False
        removed = self._assign_in_memory(epoch, start_offset)
        if len(removed) > 1 or (removed and removed[0].start_offset != start_offset):
            log.warning("New epoch entry (%d, %d) caused truncation of conflicting entries %s in %s",
                        epoch, start_offset, removed, self.path)
        self._write(sync=False)
        return True

    def _assign_in_memory(self, epoch: int, start_offset: int) -> list[EpochEntry]:
        removed = []
        while self._epochs and (self._epochs[-1] >= epoch or self._offsets[-1] >= start_offset):
            removed.append(EpochEntry(self._epochs.pop(), self._offsets.pop()))
        self._epochs.append(epoch)
        self._offsets.append(start_offset)
        return removed[::-1]

    def truncate_from_end(self, end_offset: int) -> None:
        """Remove the entries starting at or after `end_offset` (the log was truncated to it)."""
        if end_offset < 0 or not self._offsets or self._offsets[-1] < end_offset:
            return
        i = bisect.bisect_left(self._offsets, end_offset)
        del self._epochs[i:]
        del self._offsets[i:]
        self._write(sync=True)

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at `start_offset`: drop the entries that start at or before it,
        except the last of them, which is kept with its start moved up to `start_offset`."""
        i = bisect.bisect_right(self._offsets, start_offset)
        if i == 0:
            return
        epoch = self._epochs[i - 1]
        if i == 1 and self._offsets[0] == start_offset:
            return
        del self._epochs[:i]
        del self._offsets[:i]
        self._epochs.insert(0, epoch)
        self._offsets.insert(0, start_offset)
        self._write(sync=True)

    def clear_and_flush(self) -> None:
        """Remove every entry (truncate_fully_and_start_at)."""
        self._epochs.clear()
        self._offsets.clear()
        self._write(sync=True)

    def flush(self) -> None:
        """fsync a file written without sync since the last flush. Blocks on disk."""
        if self.pop_dirty():
            self.fsync_file()

    def pop_dirty(self) -> bool:
        """Whether the file was written without fsync since the last call (then clears it);
        with `fsync_file` lets a flush do the fsync outside the owner's lock."""
        dirty, self._dirty = self._dirty, False
        return dirty

    def fsync_file(self) -> None:
        """fsync the checkpoint file and its directory (safe beside a concurrent rewrite: the
        rewrite marks the cache dirty again). Blocks on disk."""
        fsync_file(self.path)

    def _write(self, *, sync: bool) -> None:
        if not self.path.parent.exists():
            return  # the partition is being deleted
        self._file.write(self.entries, sync=sync)
        self._dirty = not sync

    def __repr__(self) -> str:
        return f"LeaderEpochFileCache({self.path}, {self.entries})"
