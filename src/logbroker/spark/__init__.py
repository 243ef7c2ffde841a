"""A PySpark data source for Kafka topics on logbroker (or any Kafka cluster), with no JVM jar.

Register it once per SparkSession, then use the format name "logbroker" with the options of
Spark's Kafka source and sink:

    from logbroker.spark import LogbrokerDataSource
    spark.dataSource.register(LogbrokerDataSource)

Importing this package has no side effects: Spark imports it in every Python worker.
Requires the `spark` extra (pyspark, pyarrow, pandas).
"""

from logbroker.spark.source import LogbrokerDataSource

__all__ = ["LogbrokerDataSource"]
