"""Partition reassignment on a ZooKeeper cluster: the controller's two steps and each broker's part.

The algorithm is metadata/reassignment.py's (Kafka's KafkaController.onPartitionReassignment);
this module does its I/O. Controller side, on the cluster's worker thread (blocking on ZooKeeper,
never interleaved with other controller events):

- `alter` starts (or cancels) reassignments: per topic, one fenced multi writes the topic znode
  with RS = TRS + ORS and Kafka's adding_replicas/removing_replicas, and bumps the leader epoch of
  each partition so every replica acts on the new assignment.
- `maybe_complete` finishes one: once every target replica is in the ISR, one fenced multi moves
  leadership to a target replica if needed, drops the removed replicas from the ISR (epoch bump)
  and shrinks the assignment to the target. It runs after `alter`, whenever the state of a
  partition under reassignment changes (the controller watches every state znode), and for all of
  them when a broker becomes controller (`resume`), so a controller failover loses none.

Broker side, on the event loop (`apply_assignment`, when a topic znode changes): brokers added
create the log and follow, the leader starts tracking its new followers, and brokers removed stop
and delete their replica. Brokers learn the assignment and the leader epoch from two different
znodes, in either order: a replica acts on whichever arrives second.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from logbroker.errors import (
    KafkaError,
    NoReassignmentInProgressError,
    NotControllerError,
    UnknownTopicOrPartitionError,
)
from logbroker.metadata.model import TopicInfo
from logbroker.metadata.reassignment import ReplicaAssignment, completed_state, validate_target
from logbroker.metadata.zk_data import TopicReassignment
from logbroker.metadata.zookeeper_store import StaleStateError, ZooKeeperMetadataStore
from logbroker.types import TopicPartition

log = logging.getLogger("kafka.controller.KafkaController")

# Attempts at a write whose znodes keep moving (the leader changing the ISR meanwhile).
_ATTEMPTS = 5


def partition_assignment(topic: TopicReassignment, partition: int) -> ReplicaAssignment:
    return ReplicaAssignment(topic.assignment[partition], topic.adding.get(partition, ()),
                             topic.removing.get(partition, ()))


def _with(topic: TopicReassignment, changes: dict[int, ReplicaAssignment]) -> TopicReassignment:
    """`topic` with the partitions in `changes` replaced (adding/removing dropped once done)."""
    assignment, adding, removing = dict(topic.assignment), dict(topic.adding), dict(topic.removing)
    for partition, change in changes.items():
        assignment[partition] = change.replicas
        adding.pop(partition, None)
        removing.pop(partition, None)
        if change.is_being_reassigned:
            adding[partition], removing[partition] = change.adding, change.removing
    return replace(topic, assignment=assignment, adding=adding, removing=removing)


class PartitionReassignments:
    def __init__(self, zk: ZooKeeperMetadataStore) -> None:
        self.zk = zk
        # The partitions under reassignment as this controller knows them. Replaced, never
        # mutated, by the worker thread; the event loop only reads it.
        self.in_progress: frozenset[TopicPartition] = frozenset()

    # -- controller side (worker thread) --------------------------------------------------------
    def alter(self, requested: dict[TopicPartition, tuple[int, ...] | None]
              ) -> dict[TopicPartition, KafkaError | None]:
        """Start a reassignment to each target (None: cancel the partition's reassignment).
        Returns each partition's error or None. Raises NotControllerError off the controller."""
        self._require_controller()
        live = set(self.zk.brokers())
        deleting = set(self.zk.topics_to_delete())
        by_topic: dict[str, dict[TopicPartition, tuple[int, ...] | None]] = {}
        for tp, target in requested.items():
            by_topic.setdefault(tp.topic, {})[tp] = target
        results: dict[TopicPartition, KafkaError | None] = {}
        for topic, targets in sorted(by_topic.items()):
            for _attempt in range(_ATTEMPTS):
                try:
                    results.update(self._start(topic, targets, live, topic in deleting))
                    break
                except StaleStateError as exc:
                    results.update(dict.fromkeys(targets, exc))
        self.resume()
        return results

    def _start(self, topic: str, targets: dict[TopicPartition, tuple[int, ...] | None],
               live: set[int], deleting: bool) -> dict[TopicPartition, KafkaError | None]:
        current = self.zk.topic_reassignment(topic)
        results: dict[TopicPartition, KafkaError | None] = {}
        changes: dict[int, ReplicaAssignment] = {}
        for tp, target in sorted(targets.items()):
            try:
                if current is None or deleting or tp.partition not in current.assignment:
                    raise UnknownTopicOrPartitionError("The partition does not exist.")
                assignment = partition_assignment(current, tp.partition)
                if target is None:
                    if not assignment.is_being_reassigned:
                        raise NoReassignmentInProgressError(
                            f"No reassignment of {tp} is in progress to cancel.")
                    target = assignment.origin_replicas
                else:
                    validate_target(target, live)
            except KafkaError as exc:
                results[tp] = exc
                continue
            changes[tp.partition] = assignment.reassign_to(target)
            results[tp] = None
        if changes:
            states, versions = {}, {}
            for partition in changes:
                tp = TopicPartition(topic, partition)
                versioned = self.zk.partition_state_with_version(tp)
                if versioned is not None:
                    states[tp] = replace(versioned.state, leader_epoch=versioned.state.leader_epoch + 1)
                    versions[tp] = versioned.zk_version
            self.zk.write_reassignment(_with(current, changes), states, expected_versions=versions)
            for partition, change in sorted(changes.items()):
                log.info("Reassigning %s-%d: replicas %s, adding %s, removing %s", topic, partition,
                         list(change.replicas), list(change.adding), list(change.removing))
        return results

    def resume(self) -> None:
        """Re-read which partitions are under reassignment and finish those that are done (after
        `alter`, and when this broker becomes controller)."""
        if not self.zk.is_controller:
            return
        ongoing = set()
        for name in self.zk.topics():
            topic = self.zk.topic_reassignment(name)
            if topic is not None:
                ongoing |= {TopicPartition(name, p) for p in {*topic.adding, *topic.removing}}
        self.in_progress = frozenset(ongoing)
        for tp in sorted(ongoing):
            self.maybe_complete(tp)

    def maybe_complete(self, tp: TopicPartition) -> None:
        """Step B for `tp` if every target replica is in its ISR (controller only)."""
        for _attempt in range(_ATTEMPTS):
            if not self.zk.is_controller:
                return
            topic = self.zk.topic_reassignment(tp.topic)
            versioned = self.zk.partition_state_with_version(tp)
            if topic is None or tp.partition not in topic.assignment or versioned is None:
                self.in_progress -= {tp}
                return
            assignment = partition_assignment(topic, tp.partition)
            if not assignment.is_being_reassigned:
                self.in_progress -= {tp}
                return
            state = completed_state(assignment, versioned.state, set(self.zk.brokers()))
            if state is None:
                return
            target = ReplicaAssignment(assignment.target_replicas)
            try:
                self.zk.write_reassignment(_with(topic, {tp.partition: target}), {tp: state},
                                           expected_versions={tp: versioned.zk_version})
            except StaleStateError:
                continue
            self.in_progress -= {tp}
            log.info("Completed reassignment of %s to replicas %s (leader %d at leader epoch %d)",
                     tp, list(target.replicas), state.leader, state.leader_epoch)
            return

    def ongoing(self, wanted: list[TopicPartition] | None) -> dict[TopicPartition, ReplicaAssignment]:
        """The reassignments in progress, of `wanted` partitions or (None) of all."""
        self._require_controller()
        names = sorted({tp.topic for tp in wanted}) if wanted is not None else sorted(self.zk.topics())
        found = {}
        for name in names:
            topic = self.zk.topic_reassignment(name)
            if topic is None:
                continue
            for partition in sorted({*topic.adding, *topic.removing}):
                found[TopicPartition(name, partition)] = partition_assignment(topic, partition)
        return found if wanted is None else {tp: a for tp, a in found.items() if tp in set(wanted)}

    def _require_controller(self) -> None:
        if not self.zk.is_controller:
            raise NotControllerError("This broker is not the controller; send the request to the "
                                     "controller named in the Metadata response.")


def apply_assignment(broker, info: TopicInfo) -> None:
    """(event loop) A topic's replicas changed: cache them, and for each partition whose replicas
    moved, start following as an added replica, track new followers as its leader, or stop and
    delete the replica of a broker no longer assigned."""
    cache = broker.store
    old = cache.topic(info.name)
    if old is None:
        return
    cache.put_topic(info)
    manager = broker.replica_manager
    for partition, replicas in sorted(info.assignment.items()):
        if old.assignment.get(partition) == replicas:
            continue
        tp = TopicPartition(info.name, partition)
        hosted = manager.partitions.get(tp)
        state = cache.partition_state(tp)
        if broker.broker_id not in replicas:
            if hosted is not None:
                manager.stop_replica(tp, delete=True)
                log.info("Stopped and deleted the replica of %s: it was reassigned to brokers %s",
                         tp, list(replicas))
        elif hosted is None:
            if state is not None:
                broker.apply_partition_state(tp, state, info)
        else:
            hosted.update_replicas(replicas)
