"""Reading one offset range of one partition over the Kafka protocol, as Arrow RecordBatches.

An `OffsetRange` is the unit of work of a Spark task: `[from_offset, until_offset)` of one
topic-partition. A read task assigns a confluent-kafka consumer (reused across tasks, see
`read_range`) to the partition at `from_offset` (no group, no commits) and consumes until it has
seen an offset ≥ `until_offset - 1`.

Offsets inside a range are not always contiguous: compaction removes records and transaction
markers take offsets that consumers never see. So the loop never counts records to decide it is
done; it stops on the first record at or past the end, on the position reported at the end of
the partition (`_PARTITION_EOF` carries the high watermark), or fails after `poll_timeout_ms`
without progress.

Data loss (the range starts below the log start offset, or the log now ends before the range
does) raises `DataLossError` with failOnDataLoss=true; with false the task reads what is there.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, TopicPartition

from logbroker.spark import clients
from logbroker.spark.arrow import RecordBatchBuilder
from logbroker.spark.cluster import consumer_config, data_loss_message
from logbroker.spark.errors import DataLossError, KafkaClientError
from logbroker.spark.options import SourceOptions

log = logging.getLogger(__name__)

# How long one consume() call may wait when fewer records than asked for are there.
CONSUME_WAIT_S = 0.2

_DATA_LOSS_CODES = frozenset({KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE})


@dataclass(frozen=True, kw_only=True)
class OffsetRange:
    """`[from_offset, until_offset)` of one topic-partition: what one Spark task reads."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def size(self) -> int:
        return max(0, self.until_offset - self.from_offset)


def split_ranges(ranges: list[OffsetRange], *, min_partitions: int | None,
                 max_records_per_partition: int | None) -> list[OffsetRange]:
    """Split large ranges, as Spark's KafkaOffsetRangeCalculator does.

    First no range may hold more than `max_records_per_partition`; then, while there are fewer
    ranges than `min_partitions`, each range is cut into pieces in proportion to its share of
    all records, so large partitions get more tasks than small ones.
    """
    ranges = [r for r in ranges if r.size > 0]
    if max_records_per_partition:
        ranges = [piece for r in ranges
                  for piece in _cut(r, -(-r.size // max_records_per_partition))]
    if min_partitions and len(ranges) < min_partitions:
        total = sum(r.size for r in ranges)
        ranges = [piece for r in ranges
                  for piece in _cut(r, max(1, -(-r.size * min_partitions // total)))]
    return ranges


def _cut(r: OffsetRange, parts: int) -> list[OffsetRange]:
    parts = max(1, min(parts, r.size))
    bounds = [r.from_offset + r.size * i // parts for i in range(parts + 1)]
    return [OffsetRange(topic=r.topic, partition=r.partition, from_offset=lo, until_offset=hi)
            for lo, hi in zip(bounds, bounds[1:]) if hi > lo]


def read_range(options: SourceOptions, r: OffsetRange) -> Iterator[pa.RecordBatch]:
    """Yield the records of `r` as RecordBatches of at most `options.arrow_batch_rows` rows.

    The consumer comes from the Python worker's cache (clients.py) and goes back there,
    unassigned, when the range was read to its end: the next task or micro-batch on this worker
    skips the bootstrap and metadata round trips. `unassign()` drops whatever the consumer had
    prefetched, and `_consume` ignores any message of another partition or below the range.
    A task that fails or stops early closes its consumer.
    """
    if r.size <= 0:
        return
    config = consumer_config(options, purpose="reader")
    config["group.id"] = f"{options.group_id_prefix}-reader"  # never joined: a stable cache key
    config["enable.partition.eof"] = True
    config["auto.offset.reset"] = "error" if options.fail_on_data_loss else "earliest"
    key = clients.config_key(config)
    consumer, _ = clients.take(key, lambda: Consumer(config))
    done = False
    try:
        consumer.assign([TopicPartition(r.topic, r.partition, r.from_offset)])
        builder = RecordBatchBuilder(topic=r.topic, partition=r.partition,
                                     include_headers=options.include_headers)
        yield from _consume(consumer, options, r, builder)
        consumer.unassign()
        done = True
    finally:
        if done:
            clients.give_back(key, consumer, Consumer.close)
        else:
            consumer.close()


def _consume(consumer: Consumer, options: SourceOptions, r: OffsetRange,
             builder: RecordBatchBuilder) -> Iterator[pa.RecordBatch]:
    batch_rows = options.arrow_batch_rows
    next_offset = r.from_offset
    deadline = time.monotonic() + options.poll_timeout_ms / 1000
    while next_offset < r.until_offset:
        want = max(1, min(batch_rows - len(builder), r.until_offset - next_offset))
        messages = consumer.consume(want, CONSUME_WAIT_S)
        if not messages:
            if time.monotonic() > deadline:
                raise KafkaClientError(
                    f"no records from {r.topic}-{r.partition} at offset {next_offset} within "
                    f"kafkaConsumer.pollTimeoutMs={options.poll_timeout_ms} (range ends at "
                    f"{r.until_offset})")
            continue
        deadline = time.monotonic() + options.poll_timeout_ms / 1000
        last = messages[-1]
        if last.error() is None and last.offset() < r.until_offset and not any(
                m.error() is not None or m.partition() != r.partition or m.topic() != r.topic
                or m.offset() < next_offset for m in messages):
            # The common case: a run of records, all inside the range.
            builder.extend(messages)
            next_offset = last.offset() + 1
        else:
            for message in messages:
                error = message.error()
                if message.topic() is not None and (message.topic(), message.partition()) != (
                        r.topic, r.partition):
                    continue  # left over from the cached consumer's previous assignment
                if error is not None:
                    next_offset = _on_error(error, message, options, r, next_offset)
                    if next_offset >= r.until_offset:
                        break
                    continue
                offset = message.offset()
                if offset < next_offset:
                    continue
                if offset >= r.until_offset:
                    next_offset = offset
                    break
                builder.add(message)
                next_offset = offset + 1
        if len(builder) >= batch_rows:
            yield builder.build()
    if len(builder):
        yield builder.build()


def _on_error(error: KafkaError, message, options: SourceOptions, r: OffsetRange,
              next_offset: int) -> int:
    """Handle an error event; returns the offset to continue from (≥ until_offset: done)."""
    code = error.code()
    if code == KafkaError._PARTITION_EOF:
        end = message.offset()  # the high watermark (last stable offset under read_committed)
        if end < r.until_offset:
            if options.fail_on_data_loss:
                raise DataLossError(
                    f"{r.topic}-{r.partition} ends at offset {end} but offsets up to "
                    f"{r.until_offset} were planned (the log was truncated or the topic "
                    "recreated). Set failOnDataLoss=false to continue.")
            log.warning("%s-%d ends at %d, before the planned end %d", r.topic, r.partition,
                        end, r.until_offset)
        return r.until_offset  # every record below the high watermark has been delivered
    if code in _DATA_LOSS_CODES:
        raise DataLossError(data_loss_message({(r.topic, r.partition): (next_offset, -1)})
                            .replace("earliest is -1", "it is out of range"))
    raise KafkaClientError(f"reading {r.topic}-{r.partition} at offset {next_offset}: {error}")
