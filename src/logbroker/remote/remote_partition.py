"""What the remote store holds for one partition, as the broker leading it knows it."""

from __future__ import annotations

import bisect

from logbroker.remote.metadata import RemoteLogSegmentMetadata, partition_dir
from logbroker.types import TopicPartition


class RemotePartitionState:
    """The COPY_SEGMENT_FINISHED segments of a partition in start offset order, and the log start
    offset DeleteRecords set below the local log (`log_start_floor`, -1 when none).

    Invariants: `segments` is sorted by start offset and, on a leader after each pass's expiry,
    no segment's range lies wholly within another's; `highest_offset` is the last offset copied
    (-1 before any copy). A follower's `segments` are the committed segments whose .log is in
    the store.
    """

    def __init__(self, tp: TopicPartition, topic_id_str: str) -> None:
        self.tp = tp
        self.topic_id_str = topic_id_str
        self.directory = partition_dir(tp, topic_id_str)
        self.segments: list[RemoteLogSegmentMetadata] = []
        self.loaded = False
        self.passes = 0  # of the leader's task over this partition (reconciling every few)
        self.reported: set[str] = set()  # ids of damaged segments already logged
        self.log_start_floor = -1
        self.as_leader = True  # else this broker follows the partition and only reads the store
        self.listing_failed = False  # a listing failed before the first succeeded

    @property
    def highest_offset(self) -> int:
        return max((s.end_offset for s in self.segments), default=-1)

    @property
    def size_in_bytes(self) -> int:
        return sum(s.segment_size_in_bytes for s in self.segments)

    def earliest_offset(self) -> int | None:
        """The first offset readable from remote, None without remote segments."""
        if not self.segments:
            return None
        return max(self.segments[0].start_offset, self.log_start_floor)

    def add(self, segment: RemoteLogSegmentMetadata) -> None:
        self.segments.append(segment)
        self.segments.sort(key=lambda s: (s.start_offset, s.end_offset))

    def remove(self, segment: RemoteLogSegmentMetadata) -> None:
        self.segments = [s for s in self.segments if s.segment_id != segment.segment_id]

    def segment_for(self, offset: int) -> RemoteLogSegmentMetadata | None:
        """The segment holding `offset` (of overlapping ones, the one starting last at or below
        it), or the first segment after it when `offset` falls in a gap; None past the end."""
        starts = [s.start_offset for s in self.segments]
        i = bisect.bisect_right(starts, offset) - 1
        if i >= 0 and self.segments[i].end_offset >= offset:
            return self.segments[i]
        following = [s for s in self.segments[max(i, 0):] if s.start_offset > offset]
        return following[0] if following else None

    def segments_after(self, segment: RemoteLogSegmentMetadata) -> list[RemoteLogSegmentMetadata]:
        """`segment` and every later one (for aborted transactions ending further on)."""
        return [s for s in self.segments if s.start_offset >= segment.start_offset]
