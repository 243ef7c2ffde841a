"""Offsets committed inside a transaction (TxnOffsetCommit), as Kafka's GroupMetadataManager keeps
them: appended to the group's `__consumer_offsets` partition in a transactional batch carrying
the producer's id and epoch, held per group as *pending* for that producer id, and made the
group's committed offsets only when the transaction's COMMIT marker is written to that partition
(an ABORT drops them). OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT for a
partition with a pending offset. Replaying a partition at load does the same with the markers it
meets (`load_groups`), so a crash between the offsets and the marker exposes nothing.

The batch's sequence continues the producer's last one on that partition (0 after an epoch
bump), so the log's producer-state checks accept it like a producer's own batch. Runs on the event
loop.
"""

from __future__ import annotations

from logbroker.coordinator.classic_group import ClassicGroup
from logbroker.coordinator.group import Group
from logbroker.coordinator.offsets_log import COMMIT_TIMEOUT_MS, map_append_error
from logbroker.coordinator.offsets_schema import OFFSETS_TOPIC, OffsetAndMetadata, encode_offset_commit_key, \
    encode_offset_commit_value
from logbroker.errors import CoordinatorNotAvailableError
from logbroker.records.builder import build_batch
from logbroker.types import TopicPartition


async def commit_transactional_offsets(coordinator, *, group_id: str, producer_id: int, producer_epoch: int,
                                       member_id: str, group_instance_id: str | None, generation_id: int,
                                       offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
    """Validate as Kafka's doTxnCommitOffsets and append; raises the error every partition gets."""
    coordinator.check_group(group_id)
    group = coordinator.groups.get(group_id)
    if group is None:
        group = coordinator.groups[group_id] = ClassicGroup(group_id, current_state_timestamp_ms=coordinator.now_ms())
    if group.is_dead:
        raise CoordinatorNotAvailableError(f"group {group_id} is being removed")
    group.validate_offset_commit(member_id=member_id, group_instance_id=group_instance_id,
                                 generation_id_or_member_epoch=generation_id, is_transactional=True,
                                 api_version=0)
    if not offsets:
        return
    tp = coordinator.coordinator_partition(group_id)
    partition = coordinator.replica_manager.leader_partition(tp)
    entry = partition.log.producer_state.last_entry(producer_id)
    sequence = entry.last_seq + 1 if entry is not None and entry.producer_epoch == producer_epoch \
        and entry.last_seq >= 0 else 0
    now_ms = coordinator.now_ms()
    records = [(encode_offset_commit_key(group_id, p.topic, p.partition), encode_offset_commit_value(o), (), now_ms)
               for p, o in offsets.items()]
    batch = bytearray(build_batch(records, producer_id=producer_id, producer_epoch=producer_epoch,
                                  base_sequence=sequence, transactional=True, now_ms=now_ms))
    # Pending before the append, as Kafka's prepareTxnOffsetCommit: a marker written while the
    # append waits for its replicas (an abort on timeout) must find them.
    pending = group.pending_txn_offsets.setdefault(producer_id, {})
    pending.update(offsets)
    results = await coordinator.replica_manager.append_records(
        timeout_ms=COMMIT_TIMEOUT_MS, required_acks=-1, entries={tp: batch})
    error = results[tp].error
    if error is not None:
        for p, o in offsets.items():
            if pending.get(p) is o:
                del pending[p]
        if not pending and group.pending_txn_offsets.get(producer_id) is pending:
            del group.pending_txn_offsets[producer_id]
        raise map_append_error(error, for_offsets=True)


def complete_transactional_offsets(coordinator, tp: TopicPartition, producer_id: int, commit: bool) -> None:
    """A marker was written to `tp`: the pending offsets of `producer_id` in the groups of that
    `__consumer_offsets` partition become committed (COMMIT) or are dropped (ABORT)."""
    if tp.topic != OFFSETS_TOPIC:
        return
    for group in list(coordinator.groups.values()):
        pending = group.pending_txn_offsets.get(producer_id)
        if pending is None or coordinator.partition_for(group.group_id) != tp.partition:
            continue
        del group.pending_txn_offsets[producer_id]
        if commit:
            group.offsets.update(pending)


def has_pending_offset(group: Group | None, tp: TopicPartition) -> bool:
    return group is not None and any(tp in pending for pending in group.pending_txn_offsets.values())
