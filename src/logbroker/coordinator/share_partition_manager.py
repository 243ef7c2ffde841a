"""The share-partition manager: ShareFetch and ShareAcknowledge on a partition leader (KIP-932).

Kafka's SharePartitionManager. It owns the SharePartitions of the partitions led here (one per
share group and partition, created on first fetch from the state the share coordinator keeps, or
at `share.auto.offset.reset` — latest unless the group is configured otherwise), the share
sessions, and the acquisition-lock timers.

Share sessions (KIP-932): a member opens one with session epoch 0 (naming the partitions it
wants), then sends epochs 1, 2, … on each ShareFetch or ShareAcknowledge, adding partitions and
forgetting others; epoch -1 closes it and releases what it holds. A non-zero epoch without a
session is SHARE_SESSION_NOT_FOUND, a wrong one INVALID_SHARE_SESSION_EPOCH; either leaves the
session as it was.

Order of work, and why: a state change (acknowledgements, a lock expiry, a member's records
released) is written through the persister (acks=-1 on `__share_group_state`) *before* it is
applied and before the response says it succeeded, so a restart never redelivers an acknowledged
record, and a write that fails leaves the records as they were (the client hears the error; an
expired lock is retried after a backoff). Writes of one share-partition go one at a time, each
the state the previous one left plus its own change, so a failed write never leaks into a later
one. Acquisition is not persisted (a restart makes acquired records available again, which is
what the client expects of a lost lock). When nothing
can be acquired the fetch waits in the fetch purgatory, woken by appends to the partition and by
released records (lock expiry, RELEASE, a member leaving), up to its max wait.

Runs on the event loop; reads are the log's (page-cache reads of the batches the client will get).
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from logbroker.clock import Clock
from logbroker.coordinator.share_partition import AcquiredRecords, LogBatch, SharePartition, Transition
from logbroker.coordinator.share_persister import SharePersister
from logbroker.coordinator.share_state_log import SharePartitionKey, ShareSnapshot
from logbroker.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    FencedLeaderEpochError,
    FencedStateEpochError,
    InvalidRequestError,
    InvalidShareSessionEpochError,
    KafkaError,
    NotCoordinatorError,
    RequestTimedOutError,
    ShareSessionNotFoundError,
)
from logbroker.records.record_batch import iter_batches
from logbroker.replication.purgatory import DelayedOperation
from logbroker.types import TopicPartition

log = logging.getLogger("kafka.server.share.SharePartitionManager")

RETRY_EXPIRY_S = 1.0  # after a failed write of released locks
FINAL_SHARE_SESSION_EPOCH = -1
INITIAL_SHARE_SESSION_EPOCH = 0


@dataclass(slots=True)
class ShareSession:
    group_id: str
    member_id: str
    epoch: int  # the epoch the next request must carry
    # (topic id, partition) → the partition by name, as when the client added it: a topic
    # deleted and created again under its name is another partition, with another id.
    partitions: dict[tuple[uuid.UUID, int], TopicPartition] = field(default_factory=dict)


@dataclass(slots=True)
class AcquiredPartition:
    """What one partition gives a ShareFetch: the batches' bytes and the acquired ranges."""

    records: bytes = b""
    acquired: list[AcquiredRecords] = field(default_factory=list)
    error: KafkaError | None = None


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= 0x7FFFFFFF else epoch + 1


class SharePartitionManager:
    def __init__(self, *, config, replica_manager, persister: SharePersister, clock: Clock,
                 topic_id_of: Callable[[str], object], group_config: Callable[[str, str], str]) -> None:
        """`group_config(group_id, key)` is the group's value of a group config (Kafka's
        share.auto.offset.reset, share.record.lock.duration.ms, share.isolation.level)."""
        self.config = config
        self.replica_manager = replica_manager
        self.persister = persister
        self.clock = clock
        self._topic_id_of = topic_id_of
        self._group_config = group_config
        self.share_partitions: dict[tuple[str, TopicPartition], SharePartition] = {}
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        self._loading: dict[tuple[str, TopicPartition], asyncio.Future] = {}
        self._timers: dict[tuple[str, TopicPartition], asyncio.TimerHandle] = {}
        # share.isolation.level == read_committed, read with the share-partition's other group
        # configs when it is loaded (a group config read may block on ZooKeeper).
        self._read_committed: dict[tuple[str, TopicPartition], bool] = {}
        self._write_locks: dict[tuple[str, TopicPartition], asyncio.Lock] = {}
        self._background: set[asyncio.Task] = set()

    # -- share sessions -----------------------------------------------------------------------
    def session(self, group_id: str, member_id: str, epoch: int, *, acknowledge_only: bool = False
                ) -> ShareSession | None:
        """Check `epoch` against the member's session and move it on. Epoch 0 (ShareFetch only)
        opens a new session; -1 returns the session being closed (None if there was none)."""
        key = (group_id, member_id)
        current = self.sessions.get(key)
        if epoch == INITIAL_SHARE_SESSION_EPOCH:
            if acknowledge_only:
                raise InvalidShareSessionEpochError("ShareAcknowledge cannot open a share session (epoch 0)")
            if current is not None:
                self._close(current)
            session = self.sessions[key] = ShareSession(group_id, member_id, 1)
            return session
        if current is None:
            raise ShareSessionNotFoundError(f"No share session for member {member_id} of group {group_id}")
        if epoch == FINAL_SHARE_SESSION_EPOCH:
            return current
        if epoch != current.epoch:
            raise InvalidShareSessionEpochError(
                f"Share session epoch {epoch} of member {member_id}; expected {current.epoch}")
        current.epoch = next_epoch(epoch)
        return current

    def close_session(self, session: ShareSession) -> None:
        if self.sessions.get((session.group_id, session.member_id)) is session:
            del self.sessions[(session.group_id, session.member_id)]
        self._close(session)

    def _close(self, session: ShareSession) -> None:
        for tp in session.partitions.values():
            self._release_member(session.group_id, tp, session.member_id)

    def on_member_removed(self, group_id: str, member_id: str) -> None:
        """The member left its share group (or timed out). A leaving client still sends its last
        acknowledgements (ShareAcknowledge, epoch -1) after its leave heartbeat, so its session
        and records stay for one acquisition-lock period; then the session is closed and what it
        still holds is released."""
        session = self.sessions.get((group_id, member_id))
        if session is None:
            return

        def close_if_left_open() -> None:
            if self.sessions.get((group_id, member_id)) is session:
                self.close_session(session)
        grace_s = self.config.group_share_record_lock_duration_ms / 1000
        asyncio.get_running_loop().call_later(grace_s, close_if_left_open)

    def _release_member(self, group_id: str, tp: TopicPartition, member_id: str) -> None:
        sp = self.share_partitions.get((group_id, tp))
        if sp is not None and (transition := sp.release_member(member_id)) is not None:
            self._in_background(sp, transition, "release the records of a member that left")

    # -- share-partitions -----------------------------------------------------------------------
    def key_of(self, group_id: str, tp: TopicPartition) -> SharePartitionKey:
        return SharePartitionKey(group_id, self._topic_id_of(tp.topic), tp.partition)

    async def share_partition(self, group_id: str, tp: TopicPartition) -> SharePartition:
        """The share-partition of `group_id` on `tp`, a partition led here (else
        NOT_LEADER_OR_FOLLOWER), loaded from its persisted state on first use."""
        partition = self.replica_manager.leader_partition(tp)
        sp = self.share_partitions.get((group_id, tp))
        if sp is not None:
            return sp
        pending = self._loading.get((group_id, tp))
        if pending is not None:
            return await asyncio.shield(pending)
        future = self._loading[(group_id, tp)] = asyncio.get_running_loop().create_future()
        try:
            sp = await self._load(group_id, tp, partition)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: the waiters, if any, see it too
            raise
        finally:
            self._loading.pop((group_id, tp), None)
        self.share_partitions[(group_id, tp)] = sp
        future.set_result(sp)
        return sp

    async def _load(self, group_id: str, tp: TopicPartition, partition) -> SharePartition:
        key = self.key_of(group_id, tp)
        leader_epoch = partition.leader_epoch
        snapshot = await self.persister.read(key, leader_epoch=leader_epoch)
        if snapshot is None or snapshot.start_offset < 0:
            reset = self._group_config(group_id, "share.auto.offset.reset")
            start = partition.log.log_start_offset if reset == "earliest" else partition.high_watermark
            snapshot = ShareSnapshot(0, 0, leader_epoch, start)
            await self.persister.write(key, snapshot)
            log.info("Initialized share-partition %s-%s at offset %d (share.auto.offset.reset=%s)",
                     group_id, tp, start, reset)
        else:
            log.info("Loaded share-partition %s-%s at start offset %d", group_id, tp, snapshot.start_offset)
        sp = SharePartition(
            group_id=group_id, tp=tp, start_offset=max(snapshot.start_offset, partition.log.log_start_offset),
            state_batches=list(snapshot.state_batches), state_epoch=snapshot.state_epoch, leader_epoch=leader_epoch,
            delivery_count_limit=self.config.group_share_delivery_count_limit,
            max_in_flight_records=self.config.group_share_partition_max_record_locks,
            lock_duration_ms=int(self._group_config(group_id, "share.record.lock.duration.ms")), clock=self.clock)
        self._read_committed[(group_id, tp)] = \
            self._group_config(group_id, "share.isolation.level") == "read_committed"
        return sp

    async def apply(self, sp: SharePartition, transition: Transition) -> None:
        """Persist the state `transition` leads to, then commit it; when the write fails, abort it
        (the records stay as they were) and raise. A state fenced by a newer state or leader epoch
        (its offsets were altered, or another broker leads the partition now) is dropped and
        reloaded on next use."""
        key = (sp.group_id, sp.tp)
        lock = self._write_locks.setdefault(key, asyncio.Lock())
        try:
            async with lock:
                await self.persist(sp, transition)
        except BaseException:
            sp.abort(transition)
            raise
        sp.commit(transition)

    async def persist(self, sp: SharePartition, transition: Transition | None = None) -> None:
        """Write the share-partition's state (with `transition` applied); returns once the share
        coordinator has it."""
        start_offset, batches = sp.persisted_state(transition)
        try:
            await self.persister.write(self.key_of(sp.group_id, sp.tp), ShareSnapshot(
                0, sp.state_epoch, sp.leader_epoch, start_offset, tuple(batches)))
        except (FencedStateEpochError, FencedLeaderEpochError):
            if self.share_partitions.get((sp.group_id, sp.tp)) is sp:
                self.drop(sp.group_id, sp.tp)
            raise

    def _in_background(self, sp: SharePartition, transition: Transition, what: str) -> None:
        """Apply a transition no client waits for (records released), then wake the fetches
        waiting on the partition; a failed write is logged, and expired locks are retried."""
        async def store() -> None:
            retry_after_s = 0.0
            try:
                await self.apply(sp, transition)
            except KafkaError as exc:
                log.warning("Failed to persist share-partition %s-%s to %s; the records stay as they were: %s",
                            sp.group_id, sp.tp, what, exc)
                retry_after_s = RETRY_EXPIRY_S
            self.replica_manager.fetch_purgatory.check_and_complete(sp.tp)
            if self.share_partitions.get((sp.group_id, sp.tp)) is sp:
                self._arm_lock_timer(sp, min_delay_s=retry_after_s)
        task = asyncio.get_running_loop().create_task(store())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _arm_lock_timer(self, sp: SharePartition, *, min_delay_s: float = 0.0) -> None:
        deadline = sp.next_lock_deadline_ms()
        key = (sp.group_id, sp.tp)
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        if deadline is None:
            return
        delay_s = max((deadline - self.clock.monotonic_ms()) / 1000, min_delay_s, 0)
        self._timers[key] = asyncio.get_running_loop().call_later(delay_s, self._locks_expired, sp)

    def _locks_expired(self, sp: SharePartition) -> None:
        self._timers.pop((sp.group_id, sp.tp), None)
        if self.share_partitions.get((sp.group_id, sp.tp)) is not sp:
            return
        transition = sp.expire_locks()
        if transition is None:  # early, or the expired locks are being released already
            self._arm_lock_timer(sp)
            return
        log.info("Releasing %d record(s) of share-partition %s-%s whose acquisition lock expired",
                 len(transition.states), sp.group_id, sp.tp)
        self._in_background(sp, transition, "release expired acquisition locks")

    # -- acknowledging ----------------------------------------------------------------------
    async def acknowledge(self, group_id: str, member_id: str,
                          acknowledgements: dict[TopicPartition, list[tuple[int, int, list[int]]]]
                          ) -> dict[TopicPartition, KafkaError | None]:
        """Persist each partition's acknowledgements, then apply them; per partition the error
        (a partition whose write failed keeps its records as they were)."""
        async def one(tp: TopicPartition, batches) -> KafkaError | None:
            try:
                sp = await self.share_partition(group_id, tp)
                transition = sp.acknowledge(member_id, batches)
                if transition is None:  # nothing to change (a GAP over settled offsets)
                    return None
                try:
                    await self.apply(sp, transition)
                finally:
                    self._arm_lock_timer(sp)
                    self.replica_manager.fetch_purgatory.check_and_complete(sp.tp)
            except KafkaError as exc:
                return exc
            return None
        tps = list(acknowledgements)
        errors = await asyncio.gather(*(one(tp, acknowledgements[tp]) for tp in tps))
        return dict(zip(tps, errors))

    # -- acquiring ----------------------------------------------------------------------------
    async def acquire(self, group_id: str, member_id: str, partitions: list[TopicPartition], *,
                      max_wait_ms: int, max_bytes: int, max_records: int, record_limit: bool = False
                      ) -> dict[TopicPartition, AcquiredPartition]:
        """Acquire records of `partitions` for the member; waits up to `max_wait_ms` for some.
        `max_records` is soft, on batch boundaries, unless `record_limit` (SharePartition.acquire)."""
        ready: dict[TopicPartition, SharePartition] = {}
        errors: dict[TopicPartition, AcquiredPartition] = {}
        initializing = False
        for tp in partitions:
            try:
                ready[tp] = await self.share_partition(group_id, tp)
            except (CoordinatorNotAvailableError, NotCoordinatorError, CoordinatorLoadInProgressError,
                    RequestTimedOutError) as exc:
                # The share coordinator is moving or loading: the share-partition is still
                # initializing, which a fetch sees as no records yet (clients take these
                # coordinator errors as fatal on a fetch).
                log.info("Share-partition %s-%s is not initialized yet: %s", group_id, tp, exc)
                initializing = True
            except KafkaError as exc:
                errors[tp] = AcquiredPartition(error=exc)
        if initializing and not ready and not errors:
            await asyncio.sleep(min(max_wait_ms, 500) / 1000)
            return {}

        def try_acquire() -> dict[TopicPartition, AcquiredPartition] | None:
            results = self._acquire_now(member_id, ready, max_bytes=max_bytes, max_records=max_records,
                                        record_limit=record_limit)
            if any(r.acquired or r.error for r in results.values()):
                return results | errors
            return None

        results = try_acquire()
        if results is not None or max_wait_ms <= 0 or not ready or errors:
            return results if results is not None else {tp: AcquiredPartition() for tp in ready} | errors
        op = DelayedOperation(try_complete=try_acquire,
                              on_expiration=lambda: {tp: AcquiredPartition() for tp in ready} | errors,
                              keys=list(ready))
        return await self.replica_manager.fetch_purgatory.wait(op, max_wait_ms)

    def _acquire_now(self, member_id: str, ready: dict[TopicPartition, SharePartition], *,
                     max_bytes: int, max_records: int, record_limit: bool
                     ) -> dict[TopicPartition, AcquiredPartition]:
        results: dict[TopicPartition, AcquiredPartition] = {}
        remaining_records, remaining_bytes = max_records, max_bytes
        for tp, sp in ready.items():
            if self.share_partitions.get((sp.group_id, tp)) is not sp:
                continue  # unloaded meanwhile (leadership moved)
            if remaining_records <= 0 or remaining_bytes <= 0 or not sp.can_acquire():
                results[tp] = AcquiredPartition()
                continue
            try:
                result = self._acquire_partition(member_id, sp, max_bytes=remaining_bytes,
                                                 max_records=remaining_records, record_limit=record_limit)
            except KafkaError as exc:
                result = AcquiredPartition(error=exc)
            results[tp] = result
            remaining_records -= sum(a.last_offset - a.first_offset + 1 for a in result.acquired)
            remaining_bytes -= len(result.records)
        return results

    def _acquire_partition(self, member_id: str, sp: SharePartition, *, max_bytes: int, max_records: int,
                           record_limit: bool) -> AcquiredPartition:
        partition = self.replica_manager.leader_partition(sp.tp)
        offset = sp.next_fetch_offset()
        read_committed = self._read_committed.get((sp.group_id, sp.tp), False)
        if offset >= (partition.last_stable_offset if read_committed else partition.high_watermark):
            return AcquiredPartition()
        info = partition.read_records(offset, max_bytes=max_bytes, current_leader_epoch=-1,
                                      fetch_only_committed=True, min_one_message=True,
                                      read_committed=read_committed)
        region = info.region
        if region is None or region.size == 0:
            return AcquiredPartition()
        data = os.pread(region.fd, region.size, region.position)
        batches = [(position, header) for position, header in iter_batches(data)]
        aborted = aborted_ranges(info.aborted_transactions or ())
        acquired = sp.acquire(member_id, [
            LogBatch(h.base_offset, h.last_offset, not h.is_control and not is_aborted(h, aborted))
            for _, h in batches], max_records=max_records, record_limit=record_limit)
        if not acquired:
            if sp.next_fetch_offset() != offset:
                self.replica_manager.fetch_purgatory.check_and_complete(sp.tp)
            return AcquiredPartition()
        self._arm_lock_timer(sp)
        # Only the batches holding acquired records go back: the client delivers exactly the
        # acquired offsets of them.
        wanted = []
        for position, header in batches:
            if any(a.first_offset <= header.last_offset and a.last_offset >= header.base_offset for a in acquired):
                wanted.append(data[position:position + header.size_in_bytes])
        return AcquiredPartition(b"".join(wanted), acquired)

    # -- leadership -----------------------------------------------------------------------------
    def on_leadership_change(self, tp: TopicPartition, partition) -> None:
        """A partition no longer led here drops its share-partitions (the new leader reloads them
        from the share coordinator)."""
        if partition is not None and partition.is_leader:
            return
        for group_id, _ in [k for k in self.share_partitions if k[1] == tp]:
            self.drop(group_id, tp)

    def drop(self, group_id: str, tp: TopicPartition) -> None:
        """Forget a share-partition held here (its state was altered or deleted): the next fetch
        loads it again."""
        self.share_partitions.pop((group_id, tp), None)
        self._write_locks.pop((group_id, tp), None)
        self._read_committed.pop((group_id, tp), None)
        timer = self._timers.pop((group_id, tp), None)
        if timer is not None:
            timer.cancel()

    def shutdown(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()


def aborted_ranges(aborted_transactions) -> dict[int, list[tuple[int, int]]]:
    """Producer id → the (first offset, ABORT marker offset) of each of its aborted transactions."""
    ranges: dict[int, list[tuple[int, int]]] = {}
    for txn in aborted_transactions:
        ranges.setdefault(txn.producer_id, []).append((txn.first_offset, txn.last_offset))
    return ranges


def is_aborted(header, aborted: dict[int, list[tuple[int, int]]]) -> bool:
    """True for a transactional data batch inside one of its producer's aborted transactions
    (a producer has one transaction open at a time, so a batch lies in at most one)."""
    if not header.is_transactional or header.is_control:
        return False
    return any(first <= header.base_offset <= last for first, last in aborted.get(header.producer_id, ()))


def check_no_acknowledgements_on_open(epoch: int, has_acknowledgements: bool) -> None:
    """KIP-932: a request opening a share session cannot carry acknowledgements."""
    if epoch == INITIAL_SHARE_SESSION_EPOCH and has_acknowledgements:
        raise InvalidRequestError("Acknowledgements are not allowed when opening a share session")
