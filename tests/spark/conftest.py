"""tests/spark: one local[2] SparkSession for the whole run, real brokers, confluent-kafka clients."""

from __future__ import annotations

import os
import sys

import pytest

import shutil

pyspark = pytest.importorskip("pyspark", reason="the 'spark' extra is not installed")
if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
    pytest.skip("Spark needs Java 17 (Debian: openjdk-17-jre-headless)", allow_module_level=True)



@pytest.fixture(scope="session")
def spark():
    from pyspark.sql import SparkSession

    from logbroker.spark import LogbrokerDataSource

    # Python workers must import logbroker: run them with this interpreter (the venv's).
    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = (SparkSession.builder.master("local[2]").appName("logbroker-tests")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.session.timeZone", "UTC")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    session.dataSource.register(LogbrokerDataSource)
    yield session
    session.stop()


@pytest.fixture(scope="module")
def registry_broker(tmp_path_factory):
    """A broker serving the schema registry too (its URL in `registry_url`)."""
    from logbroker.testing import SCHEMA_REGISTRY_OVERRIDES, TEST_OVERRIDES, BrokerProcess

    process = BrokerProcess(tmp_path_factory.mktemp("typed"),
                            overrides={**TEST_OVERRIDES, **SCHEMA_REGISTRY_OVERRIDES})
    process.start()
    try:
        process.registry_url = process.schema_registry_url()
        yield process
    finally:
        process.kill()


@pytest.fixture
def bootstrap(shared_broker) -> str:
    return shared_broker.bootstrap
