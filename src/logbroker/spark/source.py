"""`LogbrokerDataSource`: the PySpark data source named "logbroker".

    from logbroker.spark import LogbrokerDataSource
    spark.dataSource.register(LogbrokerDataSource)
    df = (spark.read.format("logbroker")
          .option("kafka.bootstrap.servers", "localhost:9092")
          .option("subscribe", "events")
          .load())

Spark pickles this object and calls it in separate Python processes (the planner, every task),
so it holds nothing but its options; readers and writers open their connections where they run.
"""

from __future__ import annotations

from pyspark.sql.datasource import (DataSource, DataSourceReader, DataSourceStreamReader,
                                    DataSourceStreamWriter, DataSourceWriter)
from pyspark.sql.types import StructType

from logbroker.spark.arrow import kafka_schema
from logbroker.spark.options import parse_sink_options, parse_source_options


class LogbrokerDataSource(DataSource):
    """Kafka topics as a Spark source and sink, with Spark's Kafka schema and options."""

    @classmethod
    def name(cls) -> str:
        return "logbroker"

    def schema(self) -> StructType:
        include_headers = str(self.options.get("includeHeaders", "false")).strip().lower()
        return kafka_schema(include_headers=include_headers == "true")

    def reader(self, schema: StructType) -> DataSourceReader:
        from logbroker.spark.batch_reader import LogbrokerBatchReader

        return LogbrokerBatchReader(parse_source_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from logbroker.spark.stream_reader import LogbrokerStreamReader

        return LogbrokerStreamReader(parse_source_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from logbroker.spark.producing import check_sink_schema
        from logbroker.spark.writer import LogbrokerWriter

        options = parse_sink_options(self.options)
        check_sink_schema(schema, options)
        return LogbrokerWriter(options)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from dataclasses import replace

        from logbroker.spark.exactly_once import brokers_support_transactions
        from logbroker.spark.producing import check_sink_schema
        from logbroker.spark.writer import LogbrokerStreamWriter

        options = parse_sink_options(self.options)
        check_sink_schema(schema, options)
        if options.exactly_once is None:
            options = replace(options, exactly_once=brokers_support_transactions(options))
        return LogbrokerStreamWriter(options)
