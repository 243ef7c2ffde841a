"""Batch and streaming writes: `df.write.format("logbroker")` and `df.writeStream.format(...)`.

Rows carry Spark's Kafka sink columns: `value` (binary or string, required), and optionally
`key` (binary or string), `topic` (string), `partition` (int) and `headers`
(array<struct<key string, value binary>>). The `topic` option, when set, overrides the column, as
in Spark. Each Spark task produces its rows with one idempotent producer (producing.py).

The writers take Arrow RecordBatches (DataSourceArrowWriter), so Spark hands over columns rather
than Row objects.

Delivery guarantee: batch writes and streaming writes with exactlyOnce=false are at least once,
like Spark's own Kafka sink — a micro-batch that Spark replays after a failure is produced again.
Streaming writes are exactly once by default when the brokers support transactions
(exactly_once.py). Producers are reused across tasks of a Python worker (clients.py).
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter

from logbroker.spark.exactly_once import write_exactly_once
from logbroker.spark.options import SinkOptions
from logbroker.spark.producing import ProducedCount, produce_batches


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
    """`options.exactly_once` is decided on the driver (source.py) before tasks run."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> ProducedCount:
        if self.options.exactly_once:
            return write_exactly_once(self.options, iterator)
        return ProducedCount(produce_batches(self.options, iterator))

    def commit(self, messages, batchId: int) -> None:
        """Every task committed its own transaction (or had every record acknowledged) before
        it returned; nothing left to do."""

    def abort(self, messages, batchId: int) -> None:
        """Committed transactions stay; a replay of the batch skips them (exactly_once.py).
        Open ones were aborted by their task, or are by the next init_transactions or the
        transaction timeout."""
