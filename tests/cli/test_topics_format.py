"""kafka-topics output lines and option rules, without a broker."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from logbroker.cli.topics import PartitionView, TopicView, describe_lines, include_pattern

TOPIC = TopicView(
    name="orders", topic_id="mXwZ0F4PQ1yNWD6k1Gzh2A",
    partitions=(PartitionView(1, 2, (2, 3, 1), (2, 3)), PartitionView(0, 1, (1, 2, 3), (1, 2, 3)),
                PartitionView(2, None, (3, 1, 2), ())),
    configs=(("cleanup.policy", "compact"), ("retention.ms", "60000")))


def test_describe_prints_the_topic_line_then_partitions_in_order():
    assert describe_lines(TOPIC) == [
        "Topic: orders\tTopicId: mXwZ0F4PQ1yNWD6k1Gzh2A\tPartitionCount: 3\tReplicationFactor: 3"
        "\tConfigs: cleanup.policy=compact,retention.ms=60000",
        "\tTopic: orders\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1,2,3",
        "\tTopic: orders\tPartition: 1\tLeader: 2\tReplicas: 2,3,1\tIsr: 2,3",
        "\tTopic: orders\tPartition: 2\tLeader: none\tReplicas: 3,1,2\tIsr: ",
    ]


def test_a_tiered_partition_line_ends_with_its_local_and_remote_log():
    from dataclasses import replace

    from logbroker.protocol.responses.describe_log_dirs import LogDirPartition, RemoteLogInfo
    copied = LogDirPartition(0, 21636, 0, False, RemoteLogInfo(200893, 26, 0, 1455))
    none_yet = LogDirPartition(1, 812, 0, False, RemoteLogInfo(0, 0, -1, -1))
    not_said = LogDirPartition(2, 4096, 0, False)  # a broker without logbroker's remote field
    [p0, p1, p2] = sorted(TOPIC.partitions, key=lambda p: p.partition)
    lines = describe_lines(replace(TOPIC, partitions=(replace(p0, sizes=copied), replace(p1, sizes=none_yet),
                                                       replace(p2, sizes=not_said))))
    assert lines[1:] == [
        "\tTopic: orders\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1,2,3"
        "\tLocalSize: 21636\tRemoteSize: 200893\tRemoteSegments: 26\tRemoteOffsets: 0-1455",
        "\tTopic: orders\tPartition: 1\tLeader: 2\tReplicas: 2,3,1\tIsr: 2,3"
        "\tLocalSize: 812\tRemoteSize: 0\tRemoteSegments: 0\tRemoteOffsets: none",
        "\tTopic: orders\tPartition: 2\tLeader: none\tReplicas: 3,1,2\tIsr: \tLocalSize: 4096\tRemoteSize: unknown",
    ]


def test_zero_topic_id_is_left_out():
    topic = TopicView("t", "AAAAAAAAAAAAAAAAAAAAAA", (PartitionView(0, 0, (0,), (0,)),), ())
    assert describe_lines(topic)[0] == "Topic: t\tPartitionCount: 1\tReplicationFactor: 1\tConfigs: "


def test_partition_filters_print_only_their_partitions():
    assert [line.split("\t")[2] for line in describe_lines(TOPIC, under_replicated=True)] == [
        "Partition: 1", "Partition: 2"]
    assert [line.split("\t")[2] for line in describe_lines(TOPIC, unavailable=True)] == [
        "Partition: 2"]


def test_topic_expression_is_a_whole_name_regex_with_commas():
    pattern = include_pattern("orders.*,payments")
    assert [n for n in ["orders", "orders-eu", "payments", "payments2", "x-orders"]
            if pattern.fullmatch(n)] == ["orders", "orders-eu", "payments"]


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "logbroker.cli", *args], capture_output=True,
                          text=True, timeout=60)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("args", [
    ["topics", "--list"],
    ["produce", "--topic", "t"],
    ["consume", "--topic", "t"],
    ["perf", "consume", "--topic", "t", "--messages", "1"],
])
def test_unreachable_cluster_is_one_error_line_and_exit_1(args):
    bootstrap = f"127.0.0.1:{closed_port()}"
    result = run(*args, "--bootstrap-server", bootstrap)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.startswith(f"Error: Cannot reach a broker at {bootstrap}: ")
    assert result.stderr.rstrip().endswith(").")
    assert len(result.stderr.splitlines()) == 1


def test_topics_needs_exactly_one_action():
    result = run("topics", "--list", "--describe")
    assert result.returncode == 2
    assert "Command must include exactly one action" in result.stderr


def test_create_needs_a_topic():
    result = run("topics", "--create")
    assert result.returncode == 2
    assert "--topic is required with --create" in result.stderr
