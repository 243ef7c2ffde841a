"""What `logbroker groups` prints, as pure functions: kafka-consumer-groups.sh's tables, column for
column, and the parsers of its --to-datetime and --by-duration arguments.

No I/O here: `groups.py` asks the cluster and hands these functions value types, so each table
can be checked with plain values. Widths follow Kafka's ConsumerGroupCommand: a column is as wide
as its longest value but never narrower than 15, and a missing value prints as "-".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

MISSING = "-"

# Kafka's GroupState names, by confluent-kafka's ConsumerGroupState member name.
STATE_NAMES = {
    "UNKNOWN": "Unknown",
    "PREPARING_REBALANCING": "PreparingRebalance",
    "COMPLETING_REBALANCING": "CompletingRebalance",
    "STABLE": "Stable",
    "DEAD": "Dead",
    "EMPTY": "Empty",
}
CONSUMER_GROUP_STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty")
REBALANCING_STATES = frozenset({"PreparingRebalance", "CompletingRebalance"})
INACTIVE_STATES = frozenset({"Empty", "Dead"})


# Kafka's GroupType names (its toString), by confluent-kafka's ConsumerGroupType member name.
TYPE_NAMES = {"UNKNOWN": "Unknown", "CONSUMER": "Consumer", "CLASSIC": "Classic"}


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    state: str
    type: str = "Classic"  # Kafka's GroupType name: Classic, Consumer (KIP-848), Share (KIP-932)


@dataclass(frozen=True, slots=True)
class OffsetRow:
    """One row of `--describe`: a partition the group has assigned or has an offset for.
    `lag = log_end_offset - current_offset`, unknown when either is."""

    group: str
    topic: str | None
    partition: int | None
    current_offset: int | None
    log_end_offset: int | None
    consumer_id: str | None
    host: str | None
    client_id: str | None

    @property
    def lag(self) -> int | None:
        if self.current_offset is None or self.current_offset < 0 or self.log_end_offset is None:
            return None
        return self.log_end_offset - self.current_offset


@dataclass(frozen=True, slots=True)
class MemberRow:
    group: str
    consumer_id: str
    group_instance_id: str  # "" for a dynamic member
    host: str
    client_id: str
    partitions: int


@dataclass(frozen=True, slots=True)
class GroupStateRow:
    group: str
    coordinator: str  # "host:port  (id)", as Kafka prints it
    assignment_strategy: str
    state: str
    members: int


def _text(value: object) -> str:
    return MISSING if value is None else str(value)


def _pad(value: str, width: int) -> str:
    return value.ljust(width)


def list_lines(groups: list[GroupListing], *, with_state: bool, with_type: bool = False) -> list[str]:
    """`--list`: one group id per line; with `--type` and/or `--state`, a GROUP [TYPE] [STATE]
    table (Kafka's ConsumerGroupCommand.printGroupInfo)."""
    if not with_state and not with_type:
        return [g.group_id for g in groups]
    width = max([15] + [len(g.group_id) for g in groups]) + 10

    def line(group: str, type_: str, state: str) -> str:
        cells = [_pad(group, width)] + ([_pad(type_, 20)] if with_type else []) + ([_pad(state, 20)] if with_state else [])
        return " ".join(cells)
    return [line("GROUP", "TYPE", "STATE")] + [line(g.group_id, g.type, g.state) for g in groups]


def parse_types(text: str) -> set[str]:
    """`--list --type consumer,classic`: Kafka's group type names, any case. Raises ValueError."""
    by_lower = {name.lower(): name for name in ("Classic", "Consumer", "Share")}
    types = set()
    for part in text.split(","):
        name = by_lower.get(part.strip().lower())
        if name is None:
            raise ValueError(f"Invalid types list '{text}'. Valid types are: classic, consumer, share")
        types.add(name)
    return types


def offsets_lines(rows: list[OffsetRow]) -> list[str]:
    """`--describe` (offsets): a blank line, the header, one line per row, in `rows` order."""
    group_w = max([15] + [len(r.group) for r in rows])
    topic_w = max([15] + [len(_text(r.topic)) for r in rows])
    consumer_w = max([15] + [len(_text(r.consumer_id)) for r in rows])
    host_w = max([15] + [len(_text(r.host)) for r in rows])

    def line(*cells: str) -> str:
        group, topic, partition, current, end, lag, consumer, host, client = cells
        return (f"{_pad(group, group_w)} {_pad(topic, topic_w)} {_pad(partition, 10)} "
                f"{_pad(current, 15)} {_pad(end, 15)} {_pad(lag, 15)} {_pad(consumer, consumer_w)} "
                f"{_pad(host, host_w)} {client}")

    header = line("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                  "CONSUMER-ID", "HOST", "CLIENT-ID")
    body = [line(r.group, _text(r.topic), _text(r.partition), _text(r.current_offset),
                 _text(r.log_end_offset), _text(r.lag), _text(r.consumer_id), _text(r.host),
                 _text(r.client_id)) for r in rows]
    return ["", header, *body]


def members_lines(rows: list[MemberRow]) -> list[str]:
    """`--describe --members`: the GROUP-INSTANCE-ID column appears only when a member is static."""
    static = any(r.group_instance_id for r in rows)
    group_w = max([15] + [len(r.group) for r in rows])
    consumer_w = max([15] + [len(r.consumer_id) for r in rows])
    instance_w = max([17] + [len(r.group_instance_id) for r in rows])
    host_w = max([15] + [len(r.host) for r in rows])
    client_w = max([15] + [len(r.client_id) for r in rows])

    def line(group: str, consumer: str, instance: str, host: str, client: str,
             partitions: str) -> str:
        middle = f"{_pad(instance, instance_w)} " if static else ""
        return (f"{_pad(group, group_w)} {_pad(consumer, consumer_w)} {middle}"
                f"{_pad(host, host_w)} {_pad(client, client_w)} {_pad(partitions, 15)} ")

    header = line("GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS")
    body = [line(r.group, r.consumer_id, r.group_instance_id, r.host, r.client_id,
                 str(r.partitions)) for r in rows]
    return ["", header, *body]


def state_lines(row: GroupStateRow) -> list[str]:
    """`--describe --state`."""
    group_w = max(15, len(row.group))
    coordinator_w = max(25, len(row.coordinator))

    def line(group: str, coordinator: str, strategy: str, state: str, members: str) -> str:
        return (f"{_pad(group, group_w)} {_pad(coordinator, coordinator_w)} {_pad(strategy, 20)} "
                f"{_pad(state, 20)} {members}")

    return ["", line("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"),
            line(row.group, row.coordinator, row.assignment_strategy or MISSING, row.state,
                 str(row.members))]


def reset_plan_lines(plan: dict[str, dict[tuple[str, int], int]]) -> list[str]:
    """`--reset-offsets`: GROUP TOPIC PARTITION NEW-OFFSET, by group, topic and partition."""
    if not plan:
        return [""]
    group_w = max([15] + [len(g) for g in plan])
    topic_w = max([15] + [len(t) for offsets in plan.values() for t, _ in offsets])

    def line(group: str, topic: str, partition: str, offset: str) -> str:
        return f"{_pad(group, group_w)} {_pad(topic, topic_w)} {_pad(partition, 10)} {offset}"

    lines = ["", line("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")]
    for group in sorted(plan):
        for (topic, partition), offset in sorted(plan[group].items()):
            lines.append(line(group, topic, str(partition), str(offset)))
    return lines


def delete_offsets_lines(results: dict[tuple[str, int | None], str | None]) -> list[str]:
    """`--delete-offsets`: TOPIC PARTITION STATUS; a status of None means success."""
    topic_w = max([15] + [len(t) for t, _ in results])

    def line(topic: str, partition: str, status: str) -> str:
        return f"{_pad(topic, topic_w)} {_pad(partition, 10)} {_pad(status, 15)}"

    lines = ["", line("TOPIC", "PARTITION", "STATUS")]
    for (topic, partition), error in sorted(results.items(),
                                            key=lambda kv: (kv[0][0], kv[0][1] or -1)):
        lines.append(line(topic, _text(partition),
                          "Successful" if error is None else f"Error: {error}"))
    return lines


def parse_states(text: str) -> set[str]:
    """`--list --state Stable,Empty`: Kafka's state names, any case. Raises ValueError."""
    by_lower = {name.lower(): name for name in CONSUMER_GROUP_STATES}
    states = set()
    for part in text.split(","):
        name = by_lower.get(part.strip().lower())
        if name is None:
            raise ValueError(f"Invalid state list '{text}'. Valid states are: "
                             f"{', '.join(CONSUMER_GROUP_STATES)}")
        states.add(name)
    return states


_DATETIME = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,3}))?"
    r"(Z|[+-]\d{2}(?::?\d{2})?)?")


def parse_datetime_ms(text: str) -> int:
    """`--to-datetime`: 'YYYY-MM-DDTHH:mm:SS.sss', optionally with 'Z' or '+hh:mm', as epoch ms.

    Like Kafka's Utils.getDateTime, a time without a zone is UTC. Raises ValueError.
    """
    match = _DATETIME.fullmatch(text.strip())
    if not match:
        raise ValueError(f"Error parsing timestamp '{text}': expected YYYY-MM-DDTHH:mm:SS.sss")
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    millis = int((match.group(7) or "0").ljust(3, "0"))
    zone = match.group(8)
    tz = timezone.utc
    if zone and zone != "Z":
        sign = -1 if zone[0] == "-" else 1
        digits = zone[1:].replace(":", "")
        tz = timezone(sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:] or 0)))
    moment = datetime(year, month, day, hour, minute, second, millis * 1000, tzinfo=tz)
    return int(moment.timestamp() * 1000)


_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?\d+)D)?"
    r"(?:T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+)(?:[.,](\d{0,9}))?S)?)?",
    re.IGNORECASE)


def parse_duration_ms(text: str) -> int:
    """`--by-duration`: an ISO-8601 duration as Java's Duration.parse reads it (PnDTnHnMn.nS),
    in milliseconds. Raises ValueError."""
    match = _DURATION.fullmatch(text.strip())
    if not match or text.strip().upper().endswith("T") or not any(match.groups()[1:5]):
        raise ValueError(f"Text cannot be parsed to a Duration: {text}")
    sign, days, hours, minutes, seconds, fraction = match.groups()
    seconds_ms = int(seconds or 0) * 1000
    if fraction:
        fraction_ms = int(fraction.ljust(3, "0")[:3])
        seconds_ms += -fraction_ms if (seconds or "").startswith("-") else fraction_ms
    total = (int(days or 0) * 86_400_000 + int(hours or 0) * 3_600_000
             + int(minutes or 0) * 60_000 + seconds_ms)
    return -total if sign == "-" else total
