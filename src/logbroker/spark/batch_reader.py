"""Batch reads: `spark.read.format("logbroker")`.

Planning (in Spark's planner process) resolves startingOffsets / endingOffsets to concrete offsets
for every partition of the subscription and makes one input partition per non-empty offset range,
split further by minPartitions / maxRecordsPerPartition. Each Spark task then reads its range over
the Kafka protocol (`fetch.read_range`) on an executor. With the `path` option the reads come from a
log dir's segment files instead, one task per segment (`offline`).
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from logbroker.spark.cluster import ClusterView
from logbroker.spark.errors import OptionError
from logbroker.spark.fetch import OffsetRange, read_range, split_ranges
from logbroker.spark.offsets import EARLIEST, LATEST
from logbroker.spark.options import SourceOptions
from logbroker.spark.typed.decoding import decoded


class LogbrokerBatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions, schema: StructType | None = None) -> None:
        self.options = options
        self.schema = schema

    def plan_ranges(self) -> list[OffsetRange]:
        options = self.options
        with ClusterView(options) as cluster:
            tps = cluster.topic_partitions()
            start = cluster.resolve(options.starting, tps, default_for_unlisted=EARLIEST)
            end = cluster.resolve(options.ending, tps, default_for_unlisted=LATEST)
            start = cluster.check_not_lost(start)
        ranges = []
        for tp in tps:
            if end[tp] < start[tp]:
                raise OptionError(f"{tp[0]}-{tp[1]}: the ending offset {end[tp]} is before the "
                                  f"starting offset {start[tp]}")
            ranges.append(OffsetRange(topic=tp[0], partition=tp[1], from_offset=start[tp],
                                      until_offset=end[tp]))
        return split_ranges(ranges, min_partitions=options.min_partitions,
                            max_records_per_partition=options.max_records_per_partition)

    def partitions(self) -> list[InputPartition]:
        if self.options.path is not None and self.options.path.startswith("s3://"):
            from logbroker.spark.offline_remote import plan_remote_segments

            return [InputPartition(r) for r in plan_remote_segments(self.options)]
        if self.options.path is not None:
            from logbroker.spark.offline import plan_segments

            return [InputPartition(r) for r in plan_segments(self.options)]
        return [InputPartition(r) for r in self.plan_ranges()]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if self.options.path is not None and self.options.path.startswith("s3://"):
            from logbroker.spark.offline_remote import read_remote_segment

            batches = read_remote_segment(self.options, partition.value)
        elif self.options.path is not None:
            from logbroker.spark.offline import read_segment

            batches = read_segment(self.options, partition.value)
        else:
            batches = read_range(self.options, partition.value)
        yield from decoded(self.options.typed, self.schema, batches)
