"""Batch and streaming writes: `df.write.format("logbroker")` and `df.writeStream.format(...)`.

Rows carry Spark's Kafka sink columns: `value` (binary or string, required), and optionally
`key` (binary or string), `topic` (string), `partition` (int) and `headers`
(array<struct<key string, value binary>>). The `topic` option, when set, overrides the column, as
in Spark. Each Spark task produces its rows with one idempotent producer (acks=all,
enable.idempotence=true): a retried produce request is deduplicated by the broker, and the task
fails unless every record is acknowledged.

The writers take Arrow RecordBatches (DataSourceArrowWriter), so Spark hands over columns rather
than Row objects.

Delivery guarantee: at least once, like Spark's own Kafka sink — a micro-batch that Spark replays
after a failure is produced again. (Exactly-once needs transactional producers keyed by query and
batch id; see docs/spark.md.)
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from confluent_kafka import KafkaException, Producer
from pyspark.sql.datasource import (DataSourceArrowWriter, DataSourceStreamArrowWriter,
                                    WriterCommitMessage)
from pyspark.sql.types import StructType

from logbroker.spark.errors import KafkaClientError, OptionError
from logbroker.spark.options import SinkOptions

FLUSH_TIMEOUT_S = 120.0
SINK_COLUMNS = frozenset({"key", "value", "topic", "partition", "headers"})


@dataclass
class ProducedCount(WriterCommitMessage):
    records: int


def check_sink_schema(schema: StructType, options: SinkOptions) -> None:
    names = set(schema.fieldNames())
    if "value" not in names:
        raise OptionError("the DataFrame to write needs a 'value' column (binary or string)")
    if options.topic is None and "topic" not in names:
        raise OptionError("set the 'topic' option or give the DataFrame a 'topic' column")


def producer_config(options: SinkOptions) -> dict[str, object]:
    config: dict[str, object] = {
        "bootstrap.servers": options.bootstrap_servers,
        "acks": "all",
        "enable.idempotence": True,
        "linger.ms": 5,
        "client.id": f"logbroker-spark-{uuid.uuid4().hex[:8]}",
        "log_level": 3,
    }
    config.update(options.kafka_config)
    return config


def produce_batches(options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> int:
    """Produce every row of `batches`; returns the count once all are acknowledged.

    librdkafka reports only failed deliveries (`delivery.report.only.error`): a Python callback
    per record would cost more than the produce call itself. Success is then "nothing failed and
    nothing left in the queue after flush".
    """
    errors: list[str] = []

    def on_delivery(error, message) -> None:
        if error is not None and len(errors) < 5:
            errors.append(f"{message.topic()}-{message.partition()}: {error}")

    producer = Producer({**producer_config(options), "delivery.report.only.error": True,
                         "on_delivery": on_delivery})
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
        if errors:
            break
    try:
        remaining = producer.flush(FLUSH_TIMEOUT_S)
    except KafkaException as e:
        raise KafkaClientError(f"producing to {options.bootstrap_servers} failed: {e}") from None
    if errors:
        raise KafkaClientError(f"records were not acknowledged: {'; '.join(errors)}")
    if remaining:
        raise KafkaClientError(f"{remaining} records not acknowledged within {FLUSH_TIMEOUT_S} s")
    return count


class LogbrokerWriter(DataSourceArrowWriter):
    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> ProducedCount:
        return ProducedCount(produce_batches(self.options, iterator))

    def commit(self, messages) -> None:
        """Every record was acknowledged before its task returned; nothing left to do."""

    def abort(self, messages) -> None:
        """Acknowledged records stay in the log: Kafka has no way to take them back."""


class LogbrokerStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> ProducedCount:
        return ProducedCount(produce_batches(self.options, iterator))

    def commit(self, messages, batchId: int) -> None:
        """Every record was acknowledged before its task returned; nothing left to do."""

    def abort(self, messages, batchId: int) -> None:
        """Acknowledged records stay in the log: Kafka has no way to take them back."""
