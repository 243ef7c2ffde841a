"""Sending transaction markers to the leaders of a transaction's partitions (Kafka's
TransactionMarkerChannelManager).

After PrepareCommit or PrepareAbort is stored, every partition of the transaction gets a COMMIT or
ABORT control batch from its leader. Partitions are grouped by leader: those led here are written
with `ReplicaManager.write_txn_markers` directly; the others go to their leader over the
inter-broker listener (with its security, as the replica fetchers connect), one WriteTxnMarkers
request in flight per broker, carrying the markers of every transaction queued meanwhile. A
partition is retried until its marker is written: a partition without a leader waits for the
metadata to name one, NOT_LEADER_OR_FOLLOWER and connection failures re-resolve the leader after
a short backoff. A partition whose topic was deleted is dropped (nothing is left to mark), and one
that answers INVALID_PRODUCER_EPOCH or TRANSACTION_COORDINATOR_FENCED has already seen a newer
producer epoch or coordinator, so its marker is moot. Sending stops when `still_valid()` turns
false (this broker no longer coordinates the transaction; the new coordinator resumes it from the
Prepare* state it loads).

Runs on the event loop. For the metrics: `queue_size` counts the partitions whose markers are not
yet written, `unknown_destination_queue_size` those of them without a known leader (Kafka's
UnknownDestinationQueueSize).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the request's schema is imported when a broker first sends markers to another
    from kio.schema.write_txn_markers.v1.request import WritableTxnMarker

from logbroker.client import PLAINTEXT, BrokerConnections, ClientSecurity, ConnectionClosedError
from logbroker.errors import KafkaError, UnknownServerError, error_for_code
from logbroker.types import TopicPartition

log = logging.getLogger("kafka.coordinator.transaction.TransactionMarkerChannelManager")

BACKOFF_S = 0.05
MAX_BACKOFF_S = 1.0
_MOOT = {"INVALID_PRODUCER_EPOCH", "TRANSACTION_COORDINATOR_FENCED", "PRODUCER_FENCED"}


class TransactionMarkerChannel:
    def __init__(self, *, broker_id: int, replica_manager, store,
                 endpoint: Callable[[int], tuple[str, int] | None] = lambda broker_id: None,
                 security: ClientSecurity = PLAINTEXT, request_timeout_ms: int = 30_000) -> None:
        self.broker_id = broker_id
        self.replica_manager = replica_manager
        self.store = store
        self._timeout_ms = request_timeout_ms
        self._connections = BrokerConnections(endpoint=endpoint, security=security, timeout_ms=request_timeout_ms,
                                              client_id=f"broker-{broker_id}-txn-marker-sender")
        self.queue_size = 0
        self._unknown_destinations: dict[int, int] = {}  # per send_markers call
        # Markers waiting for the next request to each broker, and the task sending them.
        self._queues: dict[int, list[tuple[WritableTxnMarker, list[TopicPartition], asyncio.Future]]] = {}
        self._senders: dict[int, asyncio.Task] = {}

    async def send_markers(self, *, transactional_id: str, producer_id: int, producer_epoch: int,
                           coordinator_epoch: int, commit: bool, partitions: set[TopicPartition],
                           still_valid: Callable[[], bool]) -> bool:
        """Write the markers of one transaction; True once all are written, False if sending
        stopped because `still_valid()` turned false."""
        pending = set(partitions)
        self.queue_size += len(pending)
        backoff = BACKOFF_S
        try:
            while pending:
                if not still_valid():
                    return False
                by_leader: dict[int, list[TopicPartition]] = {}
                unknown = 0
                for tp in list(pending):
                    if self.store.topic(tp.topic) is None:
                        log.info("Dropping the %s marker of %s for %s: the topic was deleted",
                                 "COMMIT" if commit else "ABORT", transactional_id, tp)
                        self._done(pending, tp)
                        continue
                    state = self.store.partition_state(tp)
                    if state is not None and state.leader >= 0:
                        by_leader.setdefault(state.leader, []).append(tp)
                    else:
                        unknown += 1
                self._unknown_destinations[id(pending)] = unknown
                sends = [self._send(leader, tps, producer_id=producer_id, producer_epoch=producer_epoch,
                                    coordinator_epoch=coordinator_epoch, commit=commit)
                         for leader, tps in by_leader.items()]
                for results in await asyncio.gather(*sends):
                    for tp, error in results.items():
                        if error is None or error.name in _MOOT:
                            if error is not None:
                                log.info("Marker of %s for %s is moot: %s", transactional_id, tp, error.name)
                            self._done(pending, tp)
                        elif error.name == "UNKNOWN_TOPIC_OR_PARTITION" and self.store.topic(tp.topic) is None:
                            self._done(pending, tp)
                if pending:
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, MAX_BACKOFF_S)
            return True
        finally:
            self.queue_size -= len(pending)
            self._unknown_destinations.pop(id(pending), None)

    @property
    def unknown_destination_queue_size(self) -> int:
        return sum(self._unknown_destinations.values())

    def _done(self, pending: set[TopicPartition], tp: TopicPartition) -> None:
        pending.discard(tp)
        self.queue_size -= 1

    async def _send(self, leader: int, tps: list[TopicPartition], *, producer_id: int, producer_epoch: int,
                    coordinator_epoch: int, commit: bool) -> dict[TopicPartition, KafkaError | None]:
        try:
            if leader == self.broker_id:
                return await self.replica_manager.write_txn_markers(
                    producer_id=producer_id, producer_epoch=producer_epoch, coordinator_epoch=coordinator_epoch,
                    commit=commit, partitions=tps, timeout_ms=self._timeout_ms)
            return await self._send_remote(leader, tps, producer_id=producer_id, producer_epoch=producer_epoch,
                                           coordinator_epoch=coordinator_epoch, commit=commit)
        except ConnectionClosedError as exc:
            log.info("Sending markers to broker %d failed (%s); retrying", leader, exc)
            return {}
        except Exception as exc:  # noqa: BLE001 - retried; a bug must not stop the transaction for good
            log.exception("Sending markers to broker %d failed", leader)
            return {tp: UnknownServerError(str(exc)) for tp in tps}

    async def _send_remote(self, leader: int, tps: list[TopicPartition], *, producer_id: int,
                           producer_epoch: int, coordinator_epoch: int, commit: bool
                           ) -> dict[TopicPartition, KafkaError | None]:
        """Queue one transaction's markers for `leader`: a WriteTxnMarkers request carries every
        transaction's markers queued for that broker while its previous request was out (Kafka's
        per-broker batching), one request in flight per broker."""
        by_topic: dict[str, list[int]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        from kio.schema.write_txn_markers.v1.request import WritableTxnMarker, WritableTxnMarkerTopic

        marker = WritableTxnMarker(
            producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=commit,
            topics=tuple(WritableTxnMarkerTopic(name=t, partition_indexes=tuple(ps)) for t, ps in by_topic.items()),
            coordinator_epoch=coordinator_epoch)
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._queues.setdefault(leader, []).append((marker, tps, future))
        sender = self._senders.get(leader)
        if sender is None or sender.done():
            self._senders[leader] = loop.create_task(self._drain(leader), name=f"txn-markers-to-{leader}")
        return await future

    async def _drain(self, leader: int) -> None:
        while self._queues.get(leader):
            batch, self._queues[leader] = self._queues[leader], []
            try:
                results = await self._request(leader, [marker for marker, _, _ in batch])
            except ConnectionClosedError as exc:
                log.info("Sending markers to broker %d failed (%s); retrying", leader, exc)
                results = [{} for _ in batch]
            except Exception as exc:  # noqa: BLE001 - retried; a bug must not stop the transactions for good
                log.exception("Sending markers to broker %d failed", leader)
                results = [{tp: UnknownServerError(str(exc)) for tp in tps} for _, tps, _ in batch]
            for (_, _, future), result in zip(batch, results):
                if not future.done():
                    future.set_result(result)

    async def _request(self, leader: int, markers: list[WritableTxnMarker]) -> list[dict]:
        """One WriteTxnMarkers to `leader`; per marker, in order, {partition: error or None} ({}
        when the broker's address is not known yet: everything is retried)."""
        if self._connections.get(leader) is None:
            return [{} for _ in markers]
        from kio.schema.write_txn_markers.v1.request import WriteTxnMarkersRequest

        # A marker written twice is harmless (the transaction has ended), so a stale connection
        # is retried at once on a new one.
        response = await self._connections.request(leader, WriteTxnMarkersRequest(markers=tuple(markers)),
                                                   idempotent=True)
        results = []
        for marker in response.markers:
            results.append({TopicPartition(topic.name, p.partition_index): error_for_code(int(p.error_code))
                            for topic in marker.topics for p in topic.partitions})
        return results + [{} for _ in range(len(markers) - len(results))]

    async def close(self) -> None:
        for sender in self._senders.values():
            sender.cancel()
        await asyncio.gather(*self._senders.values(), return_exceptions=True)
        await self._connections.close()
