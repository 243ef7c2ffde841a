"""A follower's state rebuilt from tiered storage (Kafka's TierStateMachine.buildRemoteLogAuxState).

A follower whose fetch offset is below the leader's local log start (OFFSET_MOVED_TO_TIERED_STORAGE:
a new replica, a disk erased) does not copy what is tiered. It starts its log right after the
remote segment that holds the offset before the leader's local log start, and takes from that
segment's objects what the records below would have given it:

- the leader epochs up to there (`.leader_epoch_checkpoint`): once it leads, OffsetForLeaderEpoch
  answers for older epochs are right, and its followers truncate by the same lineage;
- the producer state there (`.snapshot`): an idempotent producer goes on with its sequence, a
  retry of its last batch is still answered as a duplicate, and a transaction open across that
  offset stays open until its marker, fetched later, completes it.

Which segment (Kafka's fetchRemoteLogSegmentMetadata(epoch, offset)): the one holding offset
`local start - 1` in the leader epoch that offset was written in, so that of two segments two
leaders both copied, the one in the leader's lineage is taken. The leader tells the epoch
(`target_epoch`): its epoch at the local start, or the previous one when that ends after
`local start - 1` (OffsetForLeaderEpoch(epoch - 1)). A leader whose epoch cache no longer reaches
below its local start answers the latter with its local start whatever the epoch was; then the
segment is the one holding that offset in the latest epoch not above the leader's.

A leader whose local log holds nothing while the store holds segments of the partition (its disk
erased with no replica to follow, or a topic restored from the store) starts its log the same way
after the store's last offset (`read_last_segment_state`, remote/remote_log_manager.py).

The store is only read. A segment missing from the metadata, or an object missing or unreadable,
is a RemoteLogAuxStateError (a RemoteStorageError, retriable): the log is left as it was and the
fetcher tries again later. Runs on the event loop; the store reads are awaited.
"""

from __future__ import annotations

from dataclasses import dataclass

from logbroker.remote.metadata import LEADER_EPOCH, PRODUCER_SNAPSHOT, RemoteLogSegmentMetadata
from logbroker.remote.storage_manager import RemoteStorageError, RemoteStorageManager
from logbroker.storage.leader_epoch_cache import EpochEntry, decode_leader_epoch_checkpoint
from logbroker.storage.producer_snapshot import CorruptSnapshotError, decode_snapshot
from logbroker.storage.producer_state_entry import ProducerStateEntry
from logbroker.types import TopicPartition


class RemoteLogAuxStateError(RemoteStorageError):
    """The follower's state cannot be built from the store now (Kafka's RemoteStorageException
    in buildRemoteLogAuxState): no such segment, or one of its objects missing or unreadable."""


@dataclass(frozen=True, slots=True)
class RemoteLogAuxState:
    """Where the follower's log starts (`next_offset`, the segment's end offset + 1), the leader
    epochs below it, and the producers of the snapshot at it (None: the segment has no
    snapshot, its leader kept no producer state)."""

    segment: RemoteLogSegmentMetadata
    next_offset: int
    epochs: list[EpochEntry]
    producers: list[ProducerStateEntry] | None


def target_epoch(*, local_start: int, epoch_at_local_start: int, earlier: tuple[int, int] | None) -> int:
    """The leader epoch of offset `local_start - 1`, as Kafka's follower works it out: the
    epoch at the local start, unless the leader's answer to OffsetForLeaderEpoch(that - 1),
    `earlier` = (epoch, end offset), ends after `local_start - 1`: then that answer's epoch
    (which skips epochs in which nothing was written)."""
    if epoch_at_local_start <= 0 or earlier is None:
        return max(epoch_at_local_start, 0)
    epoch, end_offset = earlier
    return epoch if epoch >= 0 and end_offset > local_start - 1 else epoch_at_local_start


def segment_for(segments: list[RemoteLogSegmentMetadata], offset: int, epoch: int, *,
                epoch_at_local_start: int) -> RemoteLogSegmentMetadata | None:
    """The segment holding `offset` written in `epoch` (of several, the latest start, then
    the latest copy); else, for a leader whose epoch cache starts at its local start (see the
    module docstring), the one holding it in the latest epoch up to `epoch_at_local_start`."""
    holding = [s for s in segments if s.start_offset <= offset <= s.end_offset]
    exact = [s for s in holding if s.epoch_at(offset) == epoch]
    if exact:
        return max(exact, key=lambda s: (s.start_offset, s.event_timestamp_ms))
    lineage = [s for s in holding if (s.epoch_at(offset) or 0) <= epoch_at_local_start]
    if not lineage:
        return None
    return max(lineage, key=lambda s: (s.epoch_at(offset) or 0, s.start_offset, s.event_timestamp_ms))


async def read_aux_state(rsm: RemoteStorageManager, segments: list[RemoteLogSegmentMetadata], *,
                         tp: TopicPartition, local_start: int, epoch: int,
                         epoch_at_local_start: int) -> RemoteLogAuxState:
    """Find the segment holding `local_start - 1` in `epoch` among `segments` (the partition's
    COPY_SEGMENT_FINISHED ones) and read its leader epochs and producer snapshot, both checked.
    RemoteLogAuxStateError when that cannot be done now."""
    offset = local_start - 1
    segment = segment_for(segments, offset, epoch, epoch_at_local_start=epoch_at_local_start)
    if segment is None:
        raise RemoteLogAuxStateError(
            f"No remote segment of {tp} holds offset {offset} in leader epoch {epoch} "
            f"({len(segments)} segment(s) in the store)")
    try:
        text = (await rsm.fetch_file(segment, LEADER_EPOCH)).decode()
        epochs = decode_leader_epoch_checkpoint(text, source=segment.key(LEADER_EPOCH))
    except ValueError as exc:  # UnicodeDecodeError too
        raise RemoteLogAuxStateError(f"Unreadable remote leader epoch checkpoint: {exc}") from exc
    except RemoteStorageError as exc:
        raise RemoteLogAuxStateError(str(exc)) from exc
    producers = None
    if segment.has_producer_snapshot:
        try:
            producers = decode_snapshot(await rsm.fetch_file(segment, PRODUCER_SNAPSHOT))
        except CorruptSnapshotError as exc:
            raise RemoteLogAuxStateError(f"Unreadable producer snapshot {segment.key(PRODUCER_SNAPSHOT)}: "
                                         f"{exc}") from exc
        except RemoteStorageError as exc:
            raise RemoteLogAuxStateError(str(exc)) from exc
    next_offset = segment.end_offset + 1
    return RemoteLogAuxState(segment, next_offset, [e for e in epochs if e.start_offset < next_offset],
                             producers)


async def read_last_segment_state(rsm: RemoteStorageManager, segments: list[RemoteLogSegmentMetadata], *,
                                  tp: TopicPartition) -> RemoteLogAuxState:
    """`read_aux_state` after the store's last offset (`segments` not empty): of the copies
    holding it, one in the latest leader epoch it was written in, then the latest copy."""
    offset = max(s.end_offset for s in segments)
    epoch = max((e for s in segments if s.end_offset == offset
                 for e in [s.epoch_at(offset)] if e is not None), default=0)
    return await read_aux_state(rsm, segments, tp=tp, local_start=offset + 1, epoch=epoch,
                                epoch_at_local_start=epoch)
