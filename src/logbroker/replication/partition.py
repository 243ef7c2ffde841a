"""One partition as this broker hosts it: its log, its leadership, its ISR and high watermark.

Kafka's Partition. The leader tracks each replica's log end offset and when it last caught up;
the high watermark is the minimum log end offset over the ISR (DESIGN.md §6). A single node is
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

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_broker_id

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def last_stable_offset(self) -> int:
        """Equals the high watermark until transactions exist."""
        return self.log.high_watermark

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
        self.leader_epoch = state.leader_epoch
        self.remote_replicas = {r: ReplicaState(last_caught_up_ms=now)
                                for r in replicas if r != self.local_broker_id}
        self.maybe_increment_high_watermark()
        return True

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

    def append_records_to_leader(self, records: bytes | bytearray, *, required_acks: int) -> LogAppendInfo:
        """Append one producer batch (see Log.append_as_leader for how it is patched)."""
        self.require_leader()
        min_isr = self.log.config.min_insync_replicas
        if required_acks == -1 and len(self.isr) < min_isr:
            raise NotEnoughReplicasError(
                f"{self.tp}: the ISR has {len(self.isr)} replicas, fewer than min.insync.replicas={min_isr}")
        info = self.log.append_as_leader(records, leader_epoch=self.leader_epoch)
        self.maybe_increment_high_watermark()
        return info

    def maybe_increment_high_watermark(self) -> bool:
        """Move the high watermark to the minimum log end offset over the ISR. True if it moved."""
        if not self.is_leader:
            return False
        new_hw = self.log.log_end_offset
        for replica_id in self.isr:
            state = self.remote_replicas.get(replica_id)
            if state is not None:
                new_hw = min(new_hw, state.log_end_offset)
        if new_hw > self.log.high_watermark:
            self.log.update_high_watermark(new_hw)
            return True
        return False

    def read_records(self, fetch_offset: int, *, max_bytes: int, current_leader_epoch: int,
                     fetch_only_committed: bool, min_one_message: bool) -> FetchDataInfo:
        """Read for a consumer (up to the high watermark) or a follower (up to the log end)."""
        self.require_leader()
        self.check_leader_epoch(current_leader_epoch)
        max_offset = self.high_watermark if fetch_only_committed else None
        return self.log.read(fetch_offset, max_bytes=max_bytes, max_offset=max_offset,
                             min_one_message=min_one_message)
