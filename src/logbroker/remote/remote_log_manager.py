"""The remote log manager (Kafka's RemoteLogManager): copies, expiry and reads of tiered partitions.

For each partition this broker leads whose topic has remote.storage.enable, every
remote.log.manager.task.interval.ms:

1. reconcile (on taking leadership, then every RECONCILE_EVERY passes): list the partition's
   directory in the store (store_survey.py) and take what it holds as the truth — adopting the
   segments another leader committed (a deposed leader's copy that landed late), finishing
   interrupted deletions (DELETE_SEGMENT_STARTED), deleting broken segments (a metadata whose
   .log is missing) and the objects of unfinished copies (no metadata) once they are
   older than the orphan grace period (a deposed leader may still be uploading them).
2. expire: remote segments wholly below the log start offset (DeleteRecords); outside the leader
   epoch lineage of this leader (lineage.py: diverged copies after an unclean election, or all
   of whose epochs precede the lineage); wholly within another segment of the lineage (a range
   two leaders both copied); then past retention.ms, or over retention.bytes counting local and
   remote bytes together, oldest first. Only then does the log learn how far the copies reach.
3. copy: each closed segment whose next segment starts at or below the last stable offset and
   that reaches past the highest copied offset (a segment straddling it is copied whole, as
   Kafka does; the overlap is read from either) — its .log, .index, .timeindex, .txnindex (when
   it has aborted transactions), the producer snapshot at the next segment's base offset and
   the leader epochs up to there — under a fresh segment id; the metadata written last commits
   it, and only if this broker still leads the partition at the leader epoch the pass started
   in (else what it wrote is deleted). The log's local retention (local.retention.*) may then
   delete the local copy.

A leader whose local log holds nothing while the store holds segments (a disk erased, a restored
topic) starts the log after the store's last offset with the leader epochs and producer state of
the segment ending there (aux_state.py); until its first listing ends, produce is refused
(`check_appendable`).

Reads (fetches below the local log start, timestamp lookups) are in remote_log_reads.py.
Followers of a tiered partition only read the store's metadata, to learn how far the leader
copied (so their local retention deletes the same segments).

The log start offset of a tiered partition (Kafka's UnifiedLog.logStartOffset) is the earliest
offset still in the store (`log_start_offset`); the log's own is the local log start offset. The
leader epoch cache reaches back to the former: it is trimmed here, when that offset moves, not
when local segments go.

Threads: runs on the event loop; the store's I/O is awaited (remote/storage_manager.py), file
deletions of local retention go to the thread executor. Each partition's work is serialised by
its own lock.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict

from logbroker.errors import KafkaError, NotLeaderOrFollowerError
from logbroker.log_limits import RateLimitedLog
from logbroker.remote.aux_state import RemoteLogAuxStateError, read_last_segment_state
from logbroker.remote.lineage import before_lineage, covers, filtered, within_lineage, wholly_within
from logbroker.remote.metadata import (
    LEADER_EPOCH,
    OFFSET_INDEX,
    PRODUCER_SNAPSHOT,
    SEGMENT,
    TIME_INDEX,
    TRANSACTION_INDEX,
    RemoteLogSegmentMetadata,
)
from logbroker.remote.remote_log_reads import RemoteLogReads
from logbroker.remote.remote_partition import RemotePartitionState
from logbroker.remote.storage_manager import RemoteResourceNotFoundError, RemoteStorageManager
from logbroker.remote.store_survey import survey
from logbroker.storage.checkpoints import random_kafka_uuid, uuid_to_kafka_str
from logbroker.storage.log_segment import transaction_index_file
from logbroker.types import TopicPartition

log = logging.getLogger("kafka.log.remote.RemoteLogManager")

# The leader lists its partition's directory again every RECONCILE_EVERY passes; between times it
# trusts what it copied and deleted itself. Late commits come only from a deposed leader's
# uploads in flight at the leader change, so a re-listing soon after taking leadership and then
# now and then is enough: at Kafka's default interval (30 s) every 5 minutes, one LIST request
# per 1,000 objects of the partition — a cost nobody notices, where listing on every pass would
# be 10 times that for nothing new. Objects without metadata are deleted once older than the
# same span (ORPHAN_GRACE_PASSES intervals): longer than an upload of a segment takes on a
# healthy store. Deleting a slower deposed leader's upload early loses nothing: its commit
# check fails and it deletes its objects itself, or its metadata lands without its data and
# the next reconciliation deletes that broken segment; the new leader copies from its own log.
RECONCILE_EVERY = 10
ORPHAN_GRACE_PASSES = 10


def _holds_nothing(log_) -> bool:
    return log_.log_end_offset == log_.log_start_offset


def _log_start_offset(state: RemotePartitionState, log_) -> int:
    earliest = state.earliest_offset()
    return log_.log_start_offset if earliest is None else min(earliest, log_.log_start_offset)


class RemoteLogManager(RemoteLogReads):
    """See the module docstring. `partitions` is the broker's ReplicaManager.partitions."""

    def __init__(self, *, rsm: RemoteStorageManager, broker_id: int, clock, partitions: dict,
                 task_interval_ms: int, fetch_max_wait_ms: int) -> None:
        self.rsm = rsm
        self.broker_id = broker_id
        self.clock = clock
        self.partitions = partitions
        self.task_interval_ms = task_interval_ms
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.states: dict[TopicPartition, RemotePartitionState] = {}
        self._locks: dict[TopicPartition, asyncio.Lock] = {}
        self._indexes: OrderedDict[tuple[str, str], bytes] = OrderedDict()
        self._chunks: OrderedDict[str, tuple[int, bytes]] = OrderedDict()
        # A failing store fails every pass of every partition: a few lines a minute per partition.
        self._task_log = RateLimitedLog(log, burst=3, interval_s=60.0)
        # Counters for the metrics (Kafka's RemoteCopyBytesPerSec, RemoteFetchBytesPerSec, …).
        self.copy_bytes = self.copy_requests = self.copy_errors = 0
        self.fetch_bytes = self.fetch_requests = self.fetch_errors = self.fetch_timeouts = 0
        self.delete_requests = self.delete_errors = 0

    # --- leadership ----------------------------------------------------------------------------

    def on_leadership(self, tp: TopicPartition, partition) -> None:
        """A ReplicaManager leadership listener: track the tiered partitions hosted here. Each
        change of role starts from a fresh state: a new leader loads (and cleans) the store."""
        if partition is None or not partition.log.config.remote_storage_enable \
                or partition.log.topic_id is None:
            self.states.pop(tp, None)
            return
        state = RemotePartitionState(tp, uuid_to_kafka_str(partition.log.topic_id))
        state.as_leader = partition.is_leader
        self.states[tp] = state
        asyncio.get_running_loop().create_task(self._run_partition(tp), name=f"remote-log {tp}")

    def check_appendable(self, tp: TopicPartition, partition) -> None:
        """Produce to `tp`: refused with NOT_LEADER_OR_FOLLOWER while this broker leads it as a
        tiered partition whose log holds nothing and whose store's first listing is under way
        (or found a `restore-topic` still copying): the store may hold offsets an append would
        take (a disk erased). Clients retry that error after a metadata refresh, as through a
        leader change. Not refused:
        - at leader epoch 0, a partition's first leader: no other log ever held records of it,
          so the store holds none but a `restore-topic`'s, whose copies start after the topic
          is created (possibly after the first listing: the command's users produce once it
          has finished) — so a new topic takes records at once;
        - once a listing has failed: a store that cannot be listed (a missing bucket) must not
          stop the partition; the log then goes on where it is."""
        state = self.states.get(tp)
        if state is not None and state.as_leader and not state.loaded and not state.listing_failed \
                and partition.leader_epoch > 0 and _holds_nothing(partition.log):
            raise NotLeaderOrFollowerError(f"{tp} is not ready for appends: its remote segments are being "
                                           f"listed, and its local log may start after them")

    def _configs_changed(self, tp: TopicPartition, partition) -> None:
        """remote.storage.enable turned on (start tiering) or off: as Kafka, turning it off needs
        remote.log.delete.on.disable, and the leader then deletes the partition's remote data."""
        state = self.states.get(tp)
        if state is None:
            self.on_leadership(tp, partition)
            return
        self.states.pop(tp, None)
        if state.as_leader and partition.log.config.remote_log_delete_on_disable:
            log.info("Remote storage disabled for %s: deleting its remote data", tp)
            asyncio.get_running_loop().create_task(self.delete_partitions([tp], partition.log.topic_id))

    def _lock(self, tp: TopicPartition) -> asyncio.Lock:
        return self._locks.setdefault(tp, asyncio.Lock())

    # --- the periodic task -----------------------------------------------------------------------

    async def run(self) -> None:
        """Forever: one pass over the tiered partitions led here, then sleep the task interval."""
        while True:
            await self.run_once()
            await asyncio.sleep(self.task_interval_ms / 1000)

    async def run_once(self) -> None:
        for tp, partition in list(self.partitions.items()):  # topics whose remote.storage.enable changed
            if (tp in self.states) != (partition.log.config.remote_storage_enable
                                       and partition.log.topic_id is not None):
                self._configs_changed(tp, partition)
        for tp in list(self.states):
            try:
                await self._run_partition(tp)
            except Exception:  # noqa: BLE001 - a bug on one partition must not stop the task
                log.exception("Remote log manager task failed on %s", tp)

    async def _run_partition(self, tp: TopicPartition) -> None:
        async with self._lock(tp):
            state = self.states.get(tp)
            partition = self.partitions.get(tp)
            if state is None or partition is None or partition.is_leader != state.as_leader:
                return
            log_ = partition.log
            try:
                if not state.as_leader:
                    await self._follow(state, log_)
                else:
                    await self._lead(state, partition)
            except KafkaError as exc:
                self._task_log.log(logging.ERROR, str(tp), "Remote log manager task failed on %s: %s "
                                   "(local segments are kept until their copy succeeds)", tp, exc)
                return
            # From this state's segments: a change of role meanwhile put a fresh state in
            # `states`, which knows no segment yet.
            log_start = _log_start_offset(state, log_) if state.loaded else None

        def local_work() -> None:
            log_.delete_old_segments()
            if log_start is not None:
                log_.trim_leader_epochs(log_start)

        await asyncio.get_running_loop().run_in_executor(None, local_work)

    async def _lead(self, state: RemotePartitionState, partition) -> None:
        log_ = partition.log
        # An empty log keeps looking: a restored topic's segments may arrive.
        if not state.loaded or state.passes % RECONCILE_EVERY == 0 \
                or (not state.segments and _holds_nothing(log_)):
            try:
                await self._load(state, partition)
            except KafkaError:
                self.copy_errors += 1  # nothing is copied while the store cannot be listed
                raise
        state.passes += 1
        if not state.loaded or self.states.get(state.tp) is not state:
            return  # restoring, or no longer the leader's state (a change of role meanwhile)
        await self._expire(state, partition)
        log_.update_highest_offset_in_remote_storage(state.highest_offset)
        if not log_.config.remote_log_copy_disable:
            await self._copy(state, partition)

    async def _ensure_loaded(self, tp: TopicPartition) -> None:
        async with self._lock(tp):
            state = self.states.get(tp)
            partition = self.partitions.get(tp)
            if state is None or state.loaded or partition is None:
                return
            if state.as_leader:
                await self._load(state, partition)
            else:
                await self._follow(state, partition.log)

    async def _load(self, state: RemotePartitionState, partition) -> None:
        """Reconcile (see the module docstring); the first time also read the log start offset
        DeleteRecords left in the store, and start an empty local log after the store's end.
        A first listing that fails sets `state.listing_failed` (see `check_appendable`)."""
        try:
            await self._list(state, partition)
        except KafkaError:
            state.listing_failed = True
            raise

    async def _list(self, state: RemotePartitionState, partition) -> None:
        found = await survey(self.rsm, state.directory, {s.segment_id: s for s in state.segments})
        if found.restoring:
            return  # `logbroker restore-topic` is still copying: its objects are no orphans
        now_ms = self.clock.time_ms()
        due = sorted(k for k, modified in found.orphans.items()
                     if now_ms - modified >= ORPHAN_GRACE_PASSES * self.task_interval_ms)
        if due:
            log.info("Deleting %d object(s) of unfinished copies of %s: %s", len(due), state.tp,
                     ", ".join(due[:6]))
            await self.rsm.delete_keys(due)
        for segment, missing in found.broken:
            log.error("Remote segment %d-%d of %s (id %s) lacks its %s object(s): deleting the broken "
                      "segment", segment.start_offset, segment.end_offset, state.tp, segment.segment_id,
                      ", ".join(missing))
            await self._delete_segment(segment)
        for segment in found.deleting:
            await self._delete_segment(segment)
        for segment, missing in found.damaged:
            if segment.segment_id not in state.reported:
                state.reported.add(segment.segment_id)
                log.error("Remote segment %d-%d of %s (id %s) lacks its %s object(s): kept for its records; "
                          "reads of it fail until the object is back", segment.start_offset,
                          segment.end_offset, state.tp, segment.segment_id, ", ".join(missing))
        known = {s.segment_id for s in state.segments}
        adopted = [s for s in found.segments if s.segment_id not in known]
        if state.loaded and adopted:
            log.info("Adopting %d remote segment(s) of %s that another leader committed: %s", len(adopted),
                     state.tp, ", ".join(f"{s.start_offset}-{s.end_offset}" for s in adopted))
        state.segments = found.segments
        await self._start_after_store(state, partition)
        if not state.loaded:
            state.log_start_floor = await self._read_floor(state)
            state.loaded = True
            log.log(logging.INFO if state.segments else logging.DEBUG, "Loaded %d remote segment(s) of %s "
                    "up to offset %d", len(state.segments), state.tp, state.highest_offset)

    async def _start_after_store(self, state: RemotePartitionState, partition) -> None:
        """An erased disk, or a topic restored from the store: an empty log goes on after the
        store's last offset instead of writing offsets the store already has, with the leader
        epochs and producer state there (aux_state.py), as a follower starting from the store."""
        log_ = partition.log
        if not (state.segments and _holds_nothing(log_) and log_.log_end_offset <= state.highest_offset):
            return
        highest = state.highest_offset
        try:
            aux = await read_last_segment_state(self.rsm, state.segments, tp=state.tp)
        except RemoteLogAuxStateError as exc:
            # Start without them rather than retry on the next pass: meanwhile the empty log
            # would either refuse appends (for good, were an object missing) or let them take
            # offsets the store holds. Starting after the store's end misplaces no offset; it
            # loses the older leader epochs (expiry then judges no segment by epochs) and the
            # producers' state (their next batches are not checked against the stored ones).
            log.error("Starting the empty local log of %s after the remote store's offset %d without the "
                      "leader epochs and producer state there: %s", state.tp, highest, exc)
            aux = None
        if self.states.get(state.tp) is not state or not partition.is_leader:
            return  # a change of role meanwhile
        if not _holds_nothing(log_):
            log.error("Records were appended to the empty local log of %s (offsets %d-%d) while its remote "
                      "state was read: they take offsets the remote store holds (up to %d); keeping them, "
                      "the local log is not started after the store", state.tp, log_.log_start_offset,
                      log_.log_end_offset - 1, highest)
            return
        if log_.log_end_offset > highest:
            return
        start = highest + 1
        log.info("The local log of %s is empty and the remote store holds offsets up to %d: starting the "
                 "local log at %d with %s", state.tp, highest, start, "no remote state" if aux is None else
                 f"the {len(aux.epochs)} leader epoch(s) and "
                 f"{'no' if aux.producers is None else len(aux.producers)} producer(s) of remote segment "
                 f"{aux.segment.start_offset}-{aux.segment.end_offset}")
        # On the event loop, right after the check: no append comes in between (and an empty
        # log's one segment is quick to replace).
        if aux is None:
            log_.truncate_fully_and_start_at(start)
        else:
            log_.start_at_with_remote_state(start, epochs=aux.epochs, producers=aux.producers)
        if log_.latest_epoch is None or partition.leader_epoch > log_.latest_epoch:
            log_.maybe_assign_epoch_start_offset(partition.leader_epoch, start)  # as on taking leadership

    async def _follow(self, state: RemotePartitionState, log_) -> None:
        """A follower learns what the leader copied (Kafka's followers read it from
        __remote_log_metadata), so its local retention deletes those segments too. Reads only
        the metadata objects it has not seen, counts only segments whose objects are all there;
        deletes nothing in the store."""
        found = await survey(self.rsm, state.directory, {s.segment_id: s for s in state.segments})
        state.segments = found.segments
        state.loaded = True
        log_.update_highest_offset_in_remote_storage(state.highest_offset)

    async def _copy(self, state: RemotePartitionState, partition) -> None:
        log_ = partition.log
        epoch = partition.leader_epoch

        def still_leading() -> bool:
            """Checked right before a copy is committed (Kafka's RLMCopyTask checks leadership
            and the leader epoch too)."""
            return (self.states.get(state.tp) is state and self.partitions.get(state.tp) is partition
                    and partition.is_leader and partition.leader_epoch == epoch)

        segments = log_.segments
        for segment, following in zip(segments, segments[1:]):
            end_offset = following.base_offset - 1
            if end_offset <= state.highest_offset:
                continue
            if following.base_offset > log_.last_stable_offset:
                break
            if not await self._copy_segment(state, log_, segment, following.base_offset, still_leading):
                return

    async def _copy_segment(self, state: RemotePartitionState, log_, segment, next_offset: int,
                            still_leading) -> bool:
        """Copy one segment; False when this broker was deposed meanwhile (nothing committed)."""
        epochs = [e for e in log_.leader_epoch_cache.entries if e.start_offset < next_offset]
        in_segment = {}
        for i, entry in enumerate(epochs):
            following = epochs[i + 1].start_offset if i + 1 < len(epochs) else next_offset
            if following > segment.base_offset:
                in_segment[entry.epoch] = max(entry.start_offset, segment.base_offset)
        txn_path = transaction_index_file(log_.dir, segment.base_offset)
        snapshot = log_.producer_state.snapshot_path(next_offset)
        has_txn = txn_path.exists() and txn_path.stat().st_size > 0
        has_snapshot = snapshot.exists()
        metadata = RemoteLogSegmentMetadata(
            topic=state.tp.topic, partition=state.tp.partition, topic_id=state.topic_id_str,
            segment_id=uuid_to_kafka_str(random_kafka_uuid()), start_offset=segment.base_offset,
            end_offset=next_offset - 1, max_timestamp_ms=segment.largest_timestamp,
            broker_id=self.broker_id, event_timestamp_ms=self.clock.time_ms(),
            segment_size_in_bytes=segment.size, segment_leader_epochs=in_segment,
            has_txn_index=has_txn, has_producer_snapshot=has_snapshot)
        checkpoint = "0\n%d\n%s" % (len(epochs), "".join(f"{e.epoch} {e.start_offset}\n" for e in epochs))
        files = {SEGMENT: segment.log.path, OFFSET_INDEX: segment.offset_index_path,
                 TIME_INDEX: segment.time_index_path, LEADER_EPOCH: checkpoint.encode()}
        if has_txn:
            files[TRANSACTION_INDEX] = txn_path
        if has_snapshot:
            files[PRODUCER_SNAPSHOT] = snapshot
        try:
            await self.rsm.copy_log_segment_data(metadata, files, still_leading)
        except NotLeaderOrFollowerError as exc:
            log.info("%s (the objects it wrote are deleted)", exc)
            return False
        except KafkaError:
            self.copy_errors += 1
            try:  # what was written is an orphan now (reconciliation would delete it too, later)
                await self.rsm.delete_keys(metadata.data_keys())
            except KafkaError:
                pass
            raise
        state.add(metadata)
        log_.update_highest_offset_in_remote_storage(metadata.end_offset)
        self.copy_bytes += metadata.segment_size_in_bytes
        self.copy_requests += 1
        log.info("Copied segment %d-%d of %s to the remote store (%d bytes, id %s)",
                 metadata.start_offset, metadata.end_offset, state.tp,
                 metadata.segment_size_in_bytes, metadata.segment_id)
        return True

    async def _expire(self, state: RemotePartitionState, partition) -> None:
        newest = max((e for s in state.segments for e in s.segment_leader_epochs), default=-1)
        if newest > partition.leader_epoch:
            # A leader of a later epoch copied there: this broker was deposed and does not know
            # yet. Its lineage lacks that epoch; it must not judge (and delete) the new copies.
            log.info("Not expiring remote segments of %s: the store holds leader epoch %d, newer than "
                     "this broker's %d", state.tp, newest, partition.leader_epoch)
            return
        for segment, reason in self._expired(state, partition.log):
            if self.states.get(state.tp) is not state:
                return  # deposed meanwhile: the new leader judges
            await self._delete_segment(segment)
            state.remove(segment)
            log.info("Deleted remote segment %d-%d of %s (%s)", segment.start_offset, segment.end_offset,
                     state.tp, reason)

    def _expired(self, state: RemotePartitionState, log_) -> list[tuple[RemoteLogSegmentMetadata, str]]:
        """The segments to delete, each with why (see the module docstring, step 2). The epoch
        rules apply only while the leader's lineage reaches back to the log start offset
        (lineage.covers): without that every older segment would look foreign."""
        config = log_.config
        lineage = filtered({e.epoch: e.start_offset for e in log_.leader_epoch_cache.entries})
        judged = covers(lineage, _log_start_offset(state, log_))
        doomed: list[tuple[RemoteLogSegmentMetadata, str]] = []
        valid: list[RemoteLogSegmentMetadata] = []
        for segment in state.segments:
            if segment.end_offset < state.log_start_floor:
                doomed.append((segment, "below the log start offset"))
            elif judged and before_lineage(segment, lineage):
                doomed.append((segment, "its leader epochs precede the leader epoch lineage"))
            elif judged and not within_lineage(segment, log_.log_end_offset, lineage):
                doomed.append((segment, "outside the leader epoch lineage"))
            else:
                valid.append(segment)
        kept: list[RemoteLogSegmentMetadata] = []
        reaching = None  # of the kept segments (all starting at or before this one), the one ending last
        for segment in sorted(valid, key=lambda s: (s.start_offset, -s.end_offset)):
            if reaching is not None and wholly_within(segment, reaching):
                doomed.append((segment, f"wholly within segment {reaching.start_offset}-{reaching.end_offset}"))
                continue
            kept.append(segment)
            reaching = segment
        kept.sort(key=lambda s: (s.start_offset, s.end_offset))
        now_ms = self.clock.time_ms()
        if config.retention_ms >= 0:
            for segment in kept:
                if now_ms - segment.max_timestamp_ms <= config.retention_ms:
                    break
                doomed.append((segment, "retention.ms"))
        if config.retention_bytes >= 0:
            local_only = sum(s.size for s in log_.segments if s.base_offset > state.highest_offset)
            excess = sum(s.segment_size_in_bytes for s in kept) + local_only - config.retention_bytes
            for segment in kept:
                if excess < segment.segment_size_in_bytes:
                    break
                excess -= segment.segment_size_in_bytes
                doomed.append((segment, "retention.bytes"))
        unique: dict[str, tuple[RemoteLogSegmentMetadata, str]] = {}
        for segment, reason in doomed:
            unique.setdefault(segment.segment_id, (segment, reason))
        return list(unique.values())

    async def _delete_segment(self, segment: RemoteLogSegmentMetadata) -> None:
        self.delete_requests += 1
        try:
            await self.rsm.delete_log_segment_data(segment)
        except KafkaError:
            self.delete_errors += 1
            raise
        for suffix in (OFFSET_INDEX, TRANSACTION_INDEX):
            self._indexes.pop((segment.segment_id, suffix), None)
        self._chunks.pop(segment.segment_id, None)

    # --- log start offset -----------------------------------------------------------------------

    def log_start_offset(self, tp: TopicPartition, log_) -> int:
        """Kafka's logStartOffset: the earliest offset in the store, else the local log start."""
        state = self.states.get(tp)
        return log_.log_start_offset if state is None else _log_start_offset(state, log_)

    def copy_lag(self, tp: TopicPartition, log_) -> tuple[int, int]:
        """(bytes, segments) of the closed local segments not yet copied (RemoteCopyLag*)."""
        state = self.states.get(tp)
        highest = -1 if state is None else state.highest_offset
        segments = log_.segments
        waiting = [s for s, following in zip(segments, segments[1:]) if following.base_offset - 1 > highest]
        return sum(s.size for s in waiting), len(waiting)

    def highest_offset(self, tp: TopicPartition) -> int:
        """The last offset copied to the store, -1 when none (ListOffsets -5)."""
        state = self.states.get(tp)
        return -1 if state is None else state.highest_offset

    async def followed_segments(self, tp: TopicPartition) -> list[RemoteLogSegmentMetadata] | None:
        """The remote segments of a partition followed here, read from the store now (for a
        follower rebuilding its state from them: aux_state.py); None when the partition is not
        followed here as a tiered one. RemoteStorageError when the store cannot be listed."""
        async with self._lock(tp):
            state = self.states.get(tp)
            partition = self.partitions.get(tp)
            if state is None or state.as_leader or partition is None:
                return None
            await self._follow(state, partition.log)
            return list(state.segments)

    def epoch_for_offset(self, tp: TopicPartition, offset: int) -> int | None:
        state = self.states.get(tp)
        segment = state.segment_for(offset) if state is not None else None
        return None if segment is None else segment.epoch_at(offset)

    def delete_records(self, tp: TopicPartition, offset: int) -> None:
        """DeleteRecords: the log start offset is now `offset`. Kept in the store (as
        `<dir>/log-start-offset`, so it survives a restart) and the remote segments wholly below
        it expire, in the background."""
        state = self.states.get(tp)
        if state is None or offset <= state.log_start_floor:
            return
        state.log_start_floor = offset
        asyncio.get_running_loop().create_task(self._save_floor(tp, state, offset))

    async def _save_floor(self, tp: TopicPartition, state: RemotePartitionState, offset: int) -> None:
        try:
            await self.rsm.put(f"{state.directory}/log-start-offset", str(offset).encode())
        except KafkaError as exc:
            self._task_log.log(logging.ERROR, str(tp), "Saving the log start offset of %s failed: %s", tp, exc)
            return
        await self._run_partition(tp)

    async def _read_floor(self, state: RemotePartitionState) -> int:
        try:
            return int(await self.rsm.get(f"{state.directory}/log-start-offset"))
        except RemoteResourceNotFoundError:
            return -1
        except ValueError:
            log.error("Ignoring an unreadable log-start-offset object of %s", state.tp)
            return -1

    # --- topic deletion ---------------------------------------------------------------------------

    async def delete_partitions(self, tps: list[TopicPartition], topic_id) -> None:
        """A deleted topic: every object of its partitions' directories goes."""
        topic_id_str = uuid_to_kafka_str(topic_id)
        for tp in tps:
            self.states.pop(tp, None)
            state = RemotePartitionState(tp, topic_id_str)
            async with self._lock(tp):  # after a copy in progress
                keys = await self.rsm.list_keys(state.directory + "/")
                await self.rsm.delete_keys(keys)
            if keys:
                log.info("Deleted %d remote object(s) of %s", len(keys), tp)

