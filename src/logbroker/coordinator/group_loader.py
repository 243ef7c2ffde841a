"""Which `__consumer_offsets` partitions this broker coordinates, and reading their groups back.

Kafka's GroupMetadataManager (ownedPartitions, loadingPartitions, epochForPartitionId,
doLoadGroupsAndOffsets) and GroupCoordinator.onElection / onResignation. `GroupLoader` is
ReplicaManager's leadership listener for the coordinator: when this broker becomes leader of an
offsets partition, the partition is *loading* until its log has been replayed into groups (in a
worker thread, up to the log end offset), then *owned*; when it stops leading, its groups are
dropped. `CoordinatedPartitions` keeps that bookkeeping; the coordinator installs and unloads the
groups themselves (their timers and parked requests are its business).

Replaying dispatches each record by its key's version, as Kafka's GroupCoordinatorShard.replay:
offset commits (key versions 0 and 1) are the same for every group type and handled here; each
group type brings a `GroupRecords` that takes the key versions of its own records (classic: 2;
Kafka 4's consumer groups: 3-8 and 16; share groups: 9-15) and makes its groups at the end. A key
version no type takes (a newer Kafka's record type) is skipped with a warning. A type's
`GroupRecords` is made when the load meets its first record, so a partition without consumer or
share groups never imports their modules (`LazyGroupRecords`).

A record of a group that Kafka places in another partition (`offsets_schema.partition_for`) is
not replayed: earlier logbroker versions placed groups by `hashCode & 0x7fffffff`, which differs
for every negative hash. The latest value of each such key is handed to `rehome` instead
(`LoadedGroups.strays`), which moves it where it belongs (coordinator/group_rehoming.py).

Why the epoch: a load runs in a worker thread and may finish after this broker has lost the
partition (and maybe won it back, with another broker's writes in between). A load started at
leader epoch e is installed only if the partition is still loading at e when it ends; otherwise it
is discarded, and a newer election has started a load of its own.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import struct
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import ClassVar, Protocol

from logbroker.clock import Clock
from logbroker.coordinator.classic_group import ClassicGroup
from logbroker.coordinator.group import Group
from logbroker.coordinator.offsets_log import replay_transactional
from logbroker.coordinator.offsets_schema import (
    OFFSETS_TOPIC,
    OffsetAndMetadata,
    OffsetCommitKey,
    UnknownSchemaError,
    decode_key,
    decode_offset_commit_value,
    key_group,
    partition_for,
)
from logbroker.storage.log import Log
from logbroker.types import TopicPartition

log = logging.getLogger("kafka.coordinator.group.GroupMetadataManager")


class CoordinatedPartitions:
    """Invariants: a partition is in at most one of `loading` and `owned`; `epochs[p]` is the
    newest leader epoch seen for partition p (in an election or a resignation) and never goes
    back; `loading[p]` is the epoch whose load may still be installed. Event loop only."""

    def __init__(self) -> None:
        self.epochs: dict[int, int] = {}
        self.loading: dict[int, int] = {}
        self.owned: set[int] = set()

    def elect(self, partition: int, epoch: int) -> bool:
        """This broker leads `partition` at `epoch`. True when a load must start; False for a
        stale epoch, a load already running at this epoch, or a partition already owned (a
        re-election of this broker keeps the groups it holds, parked requests included)."""
        if epoch < self.epochs.get(partition, -1):
            return False
        self.epochs[partition] = epoch
        if partition in self.owned or self.loading.get(partition) == epoch:
            return False
        self.loading[partition] = epoch
        return True

    def finish(self, partition: int, epoch: int) -> bool:
        """A load started at `epoch` ended: True (and the partition is owned) if it still counts."""
        if self.loading.get(partition) != epoch:
            return False
        del self.loading[partition]
        self.owned.add(partition)
        return True

    def resign(self, partition: int, epoch: int | None) -> bool:
        """This broker no longer leads `partition` (at `epoch`; None: the replica was stopped).
        True if its groups were loaded or loading and must be dropped."""
        if epoch is not None:
            if epoch < self.epochs.get(partition, -1):
                return False
            self.epochs[partition] = epoch
        held = partition in self.owned or partition in self.loading
        self.owned.discard(partition)
        self.loading.pop(partition, None)
        return held


class GroupRecords(Protocol):
    """One group type's records of one partition being loaded. Made afresh for each load and
    used by one thread: `replay` each record of a key version in KEY_VERSIONS in log order (a
    None value is a tombstone), then `groups` once."""

    KEY_VERSIONS: ClassVar[frozenset[int]]

    def replay(self, key: bytes, value: bytes | None) -> None: ...

    def groups(self, now_ms: int) -> Iterable[Group]: ...


class LazyGroupRecords:
    """A group type's `GroupRecords` class named by module and class, imported when a load first
    meets one of its key versions (from the worker thread: Python's import lock makes that safe).

    Why: KIP-848 and share groups' modules build their record codecs from Kafka's JSON at import
    and bring RE2 (~30 ms and ~3 MiB), which a broker whose `__consumer_offsets` holds
    only classic groups and offsets never needs. `KEY_VERSIONS` is stated here so that loading
    can dispatch without the import; the import checks it against the class's own."""

    def __init__(self, key_versions: frozenset[int], module: str, name: str) -> None:
        self.KEY_VERSIONS = key_versions  # noqa: N815 - GroupRecords' name
        self._module = module
        self._name = name

    def records_class(self) -> Callable[[], GroupRecords]:
        cls = getattr(importlib.import_module(self._module), self._name)
        if cls.KEY_VERSIONS != self.KEY_VERSIONS:
            raise AssertionError(f"{self._name} takes key versions {sorted(cls.KEY_VERSIONS)}, "
                                 f"not {sorted(self.KEY_VERSIONS)}")
        return cls

    def __call__(self) -> GroupRecords:
        return self.records_class()()


class GroupLoader:
    """Runs on the event loop; only `load_groups` runs in a worker thread."""

    RETRY_S = 1.0  # after a failed load (a segment swapped by the cleaner under the reader, …)

    def __init__(self, *, install: Callable[[dict[str, Group]], None],
                 rehome: Callable[[int, dict[bytes, bytes]], None],
                 unload: Callable[[int], int], num_partitions: Callable[[], int], clock: Clock,
                 record_types: Sequence[Callable[[], GroupRecords]]) -> None:
        """`rehome(partition, strays)` is called after each load is installed, with the records
        of groups placed elsewhere (often none)."""
        self.partitions = CoordinatedPartitions()
        self._install = install
        self._rehome = rehome
        self._unload = unload
        self._num_partitions = num_partitions
        self._clock = clock
        self._record_types = record_types

    def replay(self, records: Iterable[tuple[bytes, bytes | None]], partition_index: int) -> dict[str, Group]:
        """The groups that non-transactional `records` make (as if read from a partition's log)."""
        return replay_groups(((key, value, -1, None) for key, value in records), partition_index,
                             self._clock.time_ms(), self._record_types)

    def on_leadership_change(self, tp: TopicPartition, partition) -> None:
        """ReplicaManager's leadership listener: `partition` is None when the replica was stopped."""
        if tp.topic != OFFSETS_TOPIC:
            return
        if partition is not None and partition.is_leader:
            if self.partitions.elect(tp.partition, partition.leader_epoch):
                self._load(partition, in_background=True)
        elif self.partitions.resign(tp.partition, partition.leader_epoch if partition is not None else None):
            removed = self._unload(tp.partition)
            log.info("Finished unloading %s: removed %d cached group(s)", tp, removed)

    def load_now(self, partition) -> None:
        """At startup, before the listeners open: load a partition led here, blocking on disk."""
        if self.partitions.elect(partition.tp.partition, partition.leader_epoch):
            self._load(partition, in_background=False)

    def _load(self, partition, *, in_background: bool) -> None:
        index, epoch, log_ = partition.tp.partition, partition.leader_epoch, partition.log
        end_offset = log_.log_end_offset
        started_ms = self._clock.time_ms()
        args = (log_, end_offset, index, self._num_partitions(), started_ms, self._record_types)
        if not in_background or end_offset <= log_.log_start_offset:
            self._finish(partition, epoch, load_groups(*args), started_ms)
            return
        log.info("Scheduling loading of offsets and group metadata from %s at leader epoch %d", partition.tp, epoch)
        future = asyncio.get_running_loop().run_in_executor(None, load_groups, *args)
        future.add_done_callback(lambda f: self._loaded(partition, epoch, f, started_ms))

    def _loaded(self, partition, epoch: int, future, started_ms: int) -> None:
        if future.cancelled():
            return
        if future.exception() is not None:
            log.error("Error loading offsets from %s (retrying in %.0f s): %r", partition.tp, self.RETRY_S,
                      future.exception())
            asyncio.get_running_loop().call_later(self.RETRY_S, self._retry, partition, epoch)
            return
        self._finish(partition, epoch, future.result(), started_ms)

    def _retry(self, partition, epoch: int) -> None:
        if self.partitions.loading.get(partition.tp.partition) == epoch:  # not resigned or re-elected since
            self._load(partition, in_background=True)

    def _finish(self, partition, epoch: int, loaded: LoadedGroups, started_ms: int) -> None:
        if not self.partitions.finish(partition.tp.partition, epoch):
            log.info("Discarded the groups loaded from %s at leader epoch %d: leadership moved meanwhile",
                     partition.tp, epoch)
            return
        self._install(loaded.groups)
        log.info("Finished loading %d group(s) from %s at leader epoch %d in %d ms", len(loaded.groups),
                 partition.tp, epoch, self._clock.time_ms() - started_ms)
        self._rehome(partition.tp.partition, loaded.strays)


@dataclass(frozen=True, slots=True)
class LoadedGroups:
    """What one `__consumer_offsets` partition holds: `groups` placed in it, and `strays`, the
    latest value (never a tombstone) of each key of a group that Kafka places in another
    partition, in the order of their last writes."""

    groups: dict[str, Group]
    strays: dict[bytes, bytes]


def load_groups(log_: Log, end_offset: int, partition_index: int, num_partitions: int, now_ms: int,
                record_types: Sequence[Callable[[], GroupRecords]]) -> LoadedGroups:
    """The groups stored in `log_` below `end_offset`, with their committed offsets, and the
    records of groups placed elsewhere (`LoadedGroups`). Blocks on disk; touches no coordinator
    state, so it may run in a worker thread."""
    strays: dict[bytes, bytes] = {}
    records = placed_here(replay_transactional(log_, end_offset), partition_index, num_partitions, strays)
    groups = replay_groups(records, partition_index, now_ms, record_types)
    return LoadedGroups(groups, strays)


def placed_here(records: Iterable[tuple[bytes | None, bytes | None, int, bool | None]], partition_index: int,
                 num_partitions: int, strays: dict[bytes, bytes]
                 ) -> Iterator[tuple[bytes | None, bytes | None, int, bool | None]]:
    """`records` (replay_transactional's) without those of groups placed in another partition,
    whose latest values go to `strays` instead: a transactional offset commit once its COMMIT
    marker is read (an aborted one never; one still open is left where it is). Unreadable keys
    pass, for `replay_groups` to report."""
    pending: dict[int, dict[bytes, bytes | None]] = {}  # producer id → its open transaction's strays
    for record in records:
        key, value, producer_id, marker = record
        if marker is not None:
            committed = pending.pop(producer_id, {})
            if marker:
                for k, v in committed.items():
                    _keep_latest(strays, k, v)
            yield record
            continue
        try:
            group = key_group(key)
        except (UnknownSchemaError, ValueError, IndexError, struct.error):
            yield record
            continue
        if partition_for(group, num_partitions) == partition_index:
            yield record
        elif producer_id >= 0:
            pending.setdefault(producer_id, {})[key] = value
        else:
            _keep_latest(strays, key, value)


def _keep_latest(strays: dict[bytes, bytes], key: bytes, value: bytes | None) -> None:
    strays.pop(key, None)
    if value is not None:
        strays[key] = value


def replay_groups(records: Iterable[tuple[bytes | None, bytes | None, int, bool | None]], partition_index: int,
                  now_ms: int, record_types: Sequence[Callable[[], GroupRecords]]) -> dict[str, Group]:
    """The groups that `records` (replay_transactional's, in log order) make, with their
    committed offsets. Members come back as they were, without session timers (the coordinator
    arms them): those that do not heartbeat within their session timeout are then removed and the
    group rebalances, as on Kafka. A group id with offsets and no group record is an Empty classic
    group, as Kafka makes one for a commit from outside group management."""
    offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
    makers = {version: make for make in record_types for version in make.KEY_VERSIONS}
    made: dict[Callable[[], GroupRecords], GroupRecords] = {}  # each type's, at its first record
    unknown_versions: set[int] = set()
    # Transactional offset commits, by producer id then group: applied at their COMMIT marker.
    pending: dict[int, dict[str, dict[TopicPartition, OffsetAndMetadata]]] = {}
    for key_bytes, value, producer_id, marker in records:
        if marker is not None:
            for group_id, group_offsets in pending.pop(producer_id, {}).items():
                if marker:
                    offsets.setdefault(group_id, {}).update(group_offsets)
            continue
        try:
            (version,) = _KEY_VERSION.unpack_from(key_bytes)
            if version in (0, 1):
                key = decode_key(key_bytes)
                assert isinstance(key, OffsetCommitKey)
                tp = TopicPartition(key.topic, key.partition)
                if producer_id >= 0:
                    if value is not None:
                        pending.setdefault(producer_id, {}).setdefault(key.group, {})[tp] = \
                            decode_offset_commit_value(value)
                    continue
                group_offsets = offsets.setdefault(key.group, {})
                if value is None:
                    group_offsets.pop(tp, None)
                else:
                    group_offsets[tp] = decode_offset_commit_value(value)
            elif (make := makers.get(version)) is not None:
                records = made.get(make)
                if records is None:
                    records = made[make] = make()
                records.replay(key_bytes, value)
            elif version not in unknown_versions:
                unknown_versions.add(version)
                log.warning("Skipping records of %s-%d with key version %d, which this broker does not know",
                            OFFSETS_TOPIC, partition_index, version)
        except (UnknownSchemaError, ValueError, IndexError, struct.error) as exc:
            log.warning("Skipping an unreadable record of %s-%d: %s", OFFSETS_TOPIC, partition_index, exc)
    groups: dict[str, Group] = {}
    for make in record_types:  # in the order given: a later type's group of the same id wins
        for group in made[make].groups(now_ms) if make in made else ():
            groups[group.group_id] = group
    open_txn_groups = {group_id for by_group in pending.values() for group_id in by_group}
    for group_id in set(offsets) | open_txn_groups:
        if group_id not in groups and (offsets.get(group_id) or group_id in open_txn_groups):
            groups[group_id] = ClassicGroup(group_id, current_state_timestamp_ms=now_ms)
    for group_id, group in groups.items():
        group.offsets = offsets.get(group_id, {})
        group.pending_txn_offsets = {pid: by_group[group_id] for pid, by_group in pending.items()
                                     if group_id in by_group}
    return groups


_KEY_VERSION = struct.Struct(">h")
