"""The source and the exactly-once sink on a Spark standalone cluster (a Master and a Worker in
their own JVMs, started from pyspark's jars) and from a Spark Connect client.

Drivers run as subprocesses (this process already holds the local[2] SparkContext of the
`spark` fixture). Executors get `logbroker` as docs/spark.md tells users to ship it: here the
Worker's environment gives them this venv's interpreter, which has it installed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from spark_kafka import create_topic, new_topic_name
from test_exactly_once import (JOB, RECORDS, committed_batches, finish, kill_group,
                               output_values, produce_input, start_job, wait_for_commits)

from logbroker.spark.local_cluster import ConnectServer, StandaloneCluster


@pytest.fixture(scope="session")
def spark_standalone(tmp_path_factory):
    with StandaloneCluster(tmp_path_factory.mktemp("spark-standalone")) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def connect_server(tmp_path_factory):
    pytest.importorskip("grpc", reason="Spark Connect clients need pyspark[connect] (grpcio)")
    with ConnectServer(tmp_path_factory.mktemp("spark-connect"), master="local[2]") as server:
        yield server


def run_report(*args: str, timeout_s: float = 240) -> dict:
    answer = subprocess.run([sys.executable, str(JOB), *args, "--report"], capture_output=True,
                            timeout=timeout_s, env={**os.environ, "PYSPARK_PYTHON": sys.executable})
    assert answer.returncode == 0, answer.stderr.decode(errors="replace")[-3000:]
    return json.loads(answer.stdout.decode().strip().splitlines()[-1])


@pytest.mark.timeout(300)
def test_standalone_stream_survives_a_driver_kill_and_batch_reads_it_back(
        spark_standalone, bootstrap, tmp_path):
    source, sink = new_topic_name(), new_topic_name()
    values = produce_input(bootstrap, source)
    create_topic(bootstrap, sink, 3)
    checkpoint = tmp_path / "checkpoint"
    master = ["--master", spark_standalone.master_url, "--max-offsets", "600"]
    process = start_job(bootstrap, source, sink, checkpoint, *master)
    wait_for_commits(process, checkpoint, 1)
    kill_group(process)
    assert committed_batches(checkpoint) < RECORDS // 600
    report = run_report("--bootstrap", bootstrap, "--input", source, "--output", sink,
                        "--checkpoint", str(checkpoint), *master)

    assert output_values(bootstrap, sink) == values
    assert report["rows"] == report["distinct"] == RECORDS  # batch read on the cluster
    src = os.environ.get("PYTHONPATH", "").split(os.pathsep)[0]
    if src:  # the executors import the code under test, not another install
        assert report["file"].startswith(src), report["file"]


@pytest.mark.timeout(300)
def test_pipeline_runs_on_the_standalone_cluster(spark_standalone, tmp_path):
    answer = subprocess.run(
        [sys.executable, "-m", "logbroker.pipeline", "--master", spark_standalone.master_url,
         "--events", "1500", "--output", str(tmp_path / "out")],
        capture_output=True, timeout=300, env={**os.environ, "PYSPARK_PYTHON": sys.executable})
    assert answer.returncode == 0, (answer.stdout + answer.stderr).decode(errors="replace")[-3000:]


@pytest.mark.timeout(300)
def test_spark_connect_client_streams_and_reads_exactly_once(connect_server, bootstrap, tmp_path):
    source, sink = new_topic_name(), new_topic_name()
    values = produce_input(bootstrap, source)
    create_topic(bootstrap, sink, 3)
    report = run_report("--bootstrap", bootstrap, "--input", source, "--output", sink,
                        "--checkpoint", str(tmp_path / "checkpoint"),
                        "--remote", connect_server.url, "--max-offsets", "1500")

    assert output_values(bootstrap, sink) == values
    assert report["rows"] == report["distinct"] == RECORDS
