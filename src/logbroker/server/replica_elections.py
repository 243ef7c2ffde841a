"""The controller's leader elections on request (ElectLeaders) and the periodic leader rebalance.

Kafka's KafkaController.processReplicaLeaderElection and checkAndTriggerAutoLeaderRebalance, on
our ZooKeeper layout (architecture.md §5). Both run on the cluster's single worker thread
(`ZooKeeperCluster.run_on_worker`), so they never interleave with the controller's other events,
and they block on ZooKeeper. Each election is one controller write — fenced by the controller
epoch, conditional on the state version it was decided on, bumping the leader epoch — that the
brokers act on through their state watches. A state that moved meanwhile is re-read and decided
again.

The rebalance runs every leader.imbalance.check.interval.seconds on every broker, and does work
only on the controller: when more than leader.imbalance.per.broker.percentage of the partitions a
broker prefers are led elsewhere, leadership of those whose preferred replica is alive and in the
ISR goes back to it (metadata/leader_election.py). Partitions under reassignment are left alone.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from typing import TYPE_CHECKING

from logbroker.errors import (
    EligibleLeadersNotAvailableError,
    ElectionNotNeededError,
    InvalidTopicError,
    KafkaError,
    NotControllerError,
    PreferredLeaderNotAvailableError,
    UnknownTopicOrPartitionError,
)
from logbroker.metadata.leader_election import (
    ElectionType,
    election_needed,
    offline_partition_leader,
    partitions_to_rebalance,
    preferred_replica_leader,
)
from logbroker.types import TopicPartition

if TYPE_CHECKING:  # kazoo (~11 MiB, ~40 ms) is imported only when a cluster uses ZooKeeper
    from logbroker.metadata.zookeeper_store import ZooKeeperMetadataStore

log = logging.getLogger("kafka.controller.KafkaController")

# Attempts at one partition's election when the leader keeps changing its ISR under us.
_ATTEMPTS = 5


def elect_leaders(zk: ZooKeeperMetadataStore, partitions: list[TopicPartition] | None,
                  election_type: ElectionType) -> dict[TopicPartition, int | KafkaError]:
    """Elect leaders for `partitions` (None: every partition) on the controller. Returns, per
    partition, the new leader or the error (ELECTION_NOT_NEEDED when the leader is already the
    one this election type wants). Raises NotControllerError on any other broker."""
    if not zk.is_controller:
        raise NotControllerError("This broker is not the controller; send ElectLeaders to the "
                                 "controller named in the Metadata response.")
    topics = zk.topics()
    deleting = set(zk.topics_to_delete())
    live = set(zk.brokers())
    if partitions is None:
        partitions = [TopicPartition(name, p) for name, info in sorted(topics.items())
                      for p in sorted(info.assignment)]
    results: dict[TopicPartition, int | KafkaError] = {}
    for tp in partitions:
        info = topics.get(tp.topic)
        if info is None or tp.partition not in info.assignment:
            results[tp] = UnknownTopicOrPartitionError("The partition does not exist.")
        elif tp.topic in deleting:
            results[tp] = InvalidTopicError("The topic is being deleted")
        else:
            results[tp] = _elect_one(zk, tp, info.assignment[tp.partition], live, election_type)
    return results


def _elect_one(zk: ZooKeeperMetadataStore, tp: TopicPartition, assignment: tuple[int, ...],
               live: set[int], election_type: ElectionType) -> int | KafkaError:
    from logbroker.metadata.zookeeper_store import StaleStateError  # zk is one: kazoo is loaded

    for _attempt in range(_ATTEMPTS):
        versioned = zk.partition_state_with_version(tp)
        if versioned is None:
            return _not_electable(tp, election_type)
        old = versioned.state
        if not election_needed(election_type, assignment, old, live):
            return ElectionNotNeededError("Leader election not needed for topic partition.")
        if election_type == ElectionType.PREFERRED:
            leader = preferred_replica_leader(assignment, old.isr, live)
            isr = old.isr
        else:
            leader = offline_partition_leader(assignment, old.isr, live, unclean=True)
            isr = tuple(r for r in old.isr if r in live) if leader in old.isr else (leader,)
        if leader is None:
            return _not_electable(tp, election_type)
        state = replace(old, leader=leader, leader_epoch=old.leader_epoch + 1, isr=isr)
        try:
            zk.set_partition_states({tp: state}, expected_versions={tp: versioned.zk_version})
        except StaleStateError:
            continue
        if leader not in old.isr:
            log.warning("Unclean leader election for %s: broker %d was not in the ISR %s",
                        tp, leader, list(old.isr))
        log.info("Elected leader %d for %s at leader epoch %d (%s election, ISR %s)", leader, tp,
                 state.leader_epoch, election_type.name, list(isr))
        return leader
    return StaleStateError(f"The state of {tp} kept changing during the election; retry it.")


def _not_electable(tp: TopicPartition, election_type: ElectionType) -> KafkaError:
    if election_type == ElectionType.PREFERRED:
        return PreferredLeaderNotAvailableError(
            f"Failed to elect leader for partition {tp} under strategy PREFERRED: the preferred "
            f"replica is not alive or not in the ISR.")
    return EligibleLeadersNotAvailableError(
        f"Failed to elect leader for partition {tp} under strategy UNCLEAN: no replica is alive.")


def auto_rebalance(zk: ZooKeeperMetadataStore, *, imbalance_percentage: int,
                   reassigning: frozenset[TopicPartition]) -> None:
    """One check of leader imbalance (controller only; a no-op elsewhere): move leadership back
    to preferred replicas where a broker's imbalance exceeds `imbalance_percentage`."""
    if not zk.is_controller:
        return
    deleting = set(zk.topics_to_delete())
    assignments = {TopicPartition(name, p): replicas
                   for name, info in zk.topics().items() if name not in deleting
                   for p, replicas in info.assignment.items()}
    states = {}
    for tp in assignments:
        state = zk.partition_state(tp)
        if state is not None:
            states[tp] = state
    moves = [tp for tp in partitions_to_rebalance(assignments, states, set(zk.brokers()),
                                                  imbalance_percentage=imbalance_percentage)
             if tp not in reassigning]
    if moves:
        log.info("Leader imbalance above %d%%: moving leadership of %s back to the preferred "
                 "replicas", imbalance_percentage, ", ".join(map(str, moves)))
        elect_leaders(zk, moves, ElectionType.PREFERRED)


async def auto_rebalance_every(cluster, *, interval_s: float, imbalance_percentage: int) -> None:
    """Run `auto_rebalance` on the cluster's worker thread every `interval_s` until cancelled."""
    while True:
        await asyncio.sleep(interval_s)
        try:
            await cluster.run_on_worker(auto_rebalance, cluster.zk,
                                        imbalance_percentage=imbalance_percentage,
                                        reassigning=cluster.reassignments.in_progress)
        except KafkaError as exc:
            log.info("Leader rebalance check skipped: %s", exc)
        except Exception:  # noqa: BLE001 - the next check must still run
            log.exception("Leader rebalance check failed")
