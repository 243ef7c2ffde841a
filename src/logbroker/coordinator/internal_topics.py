"""Creating a coordinator's internal topic (`__consumer_offsets`, `__transaction_state`,
`__share_group_state`) on first use, the one way all three coordinators do it.

As Kafka's ZooKeeper mode: in a cluster the topic gets its configured replication factor and is
refused with COORDINATOR_NOT_AVAILABLE while fewer brokers are alive (clients retry
FindCoordinator); a single node (`live_brokers` None) uses one replica, so the embedded default
needs no configuration, and `min.insync.replicas` is capped at the replication factor, or nothing
could ever be written. A full or failing log dir is COORDINATOR_NOT_AVAILABLE too, as in Kafka.
"""

from __future__ import annotations

from collections.abc import Callable

from logbroker.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    KafkaStorageError,
    NotCoordinatorError,
    TopicAlreadyExistsError,
)

# Named here as well as used by coordinator/share_state_log.py: the broker follows its leadership
# to start share groups (server/share_groups.py) without importing them.
SHARE_STATE_TOPIC = "__share_group_state"


def ensure_internal_topic(name: str, *, store, create_topic: Callable, live_brokers: Callable[[], int] | None,
                          num_partitions: int, replication_factor: int, replication_factor_key: str,
                          configs: dict[str, str], min_insync_replicas: int | None = None) -> None:
    """Create topic `name` unless the metadata store has it. `configs` are its topic configs;
    `min_insync_replicas`, when given, is capped at the replication factor used."""
    if store.topic(name) is not None:
        return
    if live_brokers is None:
        replication_factor = 1
    elif (live := live_brokers()) < replication_factor:
        raise CoordinatorNotAvailableError(
            f"{live} broker(s) are alive, fewer than {replication_factor_key}={replication_factor} needs to "
            f"create {name}; start more brokers or lower the setting")
    if min_insync_replicas is not None:
        configs = {**configs, "min.insync.replicas": str(min(min_insync_replicas, replication_factor))}
    try:
        create_topic(name, num_partitions=num_partitions, replication_factor=replication_factor, configs=configs)
    except TopicAlreadyExistsError:
        pass  # another broker created it a moment ago; our metadata learns of it by its watch
    except KafkaStorageError as exc:
        raise CoordinatorNotAvailableError(f"{name} cannot be created: {exc}") from None


def require_coordinator(tp, *, store, replica_manager, partitions, holds: str) -> None:
    """Raise unless this broker coordinates what internal-topic partition `tp` holds (`holds`
    names it for the error): NOT_COORDINATOR while the topic does not exist, while another broker
    leads `tp` or before this one has taken it over; COORDINATOR_LOAD_IN_PROGRESS while it loads.
    `partitions` is the coordinator's CoordinatedPartitions."""
    if store.topic(tp.topic) is None:
        raise NotCoordinatorError(f"{tp.topic} does not exist yet")
    partition = replica_manager.partitions.get(tp)
    if partition is None or not partition.is_leader:
        raise NotCoordinatorError(f"This broker does not lead {tp}, which holds {holds}")
    if tp.partition in partitions.loading:
        raise CoordinatorLoadInProgressError(f"{tp} is loading; retry in a moment")
    if tp.partition not in partitions.owned:
        raise NotCoordinatorError(f"This broker has not taken over {tp} yet, which holds {holds}")
