"""KafkaStore: the registry's records in the compacted, single-partition `_schemas` topic.

Reading: every broker follows the topic from its start with a Kafka consumer (confluent-kafka,
connected to this broker's inter-broker listener, as Confluent's registry follows it with its
KafkaStoreReaderThread) in a thread of its own, and applies each record to the RegistryState on the
event loop, in offset order. `position` is the offset after the last record applied.

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
import threading
from collections.abc import AsyncIterator

from logbroker.coordinator.internal_topics import ensure_internal_topic
from logbroker.errors import KafkaError
from logbroker.log_limits import RateLimitedLog, StateChangeLog
from logbroker.records.builder import build_batch
from logbroker.schema_registry import errors
from logbroker.schema_registry.records import MalformedRecordError, RecordKey, decode_key, decode_value
from logbroker.schema_registry.state import RegistryState
from logbroker.types import TopicPartition

log = logging.getLogger("io.confluent.kafka.schemaregistry.storage.KafkaStore")
_bad_record_log = RateLimitedLog(log, burst=5, interval_s=60.0)

WRITE_TIMEOUT_MS = 30_000
CATCH_UP_TIMEOUT_S = 30.0


class NotLeader(Exception):
    """This broker does not lead `_schemas` partition 0: the write belongs to the leader."""


class KafkaStore:
    def __init__(self, broker, *, topic: str, replication_factor: int, client_config: dict) -> None:
        self.broker = broker
        self.topic = topic
        self.tp = TopicPartition(topic, 0)
        self.replication_factor = replication_factor
        self.client_config = client_config
        self.state = RegistryState()
        self.position = 0
        self._progress = asyncio.Condition()
        self._lock = asyncio.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- startup --------------------------------------------------------------------------------
    async def start(self) -> None:
        """Create the topic if need be, start following it and return once the state holds every
        record the topic had when this was called (its high watermark). Retries until it can."""
        self._loop = asyncio.get_running_loop()
        creating = StateChangeLog(log, f"Creating {self.topic}")
        while True:
            try:
                self._ensure_topic()
                break
            except KafkaError as exc:
                creating.failed(exc, logging.INFO)
                await asyncio.sleep(1.0)
        self._thread = threading.Thread(target=self._follow, name="schema-registry-reader", daemon=True)
        self._thread.start()
        end = await self._loop.run_in_executor(None, self._high_watermark)
        await self._wait_for(end)
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

    def _high_watermark(self) -> int:
        """Blocks: the topic's high watermark, asked of its leader (retried until there is one)."""
        from confluent_kafka import Consumer, KafkaException
        from confluent_kafka import TopicPartition as KTopicPartition
        waiting = StateChangeLog(log, f"Asking the leader of {self.tp} for its high watermark")
        while not self._stop.is_set():
            consumer = Consumer(self._consumer_config())
            try:
                return consumer.get_watermark_offsets(KTopicPartition(self.topic, 0), timeout=5.0, cached=False)[1]
            except KafkaException as exc:
                waiting.failed(exc, logging.INFO)
            finally:
                consumer.close()
            self._stop.wait(0.5)
        return 0

    def _consumer_config(self) -> dict:
        return {**self.client_config, "group.id": f"logbroker-schema-registry-{self.broker.broker_id}",
                "enable.auto.commit": False, "enable.partition.eof": False,
                "fetch.wait.max.ms": 100, "isolation.level": "read_uncommitted"}

    # -- reading (a thread of its own; applied on the loop) -------------------------------------
    def _follow(self) -> None:
        from confluent_kafka import OFFSET_BEGINNING, Consumer
        from confluent_kafka import TopicPartition as KTopicPartition
        consumer = Consumer(self._consumer_config())
        try:
            consumer.assign([KTopicPartition(self.topic, 0, OFFSET_BEGINNING)])
            while not self._stop.is_set():
                # poll() returns with the first record; consume(timeout=0) then takes what else is
                # queued (consume() with a timeout would wait for the whole batch or the timeout).
                first = consumer.poll(0.2)
                if first is None:
                    continue
                messages = [first] + consumer.consume(500, timeout=0)
                batch = []
                for message in messages:
                    if message.error() is not None:
                        _bad_record_log.log(logging.WARNING, "consume", "Reading %s: %s", self.topic, message.error())
                        continue
                    batch.append((message.offset(), message.key(), message.value()))
                if batch:
                    self._loop.call_soon_threadsafe(self._apply, batch)
        except Exception:  # noqa: BLE001 - the reader must say why it stopped
            log.exception("The reader of %s stopped", self.topic)
        finally:
            consumer.close()

    def _apply(self, batch: list[tuple[int, bytes | None, bytes | None]]) -> None:
        for offset, key_bytes, value_bytes in batch:
            if offset < self.position:
                continue
            self.position = offset + 1
            try:
                key = decode_key(key_bytes or b"")
                self.state.apply(offset, key, decode_value(key, value_bytes))
            except MalformedRecordError as exc:
                _bad_record_log.log(logging.WARNING, "malformed", "Skipping the record at offset %d of %s: %s",
                                    offset, self.topic, exc)
        self._loop.create_task(self._notify())

    async def _notify(self) -> None:
        async with self._progress:
            self._progress.notify_all()

    async def _wait_for(self, end: int) -> None:
        """Wait until every record before offset `end` is applied (50002 after the timeout)."""
        try:
            async with asyncio.timeout(CATCH_UP_TIMEOUT_S):
                async with self._progress:
                    await self._progress.wait_for(lambda: self.position >= end)
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
        self._stop.set()
        if self._thread is not None:
            await asyncio.get_running_loop().run_in_executor(None, self._thread.join)
