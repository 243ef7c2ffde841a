"""Offsets as Spark's Kafka connector writes them: JSON, topic → partition (a string) → offset.

A streaming query's offsets live in Spark's checkpoint as `{"topic": {"0": 123, "1": 456}}`. The
partition keys are strings because JSON object keys are strings: an offset written with int keys
would come back from the checkpoint with string keys and no longer match, so `to_json_dict` always
writes strings and `from_json_dict` accepts both. Topics and partitions are written in sorted order
so that equal offsets give byte-equal JSON (Spark compares offsets by their JSON).

In `startingOffsets` / `endingOffsets`, -2 means earliest and -1 means latest, as in Spark.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from logbroker.spark.errors import OptionError

EARLIEST = -2
LATEST = -1

# (topic, partition) → offset
PartitionOffsets = dict[tuple[str, int], int]


@dataclass(frozen=True, kw_only=True)
class OffsetSpec:
    """Where to start or stop: earliest, latest, per-partition offsets, or by timestamp.

    kind "json": `offsets` maps topic → partition → offset (or EARLIEST / LATEST).
    kind "timestamp": `global_timestamp_ms` for every partition, or `timestamps` per partition;
    `missing_timestamp_is_latest` says what a partition with no record at or after the
    timestamp resolves to: its latest offset (strategy "latest"), or an error ("error").
    """

    kind: str  # "earliest" | "latest" | "json" | "timestamp"
    offsets: Mapping[str, Mapping[int, int]] = field(default_factory=dict)
    global_timestamp_ms: int | None = None
    timestamps: Mapping[str, Mapping[int, int]] = field(default_factory=dict)
    missing_timestamp_is_latest: bool = False


def _parse_nested(raw: str, option: str) -> dict[str, dict[int, int]]:
    try:
        parsed = json.loads(raw)
        if not isinstance(parsed, dict):
            raise TypeError
        return {str(topic): {int(p): int(v) for p, v in parts.items()}
                for topic, parts in parsed.items()}
    except (ValueError, TypeError, AttributeError):
        raise OptionError(f"option '{option}' must be 'earliest', 'latest' or JSON like "
                          f"{{\"topicA\":{{\"0\":23,\"1\":-1}}}}, got {raw!r}") from None


def parse_offset_spec(raw: str, *, option: str) -> OffsetSpec:
    text = raw.strip()
    if text.lower() in ("earliest", "latest"):
        return OffsetSpec(kind=text.lower())
    offsets = _parse_nested(text, option)
    for topic, parts in offsets.items():
        for partition, offset in parts.items():
            if offset < EARLIEST:
                raise OptionError(f"option '{option}': offset {offset} of {topic}-{partition} "
                                  "is not an offset, -1 (latest) or -2 (earliest)")
    return OffsetSpec(kind="json", offsets=offsets)


def parse_timestamp_spec(raw: str, *, option: str,
                         missing_timestamp_is_latest: bool) -> OffsetSpec:
    return OffsetSpec(kind="timestamp", timestamps=_parse_nested(raw.strip(), option),
                      missing_timestamp_is_latest=missing_timestamp_is_latest)


def to_json_dict(offsets: PartitionOffsets) -> dict[str, dict[str, int]]:
    """The checkpoint form: sorted topics, partitions as decimal strings in numeric order."""
    result: dict[str, dict[str, int]] = {}
    for topic, partition in sorted(offsets):
        result.setdefault(topic, {})[str(partition)] = int(offsets[(topic, partition)])
    return result


def from_json_dict(data: Mapping[str, Mapping[str, int]] | None) -> PartitionOffsets:
    if not data:
        return {}
    return {(str(topic), int(partition)): int(offset)
            for topic, parts in data.items() for partition, offset in parts.items()}


def to_json(offsets: PartitionOffsets) -> str:
    return json.dumps(to_json_dict(offsets), separators=(",", ":"))
