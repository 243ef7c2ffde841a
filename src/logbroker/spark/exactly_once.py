"""Exactly-once streaming writes: one Kafka transaction per (micro-batch, Spark partition).

Why it is shaped this way. Spark's streaming sink protocol is "tasks write, then the driver
records the batch in its checkpoint". A task that commits its output before the driver records
the batch cannot be undone, so a driver that dies in between replays the batch on restart — the
reason Spark's own Kafka sink is at least once. Kafka transactions cannot be handed from the
tasks to the driver (a transaction belongs to one producer instance), so the driver cannot
commit for them. Instead each task makes its own write idempotent at the batch level:

1. Its producer's `transactional.id` is `<transactionalIdPrefix>-<query id>-<partition id>`.
   The query id is stable across restarts from the same checkpoint, so a task retry, a
   speculative copy, a task of a restarted driver and a task on another executor all use the
   same id: `init_transactions` fences every older producer with that id (their writes and
   commits fail with PRODUCER_FENCED) and aborts their open transaction.
2. Inside the transaction, ahead of the records, it commits the offset `batch id + 1` for
   partition 0 of the output topic in a consumer group named like the transactional id
   (TxnOffsetCommit). No consumer ever uses that group; its committed offset is the sink's
   record of the last micro-batch this Spark partition committed, and it becomes visible
   atomically with the records (both are settled by the same COMMIT markers).
3. Before writing, the task reads that offset (OffsetFetch with require_stable, so a pending
   transactional commit is waited for, never skipped). If it already covers this batch, the
   batch was committed by an earlier attempt or an earlier run of the driver: the task writes
   nothing.

The check happens after `init_transactions`, so no other producer of the id can commit between
the check and our commit without fencing us first. A producer kept in the worker's cache
(clients.py) was initialised earlier; it is reused only when the committed batch is the one it
committed itself — otherwise another process has used the id since (the partition moved between
executors) and a fresh producer is initialised, so a partition moving around never fails a task.

Replays must be deterministic — the same rows in the same Spark partition for a batch id — as
Spark's exactly-once sinks require; a replayed batch from our source reads the same offsets.
"""

from __future__ import annotations

import logging
import socket
import struct
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from logbroker.spark import clients
from logbroker.spark.errors import KafkaClientError
from logbroker.spark.options import SinkOptions
from logbroker.spark.producing import (DeliveryErrors, ProducedCount, flush_or_raise, new_producer,
                                       produce_rows, producer_config)

log = logging.getLogger(__name__)

TXN_TIMEOUT_S = 60.0
# How long send_offsets_to_transaction may take before its producer is given up (see _begin),
# and how many producers a task tries.
OFFSETS_WATCHDOG_S = 20.0
OFFSETS_ATTEMPTS = 3
# How long a producer and consumer kept from an earlier task may take to read the marker.
REUSED_READ_TIMEOUT_S = 10.0
# Spark's local properties, set by MicroBatchExecution for every task of a micro-batch.
QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"
END_TXN_API_KEY = 26
NO_COMMITTED_OFFSET = -1001


@dataclass
class TransactionalSession:
    """A transactional producer, its delivery errors, the consumer that reads and carries the
    sink's marker group, and the last batch id this producer committed (-1: none yet)."""

    producer: Producer
    errors: DeliveryErrors
    marker_consumer: Consumer
    committed_batch_id: int = -1
    closed: bool = False

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.marker_consumer.close()


def transactional_id(options: SinkOptions, *, query_id: str, partition_id: int) -> str:
    return f"{options.transactional_id_prefix}-{query_id}-{partition_id}"


def _first_non_empty(batches: Iterator[pa.RecordBatch]) -> tuple[pa.RecordBatch | None,
                                                                   Iterator[pa.RecordBatch]]:
    for batch in batches:
        if batch.num_rows:
            return batch, batches
    return None, batches


def _chain(first: pa.RecordBatch, rest: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield first
    yield from rest


def write_exactly_once(options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> ProducedCount:
    """The task side: write this task's rows of the current micro-batch in one transaction."""
    from pyspark import TaskContext

    context = TaskContext.get()
    query_id = context.getLocalProperty(QUERY_ID_PROPERTY) if context else None
    batch_id = context.getLocalProperty(BATCH_ID_PROPERTY) if context else None
    if not query_id or batch_id is None:
        raise KafkaClientError("exactlyOnce writes need a streaming query (no query id or batch "
                               "id in the task's local properties)")
    first, rest = _first_non_empty(batches)
    if first is None:
        return ProducedCount(0)  # nothing to write, nothing to record
    marker_topic = options.topic or first.column("topic")[0].as_py()
    txn_id = transactional_id(options, query_id=query_id, partition_id=context.partitionId())
    return _write(options, txn_id, int(batch_id), TopicPartition(marker_topic, 0),
                  _chain(first, rest))


def _new_session(options: SinkOptions, config: dict[str, object], txn_id: str
                 ) -> TransactionalSession:
    producer, errors = new_producer(config)
    consumer = Consumer({
        "bootstrap.servers": options.bootstrap_servers,
        "group.id": txn_id,
        "enable.auto.commit": False,
        "isolation.level": "read_committed",  # OffsetFetch with require_stable
        "log_level": 3,
        **{k: v for k, v in options.kafka_config.items() if k.startswith(("security.", "sasl.",
                                                                             "ssl."))},
    })
    try:
        producer.init_transactions(TXN_TIMEOUT_S)
    except KafkaException as e:
        consumer.close()
        raise KafkaClientError(f"init_transactions for {txn_id} failed: {e}") from None
    return TransactionalSession(producer, errors, consumer)


def _committed_batch_id(session: TransactionalSession, marker: TopicPartition,
                        timeout_s: float = TXN_TIMEOUT_S) -> int:
    try:
        [tp] = session.marker_consumer.committed([TopicPartition(marker.topic, 0)],
                                                 timeout=timeout_s)
    except KafkaException as e:
        raise KafkaClientError(f"reading the sink's committed batch id failed: {e}") from None
    if tp.error is not None:
        raise KafkaClientError(f"reading the sink's committed batch id failed: {tp.error}")
    return tp.offset - 1 if tp.offset >= 0 else -1


def _write(options: SinkOptions, txn_id: str, batch_id: int, marker: TopicPartition,
           batches: Iterator[pa.RecordBatch]) -> ProducedCount:
    config = {**producer_config(options), "transactional.id": txn_id,
              "transaction.timeout.ms": int(options.kafka_config.get(
                  "transaction.timeout.ms", TXN_TIMEOUT_S * 1000))}
    key = clients.config_key(config)
    session, reused = clients.take(key, lambda: _new_session(options, config, txn_id))
    for attempt in range(1, OFFSETS_ATTEMPTS + 1):
        session = _checked_session(session, reused, options, config, txn_id, marker)
        if session.committed_batch_id >= batch_id:
            log.info("%s: micro-batch %d already committed (last committed %d): skipped",
                     txn_id, batch_id, session.committed_batch_id)
            clients.give_back(key, session, TransactionalSession.close)
            return ProducedCount(0, skipped=True)
        try:
            if _begin(session, batch_id, marker):
                count = produce_rows(session.producer, session.errors, options, batches)
                flush_or_raise(session.producer, session.errors, options)
                _commit(session.producer)
                session.committed_batch_id = batch_id
                clients.give_back(key, session, TransactionalSession.close)
                return ProducedCount(count)
        except BaseException as e:
            _abort_quietly(session.producer, txn_id)
            session.close()  # never reuse a producer that failed: it may be fenced or fatal
            if isinstance(e, KafkaException):
                raise KafkaClientError(f"transaction {txn_id} for micro-batch {batch_id} "
                                       f"failed: {e}") from None
            raise
        # The stuck call keeps its producer; the next producer's init_transactions fences it
        # and aborts its transaction, which holds no record.
        log.warning("%s: send_offsets_to_transaction did not return within %.0f s (librdkafka "
                    "loses a group coordinator that left the cluster); attempt %d of %d starts "
                    "over with a new producer", txn_id, OFFSETS_WATCHDOG_S, attempt,
                    OFFSETS_ATTEMPTS)
        session.close()
        if attempt < OFFSETS_ATTEMPTS:
            session, reused = _new_session(options, config, txn_id), False
    raise KafkaClientError(f"transaction {txn_id} for micro-batch {batch_id}: the coordinator "
                           f"of the sink's marker group (group.id {txn_id}) did not answer "
                           f"TxnOffsetCommit in {OFFSETS_ATTEMPTS} attempts of "
                           f"{OFFSETS_WATCHDOG_S:.0f} s; check that the brokers are up")


def _checked_session(session: TransactionalSession, reused: bool, options: SinkOptions,
                     config: dict[str, object], txn_id: str, marker: TopicPartition
                     ) -> TransactionalSession:
    """The session to write with, its `committed_batch_id` read from the marker group; on an
    error, every session this made is closed.

    A cached session gets REUSED_READ_TIMEOUT_S to read the marker: after a broker died, its
    consumer may wait on a group coordinator that left the cluster (librdkafka, as in _begin),
    where a new consumer finds the new one at once. It is then replaced by a new session.
    """
    if reused:
        try:
            committed = _committed_batch_id(session, marker, REUSED_READ_TIMEOUT_S)
        except KafkaClientError as e:
            log.warning("%s: %s; starting over with a new producer and consumer", txn_id, e)
            committed = None
        if committed == session.committed_batch_id:
            return session
        # Another producer used the id since this one committed (it is fenced), or the read
        # failed: start afresh (init_transactions), and read the marker again now that no one
        # else can write it.
        session.close()
        session = _new_session(options, config, txn_id)
    try:
        session.committed_batch_id = _committed_batch_id(session, marker)
    except BaseException:
        session.close()
        raise
    return session


def _begin(session: TransactionalSession, batch_id: int, marker: TopicPartition) -> bool:
    """Begin the transaction and put the marker `batch id + 1` in it, before any record.

    The marker goes first so that a producer stuck in send_offsets_to_transaction can be given
    up before a row is taken from Spark: librdkafka (2.16 at least; its issues #5456 and #5511)
    may wait forever, past the call's timeout, for a group coordinator it remembers after that
    broker left the cluster (a leader killed mid-stream). Returns False when the call did not
    return within OFFSETS_WATCHDOG_S: the session must then be dropped, its producer unused.
    """
    producer = session.producer
    session.errors.errors.clear()
    producer.begin_transaction()
    outcome: Future[None] = Future()

    def send_offsets() -> None:
        try:
            producer.send_offsets_to_transaction(
                [TopicPartition(marker.topic, marker.partition, batch_id + 1)],
                session.marker_consumer.consumer_group_metadata(), OFFSETS_WATCHDOG_S)
            outcome.set_result(None)
        except BaseException as e:  # noqa: BLE001 - raised in the task's thread by result()
            outcome.set_exception(e)

    # A daemon thread of its own, not an executor's: a call stuck for good must not hold up exit.
    threading.Thread(target=send_offsets, name="send-offsets", daemon=True).start()
    try:
        outcome.result(OFFSETS_WATCHDOG_S + 5)
    except TimeoutError:  # the watchdog (concurrent.futures' TimeoutError is the builtin)
        return False
    return True


def _commit(producer: Producer) -> None:
    """commit_transaction, retried while librdkafka says the error is retriable (a coordinator
    moving during a leader failover); an abortable or fatal error propagates."""
    for _ in range(10):
        try:
            producer.commit_transaction(TXN_TIMEOUT_S)
            return
        except KafkaException as e:
            error: KafkaError = e.args[0]
            if not error.retriable():
                raise
    producer.commit_transaction(TXN_TIMEOUT_S)


def _abort_quietly(producer: Producer, txn_id: str) -> None:
    """Best effort: a fenced or dead producer cannot abort, and then the next producer's
    init_transactions or the transaction timeout aborts for us."""
    try:
        producer.abort_transaction(10.0)
    except KafkaException as e:
        log.warning("%s: abort_transaction failed (%s); the next init_transactions or the "
                    "transaction timeout aborts it", txn_id, e)


def brokers_support_transactions(options: SinkOptions, *, timeout_s: float = 10.0) -> bool:
    """Whether a bootstrap broker advertises EndTxn in its ApiVersions table.

    Only probed over PLAINTEXT (a raw ApiVersions v0 exchange: header v1, empty body); a secured
    listener is assumed to be a Kafka ≥ 0.11 cluster, which has transactions. Unreachable
    brokers count as "yes": the query will then fail loudly rather than silently downgrade.
    """
    protocol = str(options.kafka_config.get("security.protocol", "plaintext")).lower()
    if protocol != "plaintext":
        return True
    for server in options.bootstrap_servers.split(","):
        host, _, port = server.strip().rpartition(":")
        try:
            with socket.create_connection((host.strip("[]") or "localhost", int(port)),
                                          timeout=timeout_s) as sock:
                return END_TXN_API_KEY in _api_keys(sock)
        except (OSError, ValueError, struct.error):
            continue
    return True


def _api_keys(sock: socket.socket) -> set[int]:
    client_id = b"logbroker-spark-probe"
    header = struct.pack(">hhih", 18, 0, 1, len(client_id)) + client_id
    sock.sendall(struct.pack(">i", len(header)) + header)
    size = struct.unpack(">i", _read_exactly(sock, 4))[0]
    body = _read_exactly(sock, size)
    error_code, count = struct.unpack_from(">hi", body, 4)  # after the correlation id
    if error_code:
        return set()
    return {struct.unpack_from(">h", body, 10 + 6 * i)[0] for i in range(count)}


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise OSError("connection closed")
        data += chunk
    return data
