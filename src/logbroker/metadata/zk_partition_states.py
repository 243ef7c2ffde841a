"""Partition states (leader, ISR, epochs) in ZooKeeper, Kafka's
`/brokers/topics/<topic>/partitions/<p>/state`, and who may write them.

- The controller writes leaders and ISRs with `set_partition_states`: one fenced multi()
  (zk_controller.py), each state stamped with its controller epoch, and conditional on the
  version the election was based on, so an ISR change the leader made since is never lost.
- The partition leader alone changes the ISR, by `update_isr`: a setData conditional on the state
  znode's version it last read, in the same multi() as a check that each broker joining the ISR
  is registered (IneligibleReplicaError if not).

StaleStateError means the znode moved since it was read: re-read it, and act only if still leader
(or controller) in a newer epoch.

Every method blocks on ZooKeeper round trips: call them from a thread.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from logbroker.errors import IneligibleReplicaError, UnknownTopicOrPartitionError
from logbroker.metadata import zk_data as zk
from logbroker.metadata.model import PartitionState
from logbroker.metadata.zk_controller import ZkController
from logbroker.metadata.zk_session import StaleStateError, Watch, raise_first_error
from logbroker.types import TopicPartition


@dataclass(frozen=True, slots=True)
class VersionedPartitionState:
    """A partition state with its znode version, the version a conditional write must name, and
    the zxid of its last write (mzxid): compared with a broker's epoch (its registration's czxid),
    it tells whether the state was decided before or after that broker last (re)started."""

    state: PartitionState
    zk_version: int
    modified_zxid: int = -1


class ZkPartitionStates(ZkController):
    """Reading and writing partition states; a part of ZooKeeperMetadataStore."""

    def partition_state(self, tp: TopicPartition) -> PartitionState | None:
        versioned = self.partition_state_with_version(tp)
        return versioned.state if versioned else None

    def partition_state_with_version(self, tp: TopicPartition) -> VersionedPartitionState | None:
        with self._errors():
            try:
                data, stat = self._client.get(zk.partition_state_path(tp))
            except NoNodeError:
                return None
            return VersionedPartitionState(zk.decode_partition_state(data), stat.version, stat.mzxid)

    def set_partition_states(self, states: dict[TopicPartition, PartitionState], *,
                             expected_versions: dict[TopicPartition, int] | None = None
                             ) -> dict[TopicPartition, int]:
        """The controller's write of leaders and ISRs, in one fenced multi, stamped with this
        controller's epoch. A state znode that exists is overwritten only if its version is the
        expected one (when given: pass the version the election was based on, so an ISR change
        the leader made since is never lost); StaleStateError otherwise. Returns the new versions."""
        expected_versions = expected_versions or {}
        with self._errors():
            epoch = self._controller_epoch
            txn = self._controller_txn()
            # A new partition's parents (`partitions`, `partitions/<p>`) are created in the same
            # multi, so a write racing a topic deletion fails instead of resurrecting the topic.
            parents_created: set[str] = set()
            ops: list[TopicPartition | None] = []  # the partition of each op after the check
            for tp, state in sorted(states.items()):
                path = zk.partition_state_path(tp)
                data = zk.encode_partition_state(dataclasses.replace(state, controller_epoch=epoch))
                if self._client.exists(path) is None:
                    for parent in (zk.partitions_path(tp.topic), zk.partition_path(tp)):
                        if parent not in parents_created and self._client.exists(parent) is None:
                            txn.create(parent)
                            parents_created.add(parent)
                            ops.append(None)
                    txn.create(path, data)
                else:
                    txn.set_data(path, data, version=expected_versions.get(tp, -1))
                ops.append(tp)
            results = self._commit(txn, fenced=True)
            for tp, result in zip(ops, results[1:]):
                if isinstance(result, (BadVersionError, NodeExistsError)):
                    raise StaleStateError(f"The state of {tp} changed since it was read.")
            raise_first_error(results)
            return {tp: 0 if isinstance(result, str) else result.version
                    for tp, result in zip(ops, results[1:]) if tp is not None}

    def update_isr(self, tp: TopicPartition, state: PartitionState, *, expected_version: int,
                   joining: tuple[int, ...] = ()) -> int:
        """The partition leader's ISR change: a setData conditional on the state znode's version,
        in one multi with a check that each broker in `joining` is registered — only a live
        broker joins the ISR (Kafka's INELIGIBLE_REPLICA): a dead one added after the controller
        dropped it would hold the high watermark until replica.lag.time.max.ms. Returns the new
        version; raises StaleStateError when the znode moved on (re-read it)."""
        with self._errors():
            txn = self._client.transaction()
            for broker_id in joining:
                txn.check(zk.broker_path(broker_id), -1)  # -1: any version, but it must exist
            txn.set_data(zk.partition_state_path(tp), zk.encode_partition_state(state),
                         version=expected_version)
            results = txn.commit()
            gone = [b for b, result in zip(joining, results) if isinstance(result, NoNodeError)]
            if gone:
                raise IneligibleReplicaError(
                    f"Broker(s) {gone} are not registered, so they cannot join the ISR of {tp}.")
            if isinstance(results[-1], BadVersionError):
                raise StaleStateError(f"The state of {tp} is no longer at version {expected_version}.")
            if isinstance(results[-1], NoNodeError):
                raise UnknownTopicOrPartitionError(f"Partition {tp} does not exist.")
            raise_first_error(results)
            return results[-1].version

    def watch_partition_state(self, tp: TopicPartition,
                              callback: Callable[[VersionedPartitionState | None], None]) -> Watch:
        """`callback(None)` while the state znode does not exist (not yet created, or deleted)."""
        def decode(data, stat):
            return None if stat is None else VersionedPartitionState(zk.decode_partition_state(data),
                                                                     stat.version, stat.mzxid)
        return self._data_watch(zk.partition_state_path(tp), decode, callback)
