"""Topic admin as coroutines: what CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs and
IncrementalAlterConfigs do to the cluster.

On a single node these are the broker's own synchronous methods (a file store, no network). On a
ZooKeeper cluster the ZooKeeper round trips run in a worker thread, so a slow ZooKeeper never
stalls the event loop (produce and fetch go on meanwhile). Any broker writes, as Kafka's
AdminZkClient does: a new topic's znodes, new partitions into the topic's assignment (conditional
on its znode version), a deletion mark, or a topic's configs with a change notification; the
controller and every broker learn of it by their watches (server/zk_cluster.py).

As Kafka's broker (DelayedCreatePartitions, DelayedDeleteTopics), creating topics or partitions
and deleting topics answer only once this broker's metadata shows the change — every new
partition led, the deleted topic gone — so that a client acting on the answer finds it. Past
`timeout_ms` the answer is REQUEST_TIMED_OUT (the change itself still goes ahead); with
`timeout_ms <= 0` it does not wait. A config change is applied to this broker's logs before the
answer, and to the others' when their watch fires.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from logbroker.errors import InvalidConfigError, RequestTimedOutError
from logbroker.metadata.model import TopicInfo
from logbroker.topic_configs import deprecation_warnings
from logbroker.types import TopicPartition

log = logging.getLogger("kafka.server.ZkAdminManager")

# How often a waiting admin request looks at the metadata cache again.
METADATA_POLL_S = 0.02


async def create_topic(broker, name: str, *, num_partitions: int, replication_factor: int,
                       configs: dict[str, str], assignment: dict[int, tuple[int, ...]] | None,
                       validate_only: bool, timeout_ms: int) -> TopicInfo:
    """Create (or with `validate_only` check) a topic; on a cluster, wait until it is led here."""
    info = broker.create_topic(name, num_partitions=num_partitions, replication_factor=replication_factor,
                               configs=configs, assignment=assignment,
                               validate_only=validate_only or broker.zk is not None)
    if not validate_only:
        warn_deprecated_configs(name, configs)
    if broker.zk is None or validate_only:
        return info
    await _in_thread(broker.zk.create_topic, info)
    log.info("Created topic %s with %d partition(s)", name, info.num_partitions)
    await _await_metadata(lambda: _fully_led(broker, name, info.topic_id, info.num_partitions),
                          timeout_ms, f"Topic '{name}' was created but not all its partitions have a "
                                      f"leader yet after {timeout_ms} ms; retry the describe later.")
    return info


async def delete_topic(broker, name: str, *, timeout_ms: int) -> None:
    """Delete a topic; on a cluster, mark it for the controller and wait until it is gone here."""
    if broker.zk is None:
        broker.delete_topic(name)
        return
    topic_id = broker.store.topic(name).topic_id
    await _in_thread(broker.zk.request_topic_deletion, name)
    log.info("Marked topic %s for deletion", name)
    await _await_metadata(lambda: _gone(broker, name, topic_id), timeout_ms,
                          f"Topic '{name}' is marked for deletion but still exists after "
                          f"{timeout_ms} ms; it will be deleted while a controller is running.")


async def create_partitions(broker, name: str, count: int, *, assignment: list[tuple[int, ...]] | None,
                            validate_only: bool, timeout_ms: int) -> None:
    """Grow a topic to `count` partitions; on a cluster, wait until all of them are led here."""
    if broker.zk is None:
        broker.create_partitions(name, count, assignment=assignment, validate_only=validate_only)
        return
    added = broker.controller.create_partitions(name, count, assignment=assignment, validate_only=True)
    if validate_only:
        return
    topic_id = broker.store.topic(name).topic_id
    await _in_thread(broker.zk.add_partitions, name, added, current_count=count - len(added))
    log.info("Adding partitions %s to topic %s", sorted(added), name)
    await _await_metadata(lambda: _fully_led(broker, name, topic_id, count), timeout_ms,
                          f"Topic '{name}' was given {count} partitions but not all have a leader "
                          f"yet after {timeout_ms} ms; retry the describe later.")


def warn_deprecated_configs(name: str, configs: dict[str, str]) -> None:
    """One WARN line per config a topic is given that Kafka 4.0 removed."""
    for line in deprecation_warnings(name, configs):
        log.warning("%s", line)


async def set_topic_configs(broker, name: str, configs: dict[str, str]) -> None:
    """Replace a topic's config overrides (already validated) and apply them here."""
    warn_deprecated_configs(name, configs)
    if broker.zk is None:
        broker.set_topic_configs(name, configs)
        return
    await _in_thread(broker.zk.set_topic_configs, name, configs)
    apply_topic_configs(broker, name, configs)


def apply_topic_configs(broker, name: str, configs: dict[str, str]) -> None:
    """Cluster mode, on the event loop: a topic's overrides are now `configs` — update the
    metadata cache and give its logs here the new effective config."""
    info = broker.store.topic(name)
    if info is None or info.configs == configs:
        return
    try:
        config = broker.default_log_config.with_overrides(configs)
    except InvalidConfigError as exc:
        log.error("Ignoring the new configs of topic %s: %s", name, exc)
        return
    broker.store.put_topic(TopicInfo(info.name, info.topic_id, info.assignment, dict(configs)))
    broker.log_manager.update_topic_config(name, config)
    log.info("Topic %s has new configs: %s", name,
             ",".join(f"{k}={v}" for k, v in sorted(configs.items())) or "(defaults)")


def _fully_led(broker, name: str, topic_id: uuid.UUID, partitions: int) -> bool:
    info = broker.store.topic(name)
    if info is None or info.topic_id != topic_id or info.num_partitions < partitions:
        return False
    states = (broker.store.partition_state(TopicPartition(name, p)) for p in info.assignment)
    return all(state is not None and state.leader >= 0 for state in states)


def _gone(broker, name: str, topic_id: uuid.UUID) -> bool:
    info = broker.store.topic(name)
    return info is None or info.topic_id != topic_id


async def _await_metadata(done, timeout_ms: int, timed_out: str) -> None:
    """Wait until `done()` (a look at the metadata cache) holds, or raise RequestTimedOutError."""
    if timeout_ms <= 0:
        return
    deadline = asyncio.get_running_loop().time() + timeout_ms / 1000
    while not done():
        if asyncio.get_running_loop().time() >= deadline:
            raise RequestTimedOutError(timed_out)
        await asyncio.sleep(METADATA_POLL_S)


async def _in_thread(fn, *args, **kwargs):
    return await asyncio.get_running_loop().run_in_executor(None, lambda: fn(*args, **kwargs))
