"""KIP-392: which replica a consumer should fetch from (Kafka's ReplicaSelector).

`replica.selector.class` names the selector. Kafka's default, LeaderSelector, always answers the
leader: consumers fetch from leaders only. RackAwareReplicaSelector answers, for a consumer that
sends its `client.rack` (Fetch v11+ rack_id), the leader when it is in that rack, else the most
caught-up replica in that rack (highest log end offset, then the most recently caught up), else
the leader. The leader puts the answer in the fetch response's preferred_read_replica (unless it
is the leader itself) and reads nothing for that partition; the consumer then fetches from that
follower, which serves it up to its own high watermark.

The candidates (ReplicaManager.findPreferredReadReplica) are the in-sync followers holding the
fetch offset, with an endpoint on the consumer's listener, and the leader. Pure functions.
"""

from __future__ import annotations

from dataclasses import dataclass

LEADER_SELECTOR = "org.apache.kafka.common.replica.LeaderSelector"
RACK_AWARE_REPLICA_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
SELECTORS = (LEADER_SELECTOR, RACK_AWARE_REPLICA_SELECTOR)


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """One candidate replica: its broker, that broker's rack, and how caught up it is."""

    broker_id: int
    rack: str | None
    log_end_offset: int
    time_since_last_caught_up_ms: int


def select_rack_aware(client_rack: str, leader: ReplicaView,
                      followers: list[ReplicaView]) -> ReplicaView:
    """RackAwareReplicaSelector.select: the replica a consumer in `client_rack` should read."""
    if not client_rack or leader.rack == client_rack:
        return leader
    same_rack = [r for r in followers if r.rack == client_rack]
    if not same_rack:
        return leader
    return max(same_rack, key=lambda r: (r.log_end_offset, -r.time_since_last_caught_up_ms))


@dataclass(frozen=True, slots=True)
class ClientMetadata:
    """What a Fetch v11+ tells of the consumer: its rack (may be empty) and the listener it came
    in on (the replicas it may be sent to are those with an endpoint there)."""

    rack_id: str
    listener_name: str | None


def preferred_read_replica(partition, client: ClientMetadata, fetch_offset: int,
                           racks: dict[int, str | None]) -> int | None:
    """On the leader of `partition`: the follower a consumer should fetch from instead, or None
    for the leader itself. `racks` maps each live broker reachable on the client's listener to
    its rack."""
    leader = ReplicaView(partition.local_broker_id, racks.get(partition.local_broker_id),
                         partition.log.log_end_offset, 0)
    followers = [ReplicaView(broker_id, racks[broker_id], log_end_offset, since_caught_up_ms)
                 for broker_id, log_end_offset, since_caught_up_ms
                 in partition.caught_up_followers(fetch_offset) if broker_id in racks]
    chosen = select_rack_aware(client.rack_id, leader, followers)
    return None if chosen is leader else chosen.broker_id
