"""The controller: the one writer of topics, assignments and leaders.

Kafka's controller, reduced to what a metadata store needs: create and delete topics, add
partitions, change topic configs, and elect leaders. It knows nothing of logs or sockets; it
writes the store and returns what changed, and the broker applies that to its replicas. A
single node runs the same controller over the file store (architecture.md §4).

Topic names follow Kafka's rules (its Topic.validate): 1-249 characters of [a-zA-Z0-9._-], not "."
or "..". A topic name becomes a directory name, a field of the line-based checkpoint files and a
znode name, so the whole string must match — `fullmatch`, never `match` with `$`, which also
matches before a trailing newline ("evil\n" split every checkpoint line).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from logbroker.errors import (
    InvalidReplicaAssignmentError,
    KafkaError,
    KafkaStorageError,
    PolicyViolationError,
    InvalidPartitionsError,
    InvalidTopicError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from logbroker.metadata.assignment import assign_replicas
from logbroker.metadata.local_store import LocalMetadataStore
from logbroker.metadata.model import PartitionState, TopicInfo, new_topic_id
from logbroker.topic_configs import parse_overrides
from logbroker.types import MAX_TOPIC_LENGTH, TopicPartition

# Kafka's controller refuses a request that would write more than this many records in one go
# (QuorumController.MAX_RECORDS_PER_USER_OP): POLICY_VIOLATION "Unable to perform excessively large
# batch operation." Checked here per topic, before any replica is assigned: a CreatePartitions
# count of 2^31 - 1 from any client must not make the broker build two billion assignments.
MAX_PARTITIONS_PER_OPERATION = 10_000
LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+", re.ASCII)


def validate_topic_name(name: str) -> None:
    """Raise InvalidTopicError (INVALID_TOPIC_EXCEPTION, 17) unless `name` is a legal topic name."""
    if not isinstance(name, str):
        raise InvalidTopicError(f"Topic name {name!r} is illegal, it must be a string")
    if not name:
        raise InvalidTopicError("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicError("Topic name cannot be \".\" or \"..\"")
    if len(name) > MAX_TOPIC_LENGTH:
        raise InvalidTopicError(
            f"Topic name is illegal, it can't be longer than {MAX_TOPIC_LENGTH} characters, topic name: {name[:MAX_TOPIC_LENGTH]!r}...")
    if not LEGAL_TOPIC.fullmatch(name):
        raise InvalidTopicError(
            f"Topic name {name!r} is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'")


def _check_batch_size(new_partitions: int) -> None:
    if new_partitions > MAX_PARTITIONS_PER_OPERATION:
        raise PolicyViolationError("Unable to perform excessively large batch operation.")


class Controller:
    def __init__(self, store: LocalMetadataStore, *, live_brokers: list[int]) -> None:
        self.store = store
        self.live_brokers = live_brokers

    def create_topic(self, name: str, *, num_partitions: int, replication_factor: int,
                     configs: Mapping[str, str], assignment: dict[int, tuple[int, ...]] | None = None,
                     validate_only: bool = False) -> TopicInfo:
        """Create a topic and elect its leaders. Raises TopicAlreadyExistsError, InvalidTopicError,
        InvalidPartitionsError, InvalidReplicationFactorError, InvalidConfigError."""
        validate_topic_name(name)
        self._check_collision(name)
        _check_batch_size(len(assignment) if assignment else num_partitions)
        parse_overrides(configs)  # raises InvalidConfigError naming the key
        if assignment:
            self._check_assignment(assignment, start=0)
        else:
            assignment = assign_replicas(self.live_brokers, num_partitions, replication_factor)
        info = TopicInfo(name, new_topic_id(), dict(assignment), dict(configs))
        if validate_only:
            if self.store.topic(name) is not None:
                raise TopicAlreadyExistsError(f"Topic '{name}' already exists.")
            return info
        self.store.create_topic(info)
        try:
            self._elect(name, info.assignment)
        except KafkaStorageError:  # no room for the leaders: do not leave a topic without them
            try:
                self.store.delete_topic(name)
            except KafkaError:
                pass
            raise
        return info

    def delete_topic(self, name: str) -> TopicInfo:
        return self.store.delete_topic(name)

    def _check_collision(self, name: str) -> None:
        """Kafka refuses `a.b` when `a_b` exists (and vice versa): metric names replace '.' by
        '_'. On every path that creates a topic (CreateTopics, Metadata auto-create), as Kafka's
        AdminZkClient.validateTopicCreate."""
        if "." not in name and "_" not in name:
            return
        key = name.replace(".", "_")
        for existing in self.store.topics():
            if existing != name and existing.replace(".", "_") == key:
                raise InvalidTopicError(f"Topic '{name}' collides with existing topic: {existing}")

    def create_partitions(self, name: str, count: int, *,
                          assignment: list[tuple[int, ...]] | None = None,
                          validate_only: bool = False) -> dict[int, tuple[int, ...]]:
        """Grow a topic to `count` partitions; returns the new partitions' assignment."""
        info = self.store.topic(name)
        if info is None:
            raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist.")
        current = info.num_partitions
        if count <= current:
            raise InvalidPartitionsError(
                f"Topic currently has {current} partitions, {count} would not be an increase.")
        _check_batch_size(count - current)
        if assignment:
            added = {current + i: tuple(r) for i, r in enumerate(assignment)}
            if len(added) != count - current:
                raise InvalidReplicaAssignmentError(
                    f"Increasing the number of partitions by {count - current} but "
                    f"{len(added)} assignments provided.")
            self._check_assignment(added, start=current)
        else:
            added = assign_replicas(self.live_brokers, count - current, info.replication_factor,
                                    start_partition=current)
        if not validate_only:
            self.store.set_assignment(name, {**info.assignment, **added})
            self._elect(name, added)
        return added

    def elect_all(self) -> dict[TopicPartition, PartitionState]:
        """Elect a leader for every partition with a live replica, bumping the leader epoch —
        what Kafka's controller does for a broker that (re)starts. Returns the new states."""
        states = {}
        for name, info in self.store.topics().items():
            states.update(self._new_states(name, info.assignment))
        self.store.set_partition_states(states)
        return states

    def _elect(self, name: str, assignment: dict[int, tuple[int, ...]]) -> None:
        self.store.set_partition_states(self._new_states(name, assignment))

    def _new_states(self, name: str, assignment: dict[int, tuple[int, ...]]) -> dict[TopicPartition, PartitionState]:
        states = {}
        for partition, replicas in assignment.items():
            tp = TopicPartition(name, partition)
            live = tuple(r for r in replicas if r in self.live_brokers)
            old = self.store.partition_state(tp)
            epoch = old.leader_epoch + 1 if old else 0
            states[tp] = PartitionState(live[0] if live else -1, epoch, live)
        return states

    def _check_assignment(self, assignment: dict[int, tuple[int, ...]], *, start: int) -> None:
        if sorted(assignment) != list(range(start, start + len(assignment))):
            raise InvalidReplicaAssignmentError("Partitions should be a consecutive 0-based integer sequence")
        sizes = {len(r) for r in assignment.values()}
        if len(sizes) != 1 or 0 in sizes:
            raise InvalidReplicaAssignmentError("All partitions should have the same number of replicas")
        for replicas in assignment.values():
            if len(set(replicas)) != len(replicas):
                raise InvalidReplicaAssignmentError(f"Duplicate brokers in replica assignment {list(replicas)}")
            unknown = [r for r in replicas if r not in self.live_brokers]
            if unknown:
                raise InvalidReplicaAssignmentError(f"Unknown broker(s) in replica assignment: {unknown}")


def controlled_shutdown_state(state: PartitionState, replicas: tuple[int, ...], *, leaving: int,
                              live: set[int]) -> PartitionState | None:
    """The new state of a partition hosted on broker `leaving`, which is shutting down in a
    controlled way (Kafka's KafkaController.doControlledShutdown), or None to leave it as it is.

    Led by `leaving`: the first replica of the assignment that is live, in the ISR and not
    leaving becomes leader, and the ISR loses `leaving` (ControlledShutdownPartitionLeader-
    ElectionStrategy); with no such replica it stays the leader, to be reported as remaining.
    Followed by `leaving` while in the ISR: the ISR loses it, unless it is the last member
    (removeReplicasFromIsr). Either way the leader epoch is bumped, so every replica acts on it.
    """
    isr = tuple(r for r in state.isr if r != leaving)
    if state.leader == leaving:
        leader = next((r for r in replicas if r in isr and r in live), None)
        return None if leader is None else PartitionState(leader, state.leader_epoch + 1, isr)
    if isr != state.isr and isr:
        return PartitionState(state.leader, state.leader_epoch + 1, isr)
    return None
