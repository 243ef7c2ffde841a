"""Moving groups into the `__consumer_offsets` partition where Kafka places them.

Earlier logbroker versions placed a group by `hashCode & 0x7fffffff` instead of Kafka's
`Utils.abs(hashCode)`, which differs for every negative hash, so their data dirs hold such groups
in a partition that no longer coordinates them. Loading a partition sets the records of those
groups apart (group_loader.LoadedGroups.strays: the latest value of each of their keys); this copies
them to the partition that owns the group, then writes tombstones for them where they were found —
in that order, so a crash in between leaves them in both places, and the next load copies only
what the owner does not hold yet (a group the owner holds keeps the owner's records, which are
newer) before writing the tombstones again. Every copy is an ordinary append, acks=-1, so it is
replicated and compacted like any other coordinator write.

Records wait until this broker has loaded the owning partition (in a cluster another broker may
lead it; they then wait until leadership brings the partition here, or the partition they were
found in moves away and its next leader takes them over). While records wait for or are being
copied into a partition, its groups answer COORDINATOR_LOAD_IN_PROGRESS, so no client reads or
commits a group before its offsets have arrived. A transactional offset commit whose transaction
was still open is left where it was. Event loop only.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from logbroker.coordinator.offsets_schema import OFFSETS_TOPIC, key_group, partition_for
from logbroker.errors import KafkaError
from logbroker.types import TopicPartition

if TYPE_CHECKING:
    from logbroker.coordinator.group_coordinator import GroupCoordinator

log = logging.getLogger("kafka.coordinator.group.GroupMetadataManager")

RECORDS_PER_BATCH = 500  # ~100 bytes each: batches well under max.message.bytes


@dataclass(frozen=True, slots=True)
class Strays:
    """Records (key → latest value) of groups owned by another partition, found in `source`."""

    source: int
    records: dict[bytes, bytes]


class GroupRehoming:
    """Invariants: `waiting[q]` holds what was found for partition q and not copied yet; `moving`
    holds the partitions being copied into (at most one copy per partition at a time); a partition
    in either is `blocked`."""

    def __init__(self, coordinator: GroupCoordinator) -> None:
        self.coordinator = coordinator
        self.waiting: dict[int, list[Strays]] = {}
        self.moving: set[int] = set()
        self._tasks: set[asyncio.Task] = set()

    def blocked(self, partition: int) -> bool:
        return partition in self.waiting or partition in self.moving

    def found(self, source: int, records: dict[bytes, bytes]) -> None:
        """`source` was loaded, holding `records` of groups placed elsewhere (often none): set
        them aside by owner, then copy into every owner loaded here."""
        num_partitions = self.coordinator.num_partitions
        by_owner: dict[int, dict[bytes, bytes]] = {}
        for key, value in records.items():
            by_owner.setdefault(partition_for(key_group(key), num_partitions), {})[key] = value
        for owner, owned_records in sorted(by_owner.items()):
            self.waiting.setdefault(owner, []).append(Strays(source, owned_records))
            log.info("Found %d record(s) in %s-%d of groups that %s-%d holds; moving them there",
                     len(owned_records), OFFSETS_TOPIC, source, OFFSETS_TOPIC, owner)
        self._start_ready()

    def forget(self, source: int) -> None:
        """This broker no longer leads `source`: what was found there is its next leader's to move."""
        for owner in list(self.waiting):
            kept = [s for s in self.waiting[owner] if s.source != source]
            if kept:
                self.waiting[owner] = kept
            else:
                del self.waiting[owner]

    def _start_ready(self) -> None:
        owned = self.coordinator.loader.partitions.owned
        for owner in [q for q in self.waiting if q in owned and q not in self.moving]:
            self.moving.add(owner)
            task = asyncio.get_running_loop().create_task(self._move(owner, self.waiting.pop(owner)))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _move(self, owner: int, found: list[Strays]) -> None:
        try:
            for strays in found:
                await self._move_one(owner, strays)
        finally:
            self.moving.discard(owner)
            self._start_ready()  # more may have been found meanwhile

    async def _move_one(self, owner: int, strays: Strays) -> None:
        coordinator = self.coordinator
        fresh = [(key, value) for key, value in strays.records.items() if key_group(key) not in coordinator.groups]
        source_tp, owner_tp = TopicPartition(OFFSETS_TOPIC, strays.source), TopicPartition(OFFSETS_TOPIC, owner)
        try:
            for i in range(0, len(fresh), RECORDS_PER_BATCH):
                await coordinator.append_to(owner_tp, fresh[i:i + RECORDS_PER_BATCH], for_offsets=True)
            groups = coordinator.loader.replay(fresh, owner)
            coordinator.install_groups(groups)
            tombstones = [(key, None) for key in strays.records]
            for i in range(0, len(tombstones), RECORDS_PER_BATCH):
                await coordinator.append_to(source_tp, tombstones[i:i + RECORDS_PER_BATCH], for_offsets=True)
        except KafkaError as exc:
            log.warning("Could not move groups from %s to %s (%s); they stay in %s until its next load",
                        source_tp, owner_tp, exc, source_tp)
            return
        log.info("Moved %d group(s) (%d record(s)) from %s to %s, where Kafka places them; %d record(s) "
                 "of groups %s already held were left out", len(groups), len(fresh), source_tp, owner_tp,
                 len(strays.records) - len(fresh), owner_tp)
