"""Streaming reads: `spark.readStream.format("logbroker")`.

Spark keeps the source's offsets in its checkpoint, as JSON `{"topic": {"0": 123}}` (see
`offsets`), and asks the reader, in its long-lived planner process:

- `initialOffset()`: startingOffsets resolved, for a query with no checkpoint;
- `latestOffset(start, limit)`: where the next micro-batch ends. Under `ReadMaxRows`
  (maxOffsetsPerTrigger, through `getDefaultReadLimit`) the records are shared among partitions in
  proportion to their backlog, never more than the limit in total; under `ReadAllAvailable`
  (which Spark passes for some triggers) everything up to the latest offsets;
- `prepareForTriggerAvailableNow()`: fixes the latest offsets at that moment as the target, so an
  availableNow query ends even while producers keep writing, and still honours the read limit;
- `partitions(start, end)`: the offset ranges of one micro-batch, read by executors as in a batch
  read.

Partitions that appear while the query runs (new topics matching a pattern, added partitions) are
read from their earliest offset. Offsets the query needs that are gone (retention, a deleted topic)
fail the query with failOnDataLoss=true and are skipped with false. `commit` has nothing to do: no
consumer group holds the offsets, the checkpoint does.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType
from pyspark.sql.streaming.datasource import (ReadAllAvailable, ReadLimit, ReadMaxRows,
                                              SupportsTriggerAvailableNow)

from logbroker.spark.cluster import ClusterView, data_loss_message
from logbroker.spark.errors import DataLossError
from logbroker.spark.fetch import OffsetRange, read_range, split_ranges
from logbroker.spark.offsets import EARLIEST, PartitionOffsets, from_json_dict, to_json_dict
from logbroker.spark.options import SourceOptions
from logbroker.spark.typed.decoding import decoded


def rate_limit(start: PartitionOffsets, latest: PartitionOffsets, max_rows: int) -> PartitionOffsets:
    """End offsets that admit at most `max_rows` records, shared in proportion to each backlog.

    Each partition first gets the floor of its proportional share; the records left over go one
    each to the partitions with the largest remainders, so the total is exactly
    min(max_rows, total backlog) and no partition goes past its latest offset.
    """
    backlog = {tp: max(0, latest[tp] - start[tp]) for tp in latest}
    total = sum(backlog.values())
    if total <= max_rows:
        return dict(latest)
    share = {tp: backlog[tp] * max_rows // total for tp in backlog}
    left = max_rows - sum(share.values())
    by_remainder = sorted(backlog, key=lambda tp: (-(backlog[tp] * max_rows % total), tp))
    for tp in by_remainder:
        if left == 0:
            break
        if share[tp] < backlog[tp]:
            share[tp] += 1
            left -= 1
    return {tp: start[tp] + share[tp] for tp in latest}


class LogbrokerStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions, schema: StructType | None = None) -> None:
        self.options = options
        self.schema = schema
        self._cluster: ClusterView | None = None
        self._available_now_target: PartitionOffsets | None = None
        self._last_batch_monotonic = time.monotonic()

    def __getstate__(self) -> dict:
        # The planning connection stays in the process that opened it.
        return {**self.__dict__, "_cluster": None}

    def _view(self) -> ClusterView:
        if self._cluster is None:
            self._cluster = ClusterView(self.options)
        return self._cluster

    def initialOffset(self) -> dict:
        view = self._view()
        tps = view.topic_partitions()
        return to_json_dict(view.resolve(self.options.starting, tps,
                                         default_for_unlisted=EARLIEST))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        view = self._view()
        self._available_now_target = view.latest(view.topic_partitions())

    def _latest(self) -> PartitionOffsets:
        view = self._view()
        latest = view.latest(view.topic_partitions())
        target = self._available_now_target
        if target is not None:
            latest = {tp: min(offset, target[tp]) for tp, offset in latest.items() if tp in target}
        return latest

    def reportLatestOffset(self) -> dict | None:
        return to_json_dict(self._latest())

    def _start_with_new_partitions(self, start: PartitionOffsets,
                                   tps: list[tuple[str, int]]) -> PartitionOffsets:
        new = [tp for tp in tps if tp not in start]
        return {**start, **self._view().earliest(new)} if new else dict(start)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = from_json_dict(start)
        latest = self._latest()
        gone = {tp: (offset, -1) for tp, offset in begin.items() if tp not in latest}
        if gone and self.options.fail_on_data_loss:
            raise DataLossError(data_loss_message(gone).replace(
                "earliest is -1", "the partition no longer exists"))
        begin = self._start_with_new_partitions(begin, list(latest))
        shrunk = {tp: (begin[tp], latest[tp]) for tp in latest if latest[tp] < begin[tp]}
        if shrunk and self.options.fail_on_data_loss:
            raise DataLossError(data_loss_message(shrunk).replace("earliest is", "the log ends at"))
        # Without failOnDataLoss a partition whose log shrank restarts from its new end.
        low = {tp: min(begin[tp], latest[tp]) for tp in latest}
        if self._waits_for_more(low, latest, limit):
            return start
        self._last_batch_monotonic = time.monotonic()
        if isinstance(limit, ReadMaxRows):
            return to_json_dict(rate_limit(low, latest, limit.max_rows))
        return to_json_dict(latest)

    def _waits_for_more(self, low: PartitionOffsets, latest: PartitionOffsets,
                        limit: ReadLimit) -> bool:
        """minOffsetsPerTrigger: hold the next batch back until enough records are there or
        maxTriggerDelay has passed since the last one. Never under availableNow (which must drain)
        nor when Spark asks for everything (ReadAllAvailable). Spark's Python API has no composite
        limit for min and max together, so the minimum is applied here, from the options."""
        minimum = self.options.min_offsets_per_trigger
        if not minimum or self._available_now_target is not None \
                or isinstance(limit, ReadAllAvailable) and self.options.max_offsets_per_trigger:
            return False
        backlog = sum(latest[tp] - low[tp] for tp in latest)
        waited_ms = (time.monotonic() - self._last_batch_monotonic) * 1000
        return backlog < minimum and waited_ms < self.options.max_trigger_delay_ms

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        begin = from_json_dict(start)
        stop = from_json_dict(end)
        view = self._view()
        begin = self._start_with_new_partitions(begin, list(stop))
        begin = view.check_not_lost({tp: begin[tp] for tp in stop})
        ranges = [OffsetRange(topic=tp[0], partition=tp[1], from_offset=begin[tp],
                              until_offset=stop[tp]) for tp in sorted(stop)]
        ranges = split_ranges(ranges, min_partitions=self.options.min_partitions,
                              max_records_per_partition=self.options.max_records_per_partition)
        return [InputPartition(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from decoded(self.options.typed, self.schema, read_range(self.options, partition.value))

    def commit(self, end: dict) -> None:
        """Nothing to do: the offsets live in Spark's checkpoint, not in a consumer group."""

    def stop(self) -> None:
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None
