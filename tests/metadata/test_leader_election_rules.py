"""metadata/leader_election.py: whom the controller elects, and which partitions it rebalances."""

from __future__ import annotations

from logbroker.metadata.leader_election import (
    ElectionType,
    election_needed,
    offline_partition_leader,
    partitions_to_rebalance,
    preferred_replica_leader,
)
from logbroker.metadata.model import PartitionState
from logbroker.types import TopicPartition


def test_preferred_replica_leads_only_when_alive_and_in_sync():
    assert preferred_replica_leader((1, 2, 3), isr=(2, 1), live={1, 2, 3}) == 1
    assert preferred_replica_leader((1, 2, 3), isr=(2, 3), live={1, 2, 3}) is None
    assert preferred_replica_leader((1, 2, 3), isr=(1, 2), live={2, 3}) is None


def test_offline_election_prefers_the_isr_in_assignment_order_and_goes_unclean_only_when_asked():
    assert offline_partition_leader((1, 2, 3), isr=(3, 2), live={2, 3}, unclean=False) == 2
    assert offline_partition_leader((1, 2, 3), isr=(1,), live={2, 3}, unclean=False) is None
    assert offline_partition_leader((1, 2, 3), isr=(1,), live={3}, unclean=True) == 3
    assert offline_partition_leader((1, 2), isr=(1,), live=set(), unclean=True) is None


def test_election_is_needed_for_a_non_preferred_leader_or_a_partition_without_a_live_leader():
    led_by_2 = PartitionState(2, 5, (1, 2))
    assert election_needed(ElectionType.PREFERRED, (1, 2), led_by_2, live={1, 2})
    assert not election_needed(ElectionType.PREFERRED, (2, 1), led_by_2, live={1, 2})
    assert not election_needed(ElectionType.UNCLEAN, (1, 2), led_by_2, live={1, 2})
    assert election_needed(ElectionType.UNCLEAN, (1, 2), led_by_2, live={1})
    assert election_needed(ElectionType.UNCLEAN, (1, 2), PartitionState(-1, 5, (1,)), live={1, 2})


def test_rebalance_moves_partitions_only_of_brokers_above_the_imbalance_percentage():
    tps = [TopicPartition("t", p) for p in range(10)]
    assignments = {tp: (1, 2) for tp in tps}
    states = {tp: PartitionState(1, 0, (1, 2)) for tp in tps}
    states[tps[0]] = PartitionState(2, 1, (1, 2))  # 1 of broker 1's 10 partitions led elsewhere

    assert partitions_to_rebalance(assignments, states, {1, 2}, imbalance_percentage=10) == []
    assert partitions_to_rebalance(assignments, states, {1, 2}, imbalance_percentage=9) == [tps[0]]


def test_rebalance_skips_partitions_whose_preferred_replica_cannot_lead():
    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    assignments = {a: (1, 2), b: (1, 2)}
    states = {a: PartitionState(2, 1, (2, 1)), b: PartitionState(2, 1, (2,))}
    assert partitions_to_rebalance(assignments, states, {1, 2}, imbalance_percentage=10) == [a]
    assert partitions_to_rebalance(assignments, states, {2}, imbalance_percentage=10) == []
