"""`logbroker log-dirs --describe` (kafka-log-dirs.sh) and the log dir sizes of `logbroker status`,
against a real broker with two log dirs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from logbroker.testing import TEST_OVERRIDES, BrokerProcess


@pytest.fixture(scope="module")
def two_dir_broker(tmp_path_factory):
    base = tmp_path_factory.mktemp("cli-two-dirs")
    dirs = [base / "d1", base / "d2"]
    with BrokerProcess(base / "broker", overrides={
            **TEST_OVERRIDES, "log.dirs": ",".join(map(str, dirs))}) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for future in admin.create_topics([NewTopic("cli-t", 2, 1), NewTopic("cli-other", 1, 1)]).values():
            future.result(30)
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        for i in range(40):
            producer.produce("cli-t", value=b"x" * 100, partition=i % 2)
        producer.produce("cli-other", value=b"y")
        assert producer.flush(15) == 0
        yield broker, [str(d) for d in dirs]


def logbroker(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "logbroker.cli", *args], capture_output=True,
                          text=True, timeout=90)


def test_describe_prints_kafkas_json_filtered_by_topic(two_dir_broker):
    broker, dirs = two_dir_broker
    result = logbroker("log-dirs", "--bootstrap-server", broker.bootstrap, "--describe",
                       "--topic-list", "cli-t")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:2] == ["Querying brokers for log directories information",
                         "Received log directory information from brokers 0"]
    document = json.loads(lines[2])
    assert document["version"] == 1 and [b["broker"] for b in document["brokers"]] == [0]
    log_dirs = document["brokers"][0]["logDirs"]
    assert sorted(d["logDir"] for d in log_dirs) == sorted(dirs)
    assert all(d["error"] is None for d in log_dirs)
    partitions = sorted((p["partition"], p["offsetLag"], p["isFuture"]) for d in log_dirs for p in d["partitions"])
    assert partitions == [("cli-t-0", 0, False), ("cli-t-1", 0, False)]
    assert all(p["size"] > 20 * 100 for d in log_dirs for p in d["partitions"])


def test_an_unknown_broker_is_one_error_line(two_dir_broker):
    broker, _ = two_dir_broker
    result = logbroker("log-dirs", "--bootstrap-server", broker.bootstrap, "--describe", "--broker-list", "0,7")
    assert result.returncode == 1
    assert result.stderr == ("Error: The given brokers do not exist from --broker-list: 7. "
                             "Current existent brokers: 0\n")


def test_status_shows_each_log_dirs_size(two_dir_broker):
    broker, dirs = two_dir_broker
    result = logbroker("status", "--bootstrap-server", broker.bootstrap)
    assert result.returncode == 0, result.stderr
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in result.stdout.splitlines()
            if line.startswith("│") and any(d in line for d in dirs)]
    assert sorted(r[1] for r in rows) == sorted(dirs)
    assert all(r[0] == "0" and r[2].endswith(("B", "KiB")) and r[3].endswith("iB") for r in rows)
    assert "0 B" not in [r[2] for r in rows]  # both dirs hold data
