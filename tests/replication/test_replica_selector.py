"""RackAwareReplicaSelector's choice (KIP-392) and the candidates a leader offers it: in-sync
followers that hold the fetch offset, with an endpoint on the consumer's listener."""

from __future__ import annotations

from types import SimpleNamespace

from logbroker.replication.replica_selector import (
    ClientMetadata,
    ReplicaView,
    preferred_read_replica,
    select_rack_aware,
)

LEADER = ReplicaView(1, "a", 100, 0)


def test_leader_when_the_client_has_no_rack_or_shares_the_leaders():
    followers = [ReplicaView(2, "b", 100, 0)]
    assert select_rack_aware("", LEADER, followers) is LEADER
    assert select_rack_aware("a", LEADER, followers + [ReplicaView(3, "a", 100, 0)]) is LEADER


def test_the_most_caught_up_replica_of_the_clients_rack():
    b_behind, b_ahead, b_fresher = ReplicaView(2, "b", 90, 0), ReplicaView(3, "b", 100, 500), ReplicaView(4, "b", 100, 10)
    assert select_rack_aware("b", LEADER, [b_behind, b_ahead, b_fresher]) is b_fresher
    assert select_rack_aware("z", LEADER, [b_behind]) is LEADER


def partition(followers):
    return SimpleNamespace(local_broker_id=1, log=SimpleNamespace(log_end_offset=100),
                           caught_up_followers=lambda fetch_offset: [
                               f for f in followers if f[1] >= fetch_offset])


def test_only_followers_holding_the_offset_and_reachable_are_candidates():
    client = ClientMetadata("c", "PLAINTEXT")
    racks = {1: "a", 2: "c", 3: "c"}
    lagging = partition([(2, 50, 0)])
    assert preferred_read_replica(lagging, client, 60, racks) is None
    assert preferred_read_replica(lagging, client, 40, racks) == 2
    unreachable = partition([(4, 100, 0)])  # broker 4 has no endpoint on the client's listener
    assert preferred_read_replica(unreachable, client, 0, racks) is None
