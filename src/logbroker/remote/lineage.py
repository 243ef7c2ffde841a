"""Whether a remote segment belongs to the current leader's epoch lineage (Kafka's
RemoteLogManager.isRemoteSegmentWithinLeaderEpochs and buildFilteredLeaderEpochMap).

A lineage is the leader epoch cache as {epoch: start offset}. A remote segment carries the
epochs of its records ({epoch: first offset of the epoch in the segment}). Two leaders can both
copy a range; after an unclean election the store can also hold records the new leader never had.
The leader expires the segments that do not fit its lineage.

The lineage is trusted only when it reaches back to the partition's log start offset
(`covers`): a cache that starts later (a log restarted from the store after its disk was lost)
would make every older segment look foreign, so then nothing is judged by epochs at all.
"""

from __future__ import annotations

from collections.abc import Mapping

from logbroker.remote.metadata import RemoteLogSegmentMetadata


def filtered(epochs: Mapping[int, int]) -> dict[int, int]:
    """`epochs` in epoch order without the epochs that hold no record (one starting where the
    next one starts: a leader elected but never written to)."""
    ordered = sorted(epochs.items())
    return {epoch: start for i, (epoch, start) in enumerate(ordered)
            if i + 1 == len(ordered) or ordered[i + 1][1] != start}


def covers(lineage: Mapping[int, int], log_start_offset: int) -> bool:
    """Whether the lineage starts at or before the log start offset (see the module docstring)."""
    return bool(lineage) and min(lineage.values()) <= log_start_offset


def before_lineage(segment: RemoteLogSegmentMetadata, lineage: Mapping[int, int]) -> bool:
    """Every epoch of the segment is earlier than the lineage's first: its records all precede
    the log start offset (Kafka deletes a segment with ANY such epoch; one that also holds later
    epochs still has records above the log start and is kept here)."""
    epochs = segment.segment_leader_epochs
    return bool(epochs) and bool(lineage) and max(epochs) < min(lineage)


def within_lineage(segment: RemoteLogSegmentMetadata, log_end_offset: int,
                   lineage: Mapping[int, int]) -> bool:
    """Kafka's isRemoteSegmentWithinLeaderEpochs, `lineage` already filtered: every epoch of the
    segment from the lineage's first on is in the lineage and starts where the lineage says
    (the segment's first such epoch may start later: segments begin mid-epoch), the segment
    ends before the next epoch of the lineage starts and before the log end offset."""
    own = filtered(segment.segment_leader_epochs)
    if not own or not lineage:
        return False
    epochs = sorted(lineage)
    first_epoch, last_epoch = epochs[0], epochs[-1]
    own_epochs = sorted(own)
    if own_epochs[-1] < first_epoch or own_epochs[-1] > last_epoch:
        return False
    considered = [e for e in own_epochs if e >= first_epoch]
    for i, epoch in enumerate(considered):
        if epoch not in lineage:
            return False
        start = own[epoch]
        if i == 0 and epoch != first_epoch and start < lineage[epoch]:
            return False
        later = [e for e in epochs if e > epoch]
        if epoch == own_epochs[-1]:
            if later and segment.end_offset > lineage[later[0]] - 1:
                return False
        elif not later or later[0] != considered[i + 1] or own[considered[i + 1]] != lineage[later[0]]:
            return False
    return segment.end_offset < log_end_offset


def wholly_within(segment: RemoteLogSegmentMetadata, other: RemoteLogSegmentMetadata) -> bool:
    """`segment`'s offsets all lie in `other`'s (a copy two leaders both made)."""
    return other.start_offset <= segment.start_offset and segment.end_offset <= other.end_offset
