"""The value types the console's pages are built from: what `cluster.py` answers, as frozen
dataclasses, so the pages and their tests never touch a Kafka client object."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Broker:
    id: int
    host: str
    port: int
    rack: str | None
    is_controller: bool

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class PartitionSizes:
    """A tiered partition's log as its leader describes it (DescribeLogDirs): `local_bytes` on
    its disk, and what the remote store holds — None where the leader does not say (a broker
    that does not send logbroker's remote log field, or segment metadata not read yet); the
    remote offsets are None without remote segments."""

    local_bytes: int
    remote_bytes: int | None = None
    remote_segments: int | None = None
    remote_start_offset: int | None = None
    remote_end_offset: int | None = None


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    """One partition as Metadata describes it, with its offsets when they were asked for.
    `start_offset <= end_offset`; the record count is their difference (compaction and
    transaction markers make it an upper bound)."""

    partition: int
    leader: int  # -1 when offline
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    start_offset: int | None = None
    end_offset: int | None = None
    sizes: PartitionSizes | None = None  # tiered topics only, on the topic page

    @property
    def offline(self) -> bool:
        return self.leader < 0

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)

    @property
    def records(self) -> int | None:
        if self.start_offset is None or self.end_offset is None:
            return None
        return max(0, self.end_offset - self.start_offset)


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    partitions: tuple[PartitionInfo, ...]
    internal: bool
    error: str | None = None

    @property
    def replication_factor(self) -> int:
        return max((len(p.replicas) for p in self.partitions), default=0)

    @property
    def records(self) -> int | None:
        counts = [p.records for p in self.partitions]
        return None if not counts or None in counts else sum(counts)

    @property
    def tiered(self) -> bool:
        return any(p.sizes is not None for p in self.partitions)

    @property
    def end_offset_sum(self) -> int | None:
        ends = [p.end_offset for p in self.partitions]
        return None if not ends or None in ends else sum(ends)


@dataclass(frozen=True, slots=True)
class ClusterHealth:
    brokers: tuple[Broker, ...]
    cluster_id: str | None
    controller_id: int | None
    topics: int
    partitions: int
    under_replicated: tuple[tuple[str, int], ...]
    offline: tuple[tuple[str, int], ...]
    under_min_isr: tuple[tuple[str, int], ...]
    replicas_by_broker: dict[int, int] = field(default_factory=dict)  # partition replicas held
    leaders_by_broker: dict[int, int] = field(default_factory=dict)  # partitions led
    # Bytes of the partitions in each broker's log dirs (DescribeLogDirs); None: not available.
    log_dir_bytes_by_broker: dict[int, int] | None = None
    log_dirs_unavailable: str | None = None  # why, then


@dataclass(frozen=True, slots=True)
class ConfigItem:
    name: str
    value: str | None
    source: str  # Kafka's ConfigSource name: DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG, …
    is_default: bool
    read_only: bool
    sensitive: bool


@dataclass(frozen=True, slots=True)
class Message:
    partition: int
    offset: int
    timestamp_ms: int | None
    timestamp_type: str
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


@dataclass(frozen=True, slots=True)
class MessagePage:
    """What one read of the message browser found: `messages` in display order, how many
    records were read to find them (more than shown when a filter is on), each partition's
    offsets at the time of the read, and the cursor of the next page (None at the end)."""

    messages: tuple[Message, ...]
    scanned: int
    watermarks: dict[int, tuple[int, int]] = field(default_factory=dict)
    timed_out: bool = False
    next_cursor: dict[int, int] | None = None  # where the next page starts (paging.py)


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    state: str
    simple: bool


@dataclass(frozen=True, slots=True)
class Member:
    member_id: str
    client_id: str
    host: str
    instance_id: str | None
    assignment: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class GroupOffset:
    """A partition the group has an offset for or has assigned: `lag = end - committed`."""

    topic: str
    partition: int
    committed: int | None
    end_offset: int | None
    member_id: str | None

    @property
    def lag(self) -> int | None:
        if self.committed is None or self.end_offset is None:
            return None
        return max(0, self.end_offset - self.committed)


@dataclass(frozen=True, slots=True)
class GroupInfo:
    group_id: str
    state: str
    protocol: str
    coordinator: Broker | None
    members: tuple[Member, ...]
    offsets: tuple[GroupOffset, ...]

    @property
    def total_lag(self) -> int:
        return sum(o.lag or 0 for o in self.offsets)

    @property
    def empty(self) -> bool:
        return not self.members


@dataclass(frozen=True, slots=True)
class Acl:
    resource_type: str
    resource_name: str
    pattern_type: str
    principal: str
    host: str
    operation: str
    permission: str


@dataclass(frozen=True, slots=True)
class ScramUser:
    name: str
    mechanisms: tuple[tuple[str, int], ...]  # (mechanism, iterations)
