"""Replica assignment for new topics and partitions: Kafka's rack-unaware round robin.

Kafka's AdminUtils.assignReplicasToBrokers: the first replica of partition p goes to broker
(p + start) mod n; the others follow at a shift that grows by one every n partitions, so that
leaders and followers both spread evenly. `start` and the shift are random unless fixed.
"""

from __future__ import annotations

import random

from logbroker.errors import InvalidPartitionsError, InvalidReplicationFactorError


def assign_replicas(broker_ids: list[int], num_partitions: int, replication_factor: int, *,
                    start_partition: int = 0, fixed_start_index: int = -1) -> dict[int, tuple[int, ...]]:
    if num_partitions <= 0:
        raise InvalidPartitionsError(f"Number of partitions must be larger than 0, got {num_partitions}.")
    if replication_factor <= 0:
        raise InvalidReplicationFactorError(
            f"Replication factor must be larger than 0, got {replication_factor}.")
    brokers = sorted(broker_ids)
    n = len(brokers)
    if replication_factor > n:
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: {n}.")
    start = fixed_start_index if fixed_start_index >= 0 else random.randrange(n)
    shift = fixed_start_index if fixed_start_index >= 0 else random.randrange(n)
    assignment: dict[int, tuple[int, ...]] = {}
    for partition in range(start_partition, start_partition + num_partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start) % n
        replicas = [brokers[first]]
        for j in range(replication_factor - 1):
            replicas.append(brokers[(first + 1 + (shift + j) % (n - 1)) % n])
        assignment[partition] = tuple(replicas)
    return assignment
