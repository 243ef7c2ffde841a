"""Which segments retention may delete (Kafka's UnifiedLog.deleteOldSegments rules), as pure
functions over the segment list; `Log.delete_old_segments` does the deleting.

A breach rule is a predicate `(segment, next_segment) -> bool`. Deletion takes the longest
leading run of segments for which the rule holds and that lie wholly below the high watermark
(so the log start offset never passes it), and never takes an empty active segment. The three
rules, applied in this order:

- log start offset: the next segment starts at or before the log start offset (the whole
  segment is below it, after DeleteRecords);
- retention.bytes: oldest first, while the log stays at or above retention.bytes without it;
- retention.ms: the segment's largest timestamp (its file's mtime when it has none) is more
  than retention.ms old.

On a tiered log (remote.storage.enable) the last two use local.retention.* and hold only for
segments already copied to remote storage (`only_uploaded`): a local segment goes only once its
copy is recorded; remote retention (remote/remote_log_manager.py) covers the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol


class SegmentLike(Protocol):
    @property
    def base_offset(self) -> int: ...

    @property
    def size(self) -> int: ...

    @property
    def largest_timestamp(self) -> int: ...


BreachRule = Callable[[SegmentLike, "SegmentLike | None"], bool]


def log_start_offset_breached(log_start_offset: int) -> BreachRule:
    return lambda _segment, next_segment: (next_segment is not None
                                           and next_segment.base_offset <= log_start_offset)


def retention_ms_breached(now_ms: int, retention_ms: int) -> BreachRule | None:
    """None when retention.ms is negative (no time limit)."""
    if retention_ms < 0:
        return None
    return lambda segment, _next: now_ms - segment.largest_timestamp > retention_ms


def retention_size_breached(log_size: int, retention_bytes: int) -> BreachRule | None:
    """None when retention.bytes is negative or the log is below it. Stateful: apply it once,
    in order, to the segments from the oldest."""
    if retention_bytes < 0 or log_size < retention_bytes:
        return None
    excess = log_size - retention_bytes

    def rule(segment: SegmentLike, _next: SegmentLike | None) -> bool:
        nonlocal excess
        if excess - segment.size >= 0:
            excess -= segment.size
            return True
        return False
    return rule


def only_uploaded(rule: BreachRule, highest_offset_in_remote: int) -> BreachRule:
    """`rule`, for segments whose every offset is at most `highest_offset_in_remote` (checked
    first, so a stateful rule counts only what it may delete)."""
    return lambda segment, next_segment: (next_segment is not None
                                          and next_segment.base_offset - 1 <= highest_offset_in_remote
                                          and rule(segment, next_segment))


def deletable_segments(segments: Sequence[SegmentLike], *, log_end_offset: int,
                       high_watermark: int, rule: BreachRule) -> list[SegmentLike]:
    """The leading run of `segments` that `rule` lets go, wholly below the high watermark;
    the last segment only when it is non-empty (the log then rolls before deleting it)."""
    deletable = []
    for i, segment in enumerate(segments):
        next_segment = segments[i + 1] if i + 1 < len(segments) else None
        upper_bound = next_segment.base_offset if next_segment is not None else log_end_offset
        if next_segment is None and segment.size == 0:
            break
        if high_watermark < upper_bound or not rule(segment, next_segment):
            break
        deletable.append(segment)
    return deletable
