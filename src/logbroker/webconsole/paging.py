"""Which offsets a page of the message browser reads, and where the next page starts: pure
functions, so the paging rules are tested without a broker.

A page reads one range [begin, end) per partition and shows at most `limit` of the records it
found, merged across partitions by timestamp. The next page continues from a cursor, one offset
per partition: reading newest first, the next page ends where this one's oldest record in that
partition was (or where its range began, when everything read was shown or filtered out);
reading forward, it begins after this one's last shown record. When records were read but not
shown (the merge cut them), the cursor keeps them for the next page rather than skip any: with
timestamps that rise within each partition, as they normally do, no record is shown twice
either.
"""

from __future__ import annotations

from collections.abc import Mapping

from logbroker.webconsole.model import Message

STARTS = ("newest", "oldest", "offset", "timestamp")


def ranges_for(start: str, *, partitions: list[int], low: Mapping[int, int],
               high: Mapping[int, int], scan: int, offset: int = 0,
               at: Mapping[int, int] | None = None,
               cursor: Mapping[int, int] | None = None) -> dict[int, tuple[int, int]]:
    """partition → [begin, end) to read, each within [low, high] and at most `scan` long.
    "newest" reads the last `scan` below the cursor (or the end); the others read forward from
    the cursor, else from the start, `offset`, or `at` (ListOffsets by timestamp)."""
    ranges = {}
    for p in partitions:
        lo, hi = low.get(p), high.get(p)
        if lo is None or hi is None:
            continue
        if start == "newest":
            end = hi if cursor is None else min(hi, max(lo, cursor.get(p, hi)))
            ranges[p] = (max(lo, end - scan), end)
            continue
        if cursor is not None:
            begin = cursor.get(p, hi)
        elif start == "oldest":
            begin = lo
        elif start == "offset":
            begin = offset
        else:
            begin = (at or {}).get(p, hi)
        begin = min(max(lo, begin), hi)
        ranges[p] = (begin, min(hi, begin + scan))
    return ranges


def next_cursor(*, newest: bool, ranges: Mapping[int, tuple[int, int]],
                found: Mapping[int, list[Message]], shown: tuple[Message, ...],
                reached: Mapping[int, int], low: Mapping[int, int],
                high: Mapping[int, int]) -> dict[int, int] | None:
    """Where the page after this one starts, or None when this one reached the log's start
    (newest first) or end (forward). `found` is every record that passed the filter, by
    partition; `reached` the offset after the last record each partition's read scanned."""
    shown_ids = {(m.partition, m.offset) for m in shown}
    cursor = {}
    for p, (begin, end) in ranges.items():
        dropped = [m.offset for m in found.get(p, ()) if (p, m.offset) not in shown_ids]
        if newest:
            if dropped:
                cursor[p] = max(dropped) + 1
            elif reached.get(p, begin) >= end:
                cursor[p] = begin
            else:  # the read stopped early: its range is not done
                cursor[p] = end
        else:
            cursor[p] = min(dropped) if dropped else reached.get(p, begin)
    if newest:
        more = any(cursor[p] > low[p] for p in cursor)
    else:
        more = any(cursor[p] < high[p] for p in cursor)
    return cursor if more else None


def format_cursor(cursor: Mapping[int, int]) -> str:
    return ",".join(f"{p}:{o}" for p, o in sorted(cursor.items()))


def parse_cursor(text: str) -> dict[int, int]:
    """`0:120,1:98` → {0: 120, 1: 98}; ValueError for anything else."""
    cursor = {}
    for item in text.split(","):
        partition, sep, offset = item.partition(":")
        if not sep:
            raise ValueError(f"'{text}' is not a cursor like 0:120,1:98.")
        cursor[int(partition)] = int(offset)
    return cursor
