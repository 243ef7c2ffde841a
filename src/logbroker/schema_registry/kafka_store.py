"""KafkaStore: the registry's records in the compacted, single-partition `_schemas` topic.

Reading: every broker follows the topic from its start as a consumer would (topic_reader.py:
Fetch requests to the partition's leader on the inter-broker listener, as Confluent's registry
follows it with its KafkaStoreReaderThread) and applies each record to the RegistryState, in
offset order, on the event loop. `position` is the offset after the last record applied.

Writing: only the leader of `_schemas` partition 0 writes, appending through its ReplicaManager with
acks=-1, so an answer is sent only once the record is committed (a kill -9 after the answer loses
nothing), and a broker that stopped leading cannot append (the append's own leader check refuses
it). A write holds `exclusive()`: it first waits until the state has applied the leader's whole log
(a new leader thus knows every id its predecessor handed out before it hands out one), and it
returns only after its own records are applied, so the next write sees them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from logbroker.coordinator.internal_topics import ensure_internal_topic
from logbroker.errors import KafkaError
from logbroker.log_limits import RateLimitedLog, StateChangeLog
from logbroker.records.builder import build_batch
from logbroker.schema_registry import errors
from logbroker.schema_registry.records import MalformedRecordError, RecordKey, decode_key, decode_value
from logbroker.schema_registry.state import RegistryState
from logbroker.schema_registry.topic_reader import SchemasTopicReader
from logbroker.types import TopicPartition

log = logging.getLogger("io.confluent.kafka.schemaregistry.storage.KafkaStore")
_bad_record_log = RateLimitedLog(log, burst=5, interval_s=60.0)

WRITE_TIMEOUT_MS = 30_000
CATCH_UP_TIMEOUT_S = 30.0


class NotLeader(Exception):
    """This broker does not lead `_schemas` partition 0: the write belongs to the leader."""


class KafkaStore:
    def __init__(self, broker, *, topic: str, replication_factor: int, leader_address, security) -> None:
        """`leader_address()` is (host, port) of the leader of the topic's partition (None: none
        now), on the listener `security` (a client.ClientSecurity) reaches."""
        self.broker = broker
        self.topic = topic
        self.tp = TopicPartition(topic, 0)
        self.replication_factor = replication_factor
        self.state = RegistryState()
        self.position = 0
        self.high_watermark: int | None = None  # the leader's, from the latest fetch
        self._answered = asyncio.Event()  # set by the reader's first answer
        self._waiters: list[tuple[int, asyncio.Future]] = []  # (offset, woken once position reaches it)
        self._lock = asyncio.Lock()
        self._reader = SchemasTopicReader(self.tp, leader_address=leader_address, security=security,
                                          client_id=f"logbroker-schema-registry-{broker.broker_id}",
                                          on_records=self._apply)
        self._reader_task: asyncio.Task | None = None

    # -- startup --------------------------------------------------------------------------------
    async def start(self) -> None:
        """Create the topic if need be, start following it and return once the state holds every
        record below the high watermark of the first answer. Retries until it can."""
        creating = StateChangeLog(log, f"Creating {self.topic}")
        while True:
            try:
                self._ensure_topic()
                break
            except KafkaError as exc:
                creating.failed(exc, logging.INFO)
                await asyncio.sleep(1.0)
        self._reader_task = asyncio.get_running_loop().create_task(self._reader.run(), name="schemas-reader")
        await self._answered.wait()
        end = self.high_watermark
        await self._wait_for(end, timeout_s=None)  # however long the topic takes to read
        log.info("Read %s to offset %d: %d subject(s), largest id %d", self.topic, end,
                 len(self.state.subjects), self.state.max_id)

    def _ensure_topic(self) -> None:
        """On a cluster the topic waits for `replication_factor` live brokers (as Kafka's internal
        topics do): created with fewer, it would keep fewer replicas for good."""
        broker = self.broker
        live = (lambda: len(broker.store.brokers())) if broker.zk is not None else None
        ensure_internal_topic(self.topic, store=broker.store, create_topic=broker.create_topic,
                              live_brokers=live, num_partitions=1, replication_factor=self.replication_factor,
                              replication_factor_key="schema.registry.topic.replication.factor",
                              configs={"cleanup.policy": "compact"})

    # -- reading (records from the reader, on the loop) -----------------------------------------
    def _apply(self, records, next_position: int, high_watermark: int) -> None:
        for offset, key_bytes, value_bytes in records:
            try:
                key = decode_key(key_bytes or b"")
                self.state.apply(key, decode_value(key, value_bytes))
            except MalformedRecordError as exc:
                _bad_record_log.log(logging.WARNING, "malformed", "Skipping the record at offset %d of %s: %s",
                                    offset, self.topic, exc)
        self.position = next_position
        self.high_watermark = high_watermark
        self._answered.set()
        waiting = []
        for end, future in self._waiters:
            if future.done():
                continue
            if next_position >= end:
                future.set_result(None)
            else:
                waiting.append((end, future))
        self._waiters = waiting

    async def _wait_for(self, end: int, *, timeout_s: float | None = CATCH_UP_TIMEOUT_S) -> None:
        """Wait until every record before offset `end` is applied (50002 after `timeout_s`)."""
        if self.position >= end:
            return
        future = asyncio.get_running_loop().create_future()
        self._waiters.append((end, future))
        try:
            async with asyncio.timeout(timeout_s):
                await future
        except TimeoutError:
            raise errors.OperationTimeout(
                f"The registry has read {self.topic} to offset {self.position}, not yet {end}") from None

    # -- writing (the leader) -------------------------------------------------------------------
    def is_leader(self) -> bool:
        partition = self.broker.replica_manager.partitions.get(self.tp)
        return partition is not None and partition.is_leader

    def leader_id(self) -> int | None:
        state = self.broker.store.partition_state(self.tp)
        return None if state is None or state.leader < 0 else state.leader

    @contextlib.asynccontextmanager
    async def exclusive(self) -> AsyncIterator[None]:
        """One write at a time, on a state that holds the leader's whole log (raises NotLeader)."""
        async with self._lock:
            partition = self.broker.replica_manager.partitions.get(self.tp)
            if partition is None or not partition.is_leader:
                raise NotLeader()
            await self._wait_for(partition.log.log_end_offset)
            yield

    async def write(self, records: list[tuple[RecordKey, object]]) -> None:
        """Append `records` (key, value or None) in one batch with acks=-1 and wait until they are
        applied. Call within `exclusive()`."""
        batch = build_batch([(key.encode(), None if value is None else value.encode()) for key, value in records])
        results = await self.broker.replica_manager.append_records(
            timeout_ms=WRITE_TIMEOUT_MS, required_acks=-1, entries={self.tp: batch})
        result = results[self.tp]
        if result.error is not None:
            raise errors.StoreError(f"Error while writing to {self.topic}: {result.error.name}: {result.error}")
        await self._wait_for(result.last_offset + 1)

    async def close(self) -> None:
        if self._reader_task is not None:
            self._reader_task.cancel()
            await asyncio.gather(self._reader_task, return_exceptions=True)
