"""One partition as this broker hosts it: its log, its leadership, its ISR and high watermark.

Kafka's Partition. The leader tracks each replica's log end offset and when it last caught up;
the high watermark is the minimum log end offset over the ISR (architecture.md §6). A single node is
the same code with an ISR of one, so its high watermark is its log end offset.

Invariants: `log_start_offset <= high_watermark <= log_end_offset`; the high watermark never goes
back while this broker stays leader; only a leader appends through `append_records_to_leader`.
Runs on the event loop; the storage calls it makes are buffered writes into the page cache.
"""

from __future__ import annotations

from dataclasses import dataclass

from logbroker.clock import Clock
from logbroker.errors import (
    FencedLeaderEpochError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    UnknownLeaderEpochError,
)
from logbroker.metadata.model import PartitionState
from logbroker.storage.log import Log
from logbroker.storage.values import FetchDataInfo, LogAppendInfo
from logbroker.types import TopicPartition


@dataclass(slots=True)
class ReplicaState:
    """What the leader knows of one follower."""

    log_end_offset: int = -1
    last_caught_up_ms: int = 0
    # The leader's log end offset and the time at this follower's previous fetch: a fetch at or
    # past that offset shows the follower was caught up at that time (Kafka's Replica).
    last_fetch_leader_log_end_offset: int = -1
    last_fetch_time_ms: int = 0


class Partition:
    def __init__(self, tp: TopicPartition, *, log: Log, local_broker_id: int, clock: Clock) -> None:
        self.tp = tp
        self.log = log
        self.local_broker_id = local_broker_id
        self._clock = clock
        self.leader_id = -1
        self.leader_epoch = -1
        self.replicas: tuple[int, ...] = ()
        self.isr: tuple[int, ...] = ()
        self.remote_replicas: dict[int, ReplicaState] = {}
        # An ISR change written to the metadata store but not yet confirmed; the high watermark
        # counts the maximal ISR (isr ∪ an expansion asked for), a shrink only once written.
        self.pending_isr: tuple[int, ...] | None = None
        self.leader_epoch_start_offset = 0

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_broker_id

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def last_stable_offset(self) -> int:
        """min(first unstable offset, high watermark): read_committed consumers read below it."""
        return self.log.last_stable_offset

    def make_leader(self, state: PartitionState, replicas: tuple[int, ...]) -> bool:
        """Take leadership at `state.leader_epoch`. Returns False for a stale (older) epoch."""
        if state.leader_epoch < self.leader_epoch:
            return False
        now = self._clock.monotonic_ms()
        self.leader_id = self.local_broker_id
        self.replicas = replicas
        self.isr = state.isr
        if state.leader_epoch > self.leader_epoch:
            self.log.maybe_assign_epoch_start_offset(state.leader_epoch, self.log.log_end_offset)
            self.leader_epoch_start_offset = self.log.log_end_offset
            self.pending_isr = None
        self.leader_epoch = state.leader_epoch
        self.remote_replicas = {r: ReplicaState(last_caught_up_ms=now)
                                for r in replicas if r != self.local_broker_id}
        self.maybe_increment_high_watermark()
        return True

    def make_follower(self, state: PartitionState, replicas: tuple[int, ...]) -> bool:
        """Follow `state.leader` at `state.leader_epoch`: stop leading, remember the leader and its
        epoch. Returns False (and changes nothing) unless the epoch is newer than the one held —
        brokers act only on a newer leader epoch (architecture.md §5)."""
        if state.leader_epoch <= self.leader_epoch:
            return False
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.replicas = replicas
        self.isr = state.isr
        self.remote_replicas = {}
        self.pending_isr = None
        return True

    def update_replicas(self, replicas: tuple[int, ...]) -> None:
        """The assignment changed within the current leader epoch (a reassignment): a leader
        starts tracking the added followers — outside the ISR until they catch up — and forgets
        the removed ones."""
        self.replicas = replicas
        if self.is_leader:
            now = self._clock.monotonic_ms()
            self.remote_replicas = {r: self.remote_replicas.get(r) or ReplicaState(last_caught_up_ms=now)
                                    for r in replicas if r != self.local_broker_id}

    # -- the leader's view of its followers (architecture.md §6) ------------------------------
    @property
    def maximal_isr(self) -> tuple[int, ...]:
        if self.pending_isr is None:
            return self.isr
        return self.isr + tuple(r for r in self.pending_isr if r not in self.isr)

    def update_follower_fetch(self, replica_id: int, fetch_offset: int) -> bool:
        """A follower fetched from `fetch_offset`: it holds everything below. Updates its log end
        offset and caught-up time and moves the high watermark; True if the high watermark moved."""
        state = self.remote_replicas.get(replica_id)
        if state is None or not self.is_leader:
            return False
        now = self._clock.monotonic_ms()
        leader_end = self.log.log_end_offset
        if not self.log.log_start_offset <= fetch_offset <= leader_end:
            # Out of range: the fetch gets OFFSET_OUT_OF_RANGE and proves nothing (Kafka updates
            # a follower's state only after a successful read). An offset past our log end comes
            # from a log that diverged from ours (we came back with less than we had): counting
            # it would move the high watermark over records no follower holds.
            return False
        if fetch_offset >= leader_end:
            state.last_caught_up_ms = now
        elif fetch_offset >= state.last_fetch_leader_log_end_offset >= 0:
            state.last_caught_up_ms = max(state.last_caught_up_ms, state.last_fetch_time_ms)
        state.last_fetch_leader_log_end_offset = leader_end
        state.last_fetch_time_ms = now
        state.log_end_offset = fetch_offset
        return self.maybe_increment_high_watermark()

    def isr_to_expand(self) -> tuple[int, ...] | None:
        """The ISR with followers re-admitted that reached both the high watermark and the start of
        this leader's epoch; None when nobody is to be added (or a change is in flight)."""
        if not self.is_leader or self.pending_isr is not None:
            return None
        joining = [r for r, st in self.remote_replicas.items() if r not in self.isr
                   and st.log_end_offset >= max(self.high_watermark, self.leader_epoch_start_offset)]
        return self.isr + tuple(sorted(joining)) if joining else None

    def isr_to_shrink(self, max_lag_ms: int) -> tuple[int, ...] | None:
        """The ISR without followers not caught up for `max_lag_ms`; None when nobody lags."""
        if not self.is_leader or self.pending_isr is not None:
            return None
        now = self._clock.monotonic_ms()
        lagging = {r for r in self.isr if r != self.local_broker_id and r in self.remote_replicas
                   and now - self.remote_replicas[r].last_caught_up_ms > max_lag_ms}
        return tuple(r for r in self.isr if r not in lagging) if lagging else None

    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """KIP-320: a request's epoch older than ours is fenced, a newer one unknown to us."""
        if current_leader_epoch == -1 or current_leader_epoch == self.leader_epoch:
            return
        if current_leader_epoch < self.leader_epoch:
            raise FencedLeaderEpochError(
                f"{self.tp}: request leader epoch {current_leader_epoch} is older than {self.leader_epoch}")
        raise UnknownLeaderEpochError(
            f"{self.tp}: request leader epoch {current_leader_epoch} is newer than {self.leader_epoch}")

    def require_leader(self) -> None:
        if not self.is_leader:
            raise NotLeaderOrFollowerError(f"This broker is not the leader of {self.tp}")

    def append_records_to_leader(self, records: bytes | bytearray, *, required_acks: int,
                                 is_from_client: bool = True) -> LogAppendInfo:
        """Append one producer batch (see Log.append_as_leader for how it is patched);
        `is_from_client=False` for the broker's own batches (transaction markers)."""
        self.require_leader()
        log_ = self.log
        if required_acks == -1 and len(self.isr) < log_.config.min_insync_replicas:
            raise NotEnoughReplicasError(
                f"{self.tp}: the ISR has {len(self.isr)} replicas, fewer than "
                f"min.insync.replicas={log_.config.min_insync_replicas}")
        info = log_.append_as_leader(records, leader_epoch=self.leader_epoch, is_from_client=is_from_client)
        self.maybe_increment_high_watermark()
        return info

    def maybe_increment_high_watermark(self) -> bool:
        """Move the high watermark to the minimum log end offset over the ISR. True if it moved."""
        if not self.is_leader:
            return False
        new_hw = self.log.log_end_offset
        if self.remote_replicas:  # alone (one node, RF 1): the log end is the high watermark
            for replica_id in self.maximal_isr:
                state = self.remote_replicas.get(replica_id)
                if state is not None:
                    new_hw = min(new_hw, state.log_end_offset)
        if new_hw > self.log.high_watermark:
            self.log.update_high_watermark(new_hw)
            return True
        return False

    def last_fetchable_offset(self, only_committed: bool, read_committed: bool) -> int:
        """Where a read stops (exclusive): the log end for a follower, for a consumer the high
        watermark, or under read_committed the last stable offset (Kafka's FetchIsolation)."""
        if not only_committed:
            return self.log.log_end_offset
        return self.log.last_stable_offset if read_committed else self.log.high_watermark

    def read_records(self, fetch_offset: int, *, max_bytes: int, current_leader_epoch: int,
                     fetch_only_committed: bool, min_one_message: bool,
                     read_committed: bool = False,
                     fetch_only_from_leader: bool = True) -> FetchDataInfo:
        """Read for a consumer (up to the high watermark; with `read_committed` up to the last
        stable offset, with the aborted transactions of the range) or a follower (up to the log
        end). A consumer that sent its rack (KIP-392) may read from a follower, up to the
        follower's own high watermark; past the follower's log end that is OFFSET_OUT_OF_RANGE,
        as Kafka."""
        if fetch_only_from_leader:
            self.require_leader()
        self.check_leader_epoch(current_leader_epoch)
        max_offset = self.last_fetchable_offset(fetch_only_committed, read_committed)
        return self.log.read(fetch_offset, max_bytes=max_bytes, max_offset=max_offset,
                             min_one_message=min_one_message,
                             include_aborted_txns=fetch_only_committed and read_committed)

    def caught_up_followers(self, fetch_offset: int) -> list[tuple[int, int, int]]:
        """KIP-392's candidates on a leader: `(broker id, log end offset, ms since caught up)` of
        each in-sync follower that holds `fetch_offset` (Kafka leaves out the others: they may
        lag, and the consumer with them)."""
        now = self._clock.monotonic_ms()
        return [(r, st.log_end_offset, now - st.last_caught_up_ms)
                for r, st in self.remote_replicas.items()
                if r in self.isr and st.log_end_offset >= fetch_offset]
