"""KIP-890 part 1: before a producer's first transactional batch on a partition is appended (and
before a TxnOffsetCommit), the partition leader asks the transaction coordinator whether the
partition is in the producer's ongoing transaction — so a hanging transaction (data appended after
its abort, or before AddPartitionsToTxn) can no longer be written.

When this broker coordinates the transactional id the check is a direct call
(TransactionCoordinator.verify_partitions); otherwise it is an AddPartitionsToTxn v4 request with
`verify_only` to the coordinator (the leader of the id's `__transaction_state` partition) over the
inter-broker listener. The answers are mapped as Kafka's AddPartitionsToTxnManager and
ReplicaManager map them for a produce: PRODUCER_FENCED → INVALID_PRODUCER_EPOCH, a coordinator
that is loading, moving or busy → NOT_ENOUGH_REPLICAS (retriable), not in the transaction →
INVALID_TXN_STATE.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from logbroker.client import PLAINTEXT, BrokerConnections, ClientSecurity, ConnectionClosedError
from logbroker.errors import InvalidProducerEpochError, KafkaError, NotEnoughReplicasError, error_for_code
from logbroker.types import TopicPartition

log = logging.getLogger("kafka.server.AddPartitionsToTxnManager")

_RETRIABLE = {"CONCURRENT_TRANSACTIONS", "COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE",
              "NOT_COORDINATOR", "NETWORK_EXCEPTION"}


def for_produce(error: KafkaError | None) -> KafkaError | None:
    if error is None:
        return None
    if error.name == "PRODUCER_FENCED":
        return InvalidProducerEpochError(str(error))
    if error.name in _RETRIABLE:
        return NotEnoughReplicasError(f"the transaction could not be verified yet ({error.name}); retry")
    return error


class TransactionVerifier:
    def __init__(self, *, broker_id: int, coordinator, store,
                 endpoint: Callable[[int], tuple[str, int] | None] = lambda broker_id: None,
                 security: ClientSecurity = PLAINTEXT, request_timeout_ms: int = 30_000) -> None:
        self.broker_id = broker_id
        self.coordinator = coordinator
        self.store = store
        self._connections = BrokerConnections(endpoint=endpoint, security=security, timeout_ms=request_timeout_ms,
                                              client_id=f"broker-{broker_id}-txn-verifier")

    def coordinator_id(self, transactional_id: str) -> int:
        """The broker coordinating `transactional_id` (-1: none known)."""
        manager = self.coordinator.state_manager
        if not transactional_id:
            return -1
        state = self.store.partition_state(manager.coordinator_partition(transactional_id))
        return state.leader if state is not None else -1

    def verify_local(self, *, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: list[TopicPartition]) -> dict[TopicPartition, KafkaError | None]:
        try:
            self.coordinator.state_manager.check(transactional_id)
        except KafkaError as exc:
            return {tp: exc for tp in partitions}
        return self.coordinator.verify_partitions(transactional_id=transactional_id, producer_id=producer_id,
                                                  producer_epoch=producer_epoch, partitions=partitions)

    async def verify(self, *, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: list[TopicPartition]) -> dict[TopicPartition, KafkaError | None]:
        leader = self.coordinator_id(transactional_id)
        if leader == self.broker_id or leader < 0:
            return self.verify_local(transactional_id=transactional_id, producer_id=producer_id,
                                     producer_epoch=producer_epoch, partitions=partitions)
        try:
            return await self._verify_remote(leader, transactional_id, producer_id, producer_epoch, partitions)
        except ConnectionClosedError as exc:
            log.info("Verifying the transaction of %s with broker %d failed: %s", transactional_id, leader, exc)
            return {tp: NotEnoughReplicasError("the transaction coordinator is unreachable; retry")
                    for tp in partitions}

    async def _verify_remote(self, leader: int, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: list[TopicPartition]) -> dict[TopicPartition, KafkaError | None]:
        if self._connections.get(leader) is None:
            return {tp: NotEnoughReplicasError("the transaction coordinator is unknown; retry") for tp in partitions}
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        from kio.schema.add_partitions_to_txn.v4.request import (  # on first use: a cluster's
            AddPartitionsToTxnRequest,  # transactions only, so a single broker never loads it
            AddPartitionsToTxnTopic,
            AddPartitionsToTxnTransaction,
        )

        request = AddPartitionsToTxnRequest(transactions=(AddPartitionsToTxnTransaction(
            transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch,
            verify_only=True,
            topics=tuple(AddPartitionsToTxnTopic(name=t, partitions=tuple(ps)) for t, ps in by_topic.items())),))
        response = await self._connections.request(leader, request, idempotent=True)  # verify-only: a read
        if int(response.error_code):
            return {tp: error_for_code(int(response.error_code)) for tp in partitions}
        results: dict[TopicPartition, KafkaError | None] = {tp: None for tp in partitions}
        for txn in response.results_by_transaction:
            for topic in txn.topic_results:
                for p in topic.results_by_partition:
                    results[TopicPartition(topic.name, p.partition_index)] = error_for_code(int(p.partition_error_code))
        return results

    async def close(self) -> None:
        await self._connections.close()
