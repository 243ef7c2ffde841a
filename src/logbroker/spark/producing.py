"""The producing half of the sink, below both writers (writer.py, exactly_once.py).

Each Spark task produces its rows with one idempotent producer (acks=all,
enable.idempotence=true) taken from the Python worker's cache (clients.py): a retried produce
request is deduplicated by the broker, and the task fails unless every record is acknowledged.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from confluent_kafka import KafkaException, Producer
from pyspark.sql.datasource import WriterCommitMessage
from pyspark.sql.types import StructType

from logbroker.spark import clients
from logbroker.spark.errors import KafkaClientError, OptionError
from logbroker.spark.options import SinkOptions

FLUSH_TIMEOUT_S = 120.0
SINK_COLUMNS = frozenset({"key", "value", "topic", "partition", "headers"})


@dataclass
class ProducedCount(WriterCommitMessage):
    records: int
    # Exactly-once writes: the task found this micro-batch already committed and wrote nothing.
    skipped: bool = False


def check_sink_schema(schema: StructType, options: SinkOptions) -> None:
    names = set(schema.fieldNames())
    if "value" not in names:
        raise OptionError("the DataFrame to write needs a 'value' column (binary or string)")
    if options.topic is None and "topic" not in names:
        raise OptionError("set the 'topic' option or give the DataFrame a 'topic' column")


def producer_config(options: SinkOptions) -> dict[str, object]:
    """The idempotent producer of the at-least-once path (and the base of the transactional one).

    No random client.id: the config is the key of the per-process producer cache (clients.py).
    """
    config: dict[str, object] = {
        "bootstrap.servers": options.bootstrap_servers,
        "acks": "all",
        "enable.idempotence": True,
        "linger.ms": 5,
        "client.id": "logbroker-spark-sink",
        "log_level": 3,
        "delivery.report.only.error": True,
    }
    config.update(options.kafka_config)
    return config


class DeliveryErrors:
    """librdkafka's delivery callback, reporting only failures (`delivery.report.only.error`).

    A Python callback per record would cost more than the produce call itself; success is then
    "nothing failed and nothing left in the queue after flush". One per producer, cleared by
    each task that takes the producer from the cache.
    """

    def __init__(self) -> None:
        self.errors: list[str] = []

    def __call__(self, error, message) -> None:
        if error is not None and len(self.errors) < 5:
            self.errors.append(f"{message.topic()}-{message.partition()}: {error}")


def new_producer(config: dict[str, object]) -> tuple[Producer, DeliveryErrors]:
    errors = DeliveryErrors()
    return Producer({**config, "on_delivery": errors}), errors


def produce_rows(producer: Producer, errors: DeliveryErrors, options: SinkOptions,
                 batches: Iterator[pa.RecordBatch]) -> int:
    """Hand every row of `batches` to `producer`; returns the count (nothing is flushed here)."""
    produce = producer.produce
    count = 0
    for batch in batches:
        columns = {name: batch.column(name).to_pylist() for name in batch.schema.names
                   if name in SINK_COLUMNS}
        values = columns["value"]
        n = len(values)
        keys = columns.get("key") or [None] * n
        partitions = columns.get("partition") or [None] * n
        headers = columns.get("headers") or [None] * n
        if options.topic is not None:
            topics = [options.topic] * n
        else:
            topics = columns["topic"]
            if None in topics:
                raise KafkaClientError("a row has a null topic and there is no 'topic' option")
        for topic, value, key, partition, header in zip(topics, values, keys, partitions, headers):
            if header:
                header = [(h["key"], h["value"]) for h in header]
            while True:
                try:
                    produce(topic, value, key, -1 if partition is None else partition,
                            headers=header or None)
                    break
                except BufferError:
                    producer.poll(0.05)  # local queue full: let deliveries drain
        producer.poll(0)
        count += n
        if errors.errors:
            break
    return count


def flush_or_raise(producer: Producer, errors: DeliveryErrors, options: SinkOptions) -> None:
    try:
        remaining = producer.flush(FLUSH_TIMEOUT_S)
    except KafkaException as e:
        raise KafkaClientError(f"producing to {options.bootstrap_servers} failed: {e}") from None
    if errors.errors:
        raise KafkaClientError(f"records were not acknowledged: {'; '.join(errors.errors)}")
    if remaining:
        raise KafkaClientError(f"{remaining} records not acknowledged within {FLUSH_TIMEOUT_S} s")


def produce_batches(options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> int:
    """At least once: produce every row of `batches`; returns the count once all are acknowledged.

    The idempotent producer comes from the worker's cache and goes back there only when the
    task succeeded (a failed task's producer may hold undelivered records).
    """
    config = producer_config(options)
    key = clients.config_key(config)
    producer, errors = clients.take(key, lambda: new_producer(config))[0]
    errors.errors.clear()
    count = produce_rows(producer, errors, options, batches)
    flush_or_raise(producer, errors, options)
    clients.give_back(key, (producer, errors), lambda p: p[0].flush(FLUSH_TIMEOUT_S))
    return count
