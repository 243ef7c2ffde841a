"""Controlled shutdown: a broker leaving on SIGTERM first has the controller move its leadership.

Kafka's KafkaServer.controlledShutdown (the leaving broker) and KafkaController.doControlledShutdown
(the controller), for ZooKeeper mode.

The leaving broker, before it closes its listeners, stops following (a replica that kept fetching
would be re-admitted to ISRs it is about to abandon, and acks=-1 writes would then wait
replica.lag.time.max.ms for it to drop out again), then sends ControlledShutdown (api key 7) to the
controller — up to controlled.shutdown.max.retries times, controlled.shutdown.retry.backoff.ms
apart, while the controller answers with partitions it still leads or cannot be reached. After the
last failed attempt it shuts down anyway (uncleanly: the controller moves its leadership once its
registration is gone).

The controller, on its worker thread (serialised with its other events), gives each partition the
leaving broker leads (replication factor > 1) a new leader from the other live ISR members, drops
it from the ISR of the partitions it follows — each a fenced write conditional on the state znode's
version, with the leader epoch bumped (`metadata.controller.controlled_shutdown_state`) — and answers
with the partitions it still leads although another replica is live (that replica is not in the
ISR yet; a retry may find it caught up). Unlike Kafka, a partition with no other live replica is
not reported: no retry could move it, and the last broker of a cluster would otherwise wait out
every retry. Every replica learns the new states from its watch, so clients are re-routed
(NOT_LEADER_OR_FOLLOWER) before the broker leaves.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from logbroker.client import KafkaConnection
from logbroker.errors import (
    BrokerNotAvailableError,
    KafkaError,
    NotControllerError,
    StaleBrokerEpochError,
)
from logbroker.metadata.controller import controlled_shutdown_state
from logbroker.protocol.controlled_shutdown import ControlledShutdownRequestV3
from logbroker.types import TopicPartition

if TYPE_CHECKING:  # kazoo (~11 MiB, ~40 ms) is imported only when a cluster uses ZooKeeper
    from logbroker.metadata.zookeeper_store import ZooKeeperMetadataStore

log = logging.getLogger("kafka.server.KafkaServer")
controller_log = logging.getLogger("kafka.controller.KafkaController")

# Attempts at one partition's conditional write before it is reported as remaining.
_WRITE_ATTEMPTS = 5


# -- the leaving broker ---------------------------------------------------------------------------
async def shut_down_in_a_controlled_way(broker) -> None:
    """Stop following, then ask the controller to move this broker's leadership away, retrying as
    configured until it reports no partition left to move."""
    config = broker.config
    started = time.monotonic()
    log.info("Starting controlled shutdown")
    fetchers, broker.replica_manager.fetcher_manager = broker.replica_manager.fetcher_manager, None
    if fetchers is not None:
        await fetchers.close()
    # An attempt is bounded: with ZooKeeper unreachable, a read of it waits for a connection that
    # may never come, and SIGTERM must still end the broker.
    timeout_s = config.request_timeout_ms / 1000
    for attempt in range(1, config.controlled_shutdown_max_retries + 1):
        try:
            remaining = await asyncio.wait_for(_request(broker), timeout_s)
            if not remaining:
                log.info("Controlled shutdown request returned successfully after %d ms",
                         (time.monotonic() - started) * 1000)
                return
            log.info("Remaining partitions to move: %s", ",".join(f"{t}-{p}" for t, p in remaining))
        except KafkaError as exc:
            log.warning("Controlled shutdown attempt %d failed: %s", attempt, exc)
        except asyncio.TimeoutError:
            log.warning("Controlled shutdown attempt %d failed: no answer within request.timeout.ms "
                        "(%d ms)", attempt, config.request_timeout_ms)
        if attempt < config.controlled_shutdown_max_retries:
            await asyncio.sleep(config.controlled_shutdown_retry_backoff_ms / 1000)
    log.warning("Proceeding to do an unclean shutdown as all the controlled shutdown attempts failed")


async def _request(broker) -> list[tuple[str, int]]:
    """One ControlledShutdown round trip to the controller: the partitions it says remain."""
    controller = broker.inter_broker_endpoint(broker.controller_id)
    if controller is None:
        raise NotControllerError("No controller is known yet; retrying.")
    epoch = await asyncio.get_running_loop().run_in_executor(None, broker.zk.broker_epoch, broker.broker_id)
    connection = KafkaConnection(controller.host, controller.port,
                                 client_id=f"broker-{broker.broker_id}-controlled-shutdown",
                                 timeout_s=broker.config.request_timeout_ms / 1000,
                                 security=broker.inter_broker_security)
    try:
        response = await connection.request(ControlledShutdownRequestV3(
            broker_id=broker.broker_id, broker_epoch=-1 if epoch is None else epoch))
    finally:
        await connection.close()
    if response.error_code != ErrorCode.none:
        raise KafkaError(f"controller {controller.broker_id} answered {ErrorCode(response.error_code).name}")
    return [(p.topic_name, p.partition_index) for p in response.remaining_partitions]


# -- the controller -------------------------------------------------------------------------------
def move_leadership_away(zk: ZooKeeperMetadataStore, broker_id: int, broker_epoch: int) -> list[TopicPartition]:
    """The controller's side (worker thread: blocks on ZooKeeper). Returns the partitions that
    `broker_id` still leads although another of their replicas is live. Raises NotControllerError,
    BrokerNotAvailableError (not registered), StaleBrokerEpochError (an older registration's)."""
    if not zk.is_controller:
        raise NotControllerError(f"Broker {zk.broker_id} is not the controller; ask the current one.")
    live = set(zk.brokers())
    current_epoch = zk.broker_epoch(broker_id)
    if broker_id not in live or current_epoch is None:
        raise BrokerNotAvailableError(f"Broker id {broker_id} is not registered in the cluster.")
    if 0 <= broker_epoch < current_epoch:
        raise StaleBrokerEpochError(f"Broker epoch {broker_epoch} of broker {broker_id} is older than "
                                    f"its registration's ({current_epoch}); it restarted since.")
    controller_log.info("Shutting down broker %d", broker_id)
    remaining = []
    for name, info in sorted(zk.topics().items()):
        for partition, replicas in sorted(info.assignment.items()):
            if broker_id in replicas and any(r != broker_id and r in live for r in replicas):
                tp = TopicPartition(name, partition)
                if _move_one(zk, tp, replicas, broker_id, live):
                    remaining.append(tp)
    return remaining


def _move_one(zk: ZooKeeperMetadataStore, tp: TopicPartition, replicas: tuple[int, ...],
              broker_id: int, live: set[int]) -> bool:
    """Move `tp` off `broker_id`; True if it still leads it afterwards."""
    from logbroker.metadata.zookeeper_store import StaleStateError  # zk is one: kazoo is loaded

    for _attempt in range(_WRITE_ATTEMPTS):
        versioned = zk.partition_state_with_version(tp)
        if versioned is None:
            return False
        state = controlled_shutdown_state(versioned.state, replicas, leaving=broker_id, live=live)
        if state is None:
            return versioned.state.leader == broker_id
        try:
            zk.set_partition_states({tp: state}, expected_versions={tp: versioned.zk_version})
        except StaleStateError:
            continue  # the leader changed the ISR meanwhile: decide again on a fresh read
        controller_log.info("Controlled shutdown of broker %d: %s now has leader %d at leader epoch %d "
                            "(ISR %s)", broker_id, tp, state.leader, state.leader_epoch, list(state.isr))
        return state.leader == broker_id
    return True
