"""`logbroker status` against a real broker: what the screen shows."""

from __future__ import annotations

import subprocess
import sys

from confluent_kafka import Producer

from logbroker.cli.status import ClusterStatus, GroupLag, GroupStatus, PartitionStatus, render


def run_status(bootstrap: str, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "logbroker.cli", "status", "--bootstrap-server", bootstrap, *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=90)


def test_status_shows_the_topic_and_its_log_end_offset(shared_broker, topic):
    producer = Producer({"bootstrap.servers": shared_broker.bootstrap})
    for i in range(7):
        producer.produce(topic, value=b"v%d" % i)
    assert producer.flush(15) == 0
    result = run_status(shared_broker.bootstrap)
    assert result.returncode == 0, result.stderr
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in result.stdout.splitlines()
            if line.startswith("│") and topic in line]
    # Topic, Partition, Leader, Replicas, ISR, Start, End, Under-replicated
    assert rows == [[topic, "0", "0", "0", "0", "0", "7", "no"]]
    assert "Brokers" in result.stdout


def test_status_of_an_unreachable_cluster_is_one_error_line():
    result = run_status("127.0.0.1:1")
    assert result.returncode == 1
    assert result.stderr.startswith("Error: Cannot reach a broker at 127.0.0.1:1")


def _text(renderable) -> str:
    from rich.console import Console

    console = Console(width=200, record=True, file=open("/dev/null", "w"))
    console.print(renderable)
    return console.export_text()


def test_render_flags_under_replicated_partitions_and_shows_group_lag():
    status = ClusterStatus("c", 1, [(1, "h", 9092), (2, "h", 9093)],
                           [PartitionStatus("t", 0, 1, (1, 2), (1,), 0, 10)],
                           [GroupStatus("g", "STABLE", 1, (GroupLag("t", 0, 4, 10),))])
    text = _text(render(status, "h:9092"))
    assert "1 under-replicated" in text
    assert [c.strip() for c in next(l for l in text.splitlines() if l.startswith("│ g ")).split("│")[1:-1]] == \
        ["g", "STABLE", "1", "t", "0", "4", "10", "6"]


def test_render_says_when_the_broker_has_no_groups():
    status = ClusterStatus("c", 1, [(1, "h", 9092)], [], groups_unavailable="Unsupported (UNSUPPORTED_VERSION).")
    assert "Groups: not available from this broker: Unsupported" in _text(render(status, "h:9092"))
