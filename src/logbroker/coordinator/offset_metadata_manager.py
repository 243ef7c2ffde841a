"""Committed offsets of every type of group: OffsetCommit, OffsetFetch, OffsetDelete, expiration.

Kafka's OffsetMetadataManager. Offsets are OffsetCommitKey / OffsetCommitValue records in the
group's `__consumer_offsets` partition, appended (through the coordinator shell) before the
client hears of them and before they show in memory. Who may commit is the group's type's
business (Group.validate_offset_commit); everything else here is the same for every type.
Offsets committed inside a transaction are coordinator/transactional_offsets.py's. Runs on the
event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable

from logbroker.coordinator.classic_group import ClassicGroup
from logbroker.coordinator.group import Group
from logbroker.coordinator.offsets_schema import (
    OffsetAndMetadata,
    encode_offset_commit_key,
    encode_offset_commit_value,
)
from logbroker.errors import (
    CoordinatorNotAvailableError,
    GroupIdNotFoundError,
    GroupSubscribedToTopicError,
    IllegalGenerationError,
    KafkaError,
)
from logbroker.types import TopicPartition

log = logging.getLogger("kafka.coordinator.group.OffsetMetadataManager")


class OffsetMetadataManager:
    def __init__(self, coordinator) -> None:
        self.coordinator = coordinator
        self.config = coordinator.config
        self._expiration_task: asyncio.Task | None = None

    async def commit_offsets(self, *, group_id: str, member_id: str, group_instance_id: str | None,
                             generation_id: int, offsets: dict[TopicPartition, OffsetAndMetadata],
                             api_version: int = 8) -> None:
        """Store `offsets` (already validated per partition by the caller). Raises the error
        every partition gets. `generation_id` is the member epoch for a consumer group."""
        coordinator = self.coordinator
        coordinator.check_group(group_id)
        group = coordinator.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                # v9+ say so (a consumer-protocol member's commit after its group was deleted);
                # older versions keep Kafka's old answer.
                if api_version >= 9:
                    raise GroupIdNotFoundError(f"Group {group_id} not found.")
                raise IllegalGenerationError(f"group {group_id} does not exist")
            group = coordinator.groups[group_id] = ClassicGroup(group_id,
                                                                current_state_timestamp_ms=coordinator.now_ms())
        if group.is_dead:
            raise CoordinatorNotAvailableError(f"group {group_id} is being removed")
        group.validate_offset_commit(member_id=member_id, group_instance_id=group_instance_id,
                                     generation_id_or_member_epoch=generation_id, is_transactional=False,
                                     api_version=api_version)
        if isinstance(group, ClassicGroup) and member_id in group.members:
            # In the classic protocol a commit keeps the member's session alive.
            coordinator.classic.schedule_heartbeat(group, group.members[member_id])
        if not offsets:
            return
        entries = [(encode_offset_commit_key(group_id, tp.topic, tp.partition), encode_offset_commit_value(value))
                   for tp, value in offsets.items()]
        await coordinator.append(group_id, entries, for_offsets=True)
        if coordinator.groups.get(group_id) is group:
            group.offsets.update(offsets)

    def fetch_offsets(self, group_id: str, partitions: Iterable[TopicPartition] | None, *,
                      member_id: str | None = None, member_epoch: int = -1
                      ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """Committed offsets; all of the group's when `partitions` is None. OffsetFetch v9+ names
        the asking member, which the group may check (a consumer group: its epoch)."""
        self.coordinator.check_group(group_id)
        group = self.coordinator.groups.get(group_id)
        if group is not None and not group.is_dead:
            group.validate_offset_fetch(member_id=member_id, member_epoch=member_epoch)
        offsets = group.offsets if group is not None and not group.is_dead else {}
        if partitions is None:
            return dict(offsets)
        return {tp: offsets.get(tp) for tp in partitions}

    async def delete_offsets(self, group_id: str, partitions: list[TopicPartition]
                             ) -> dict[TopicPartition, KafkaError | None]:
        self.coordinator.check_group(group_id)
        group = self.coordinator.groups.get(group_id)
        if group is None or group.is_dead:
            raise GroupIdNotFoundError(f"group {group_id} does not exist")
        subscribed: set[str] | None = set()
        if not group.is_empty:
            group.validate_offset_delete()
            subscribed = group.subscribed_topics()
        results: dict[TopicPartition, KafkaError | None] = {}
        to_delete = []
        for tp in partitions:
            if subscribed is None or tp.topic in subscribed:
                results[tp] = GroupSubscribedToTopicError(f"group {group_id} is subscribed to {tp.topic}")
            else:
                results[tp] = None
                if tp in group.offsets:
                    to_delete.append(tp)
        if to_delete:
            await self.coordinator.append(group_id, [(encode_offset_commit_key(group_id, tp.topic, tp.partition), None)
                                                     for tp in to_delete], for_offsets=True)
            for tp in to_delete:
                group.offsets.pop(tp, None)
        return results

    # -- expiration -----------------------------------------------------------------------------
    def start_expiration(self) -> None:
        """Look for expired offsets every offsets.retention.check.interval.ms (Kafka's
        delete-expired-group-metadata task)."""
        async def loop() -> None:
            while True:
                await asyncio.sleep(self.config.offsets_retention_check_interval_ms / 1000)
                try:
                    await self.expire_offsets()
                except Exception:  # noqa: BLE001 - retried next round
                    log.exception("Expiring committed offsets failed")
        self._expiration_task = asyncio.get_running_loop().create_task(loop(), name="offset expiration")

    def stop_expiration(self) -> None:
        if self._expiration_task is not None:
            self._expiration_task.cancel()

    def expired(self, group: Group, now_ms: int) -> list[TopicPartition]:
        """KIP-211: an offset expires at its explicit expire timestamp if the commit gave one;
        otherwise offsets.retention.minutes after the base its group's type gives (Kafka's
        offset expiration condition) — and never while a member consumes its topic."""
        retention_ms = self.config.offsets_retention_minutes * 60_000
        base = group.offset_expiration_base()
        subscribed = group.subscribed_topics()
        if base is None or subscribed is None:
            return []
        expired = []
        for tp, committed in group.offsets.items():
            if committed.expire_timestamp_ms >= 0:
                if now_ms >= committed.expire_timestamp_ms:
                    expired.append(tp)
            elif tp.topic not in subscribed and now_ms - base(committed) >= retention_ms:
                expired.append(tp)
        return expired

    async def expire_offsets(self) -> int:
        """Write tombstones for expired offsets, and for empty groups left without any. Returns
        how many offsets expired."""
        coordinator = self.coordinator
        now_ms = coordinator.now_ms()
        total = 0
        for group in list(coordinator.groups.values()):
            try:
                coordinator.check_group(group.group_id)
            except KafkaError:
                continue
            # A group whose heartbeats take a lock (a consumer group) is expired under it, so
            # that no member joins between the check and the tombstones.
            async with getattr(group, "lock", None) or contextlib.nullcontext():
                if coordinator.groups.get(group.group_id) is not group:
                    continue
                expired = self.expired(group, now_ms)
                remove_group = (group.is_empty and not group.is_dead and len(expired) == len(group.offsets)
                                and not group.pending_txn_offsets)  # a transaction may still commit some
                if not expired and not remove_group:
                    continue
                entries = [(encode_offset_commit_key(group.group_id, tp.topic, tp.partition), None)
                           for tp in expired]
                if remove_group:
                    entries += group.tombstones()
                await coordinator.append(group.group_id, entries, for_offsets=False)
                for tp in expired:
                    group.offsets.pop(tp, None)
                total += len(expired)
                if remove_group and group.is_empty and not group.offsets:
                    coordinator.remove_group(group)
        if total:
            log.info("Removed %d expired offsets", total)
        return total
