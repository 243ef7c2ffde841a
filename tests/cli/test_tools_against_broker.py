"""The Kafka-style tools against a real broker: what the user sees, lines and exit codes."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

pytest.importorskip("logbroker.cli.serve", reason="`logbroker serve` is not written yet")
pytest.importorskip("logbroker.server.broker", reason="the broker does not import yet")

from logbroker.cli.topic_partitions import describe_topic_partitions  # noqa: E402
from logbroker.cli.topics import kafka_uuid  # noqa: E402
from logbroker.protocol.apis import SUPPORTED_APIS  # noqa: E402

FIND_COORDINATOR = 10
needs_groups = pytest.mark.skipif(FIND_COORDINATOR not in SUPPORTED_APIS,
                                  reason="the broker does not implement consumer groups yet")


def run(bootstrap: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "logbroker.cli", *args, "--bootstrap-server", bootstrap]
    return subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=90)


@pytest.fixture
def bootstrap(shared_broker) -> str:
    return shared_broker.bootstrap


# ---- topics -------------------------------------------------------------------------------

def test_create_list_describe_delete(bootstrap, topic):
    created = run(bootstrap, "topics", "--create", "--topic", topic, "--partitions", "3",
                  "--config", "max.message.bytes=200000")
    assert (created.returncode, created.stdout, created.stderr) == (0, f"Created topic {topic}.\n", "")

    listed = run(bootstrap, "topics", "--list")
    assert listed.returncode == 0 and topic in listed.stdout.splitlines()

    described = run(bootstrap, "topics", "--describe", "--topic", topic)
    assert described.returncode == 0, described.stderr
    lines = described.stdout.splitlines()
    assert re.fullmatch(rf"Topic: {topic}\tTopicId: [A-Za-z0-9_-]{{22}}\tPartitionCount: 3"
                        rf"\tReplicationFactor: 1\tConfigs: .*", lines[0])
    assert "max.message.bytes=200000" in lines[0].split("Configs: ")[1].split(",")
    assert lines[1:] == [f"\tTopic: {topic}\tPartition: {p}\tLeader: 0\tReplicas: 0\tIsr: 0"
                         for p in range(3)]

    deleted = run(bootstrap, "topics", "--delete", "--topic", topic)
    assert (deleted.returncode, deleted.stdout, deleted.stderr) == (0, "", "")
    assert topic not in run(bootstrap, "topics", "--list").stdout.splitlines()


def test_describe_pages_a_large_topic_with_describe_topic_partitions(bootstrap, topic):
    """Asked for a few partitions per answer, the tool follows the cursor to the end: every
    partition once and in order, the same topic id as Metadata gives."""
    assert run(bootstrap, "topics", "--create", "--topic", topic, "--partitions", "45").returncode == 0
    paged = run(bootstrap, "topics", "--describe", "--topic", topic, "--partition-size-limit-per-response", "7")
    assert paged.returncode == 0, paged.stderr
    lines = paged.stdout.splitlines()
    assert lines[1:] == [f"\tTopic: {topic}\tPartition: {p}\tLeader: 0\tReplicas: 0\tIsr: 0" for p in range(45)]
    assert "\tPartitionCount: 45\t" in lines[0]
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": bootstrap})
    metadata_id = admin.describe_topics(TopicCollection([topic]))[topic].result(15).topic_id
    assert lines[0].split("\t")[1] == f"TopicId: {kafka_uuid(str(metadata_id))}"
    topic_id, partitions = describe_topic_partitions(bootstrap, None, [topic], 7)[topic]  # the tool's path
    assert [p.partition_index for p in partitions] == list(range(45)) and lines[0].split("\t")[1] == f"TopicId: {topic_id}"


def test_creating_an_existing_topic_names_the_kafka_error(bootstrap, topic):
    assert run(bootstrap, "topics", "--create", "--topic", topic).returncode == 0
    again = run(bootstrap, "topics", "--create", "--topic", topic)
    assert again.returncode == 1
    assert again.stdout == ""
    assert again.stderr.startswith("Error: ")
    assert again.stderr.rstrip().endswith("(TOPIC_ALREADY_EXISTS).")
    quiet = run(bootstrap, "topics", "--create", "--topic", topic, "--if-not-exists")
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", "")


def test_bad_topic_config_is_refused_by_the_broker(bootstrap, topic):
    result = run(bootstrap, "topics", "--create", "--topic", topic, "--config", "retention.ms=soon")
    assert result.returncode == 1
    assert result.stderr.rstrip().endswith("(INVALID_CONFIG).")


def test_alter_adds_partitions_and_never_removes_them(bootstrap, topic):
    run(bootstrap, "topics", "--create", "--topic", topic, "--partitions", "2")
    grown = run(bootstrap, "topics", "--alter", "--topic", topic, "--partitions", "4")
    assert (grown.returncode, grown.stdout) == (0, "")
    described = run(bootstrap, "topics", "--describe", "--topic", topic).stdout
    assert "\tPartitionCount: 4\t" in described.splitlines()[0]
    shrunk = run(bootstrap, "topics", "--alter", "--topic", topic, "--partitions", "1")
    assert shrunk.returncode == 1
    assert shrunk.stderr.rstrip().endswith("(INVALID_PARTITIONS).")


def test_missing_topic_is_an_error_unless_if_exists(bootstrap, topic):
    for action in (["--describe"], ["--delete"], ["--alter", "--partitions", "3"]):
        missing = run(bootstrap, "topics", *action, "--topic", topic)
        assert missing.returncode == 1
        assert missing.stderr == f"Error: Topic '{topic}' does not exist (UNKNOWN_TOPIC_OR_PARTITION).\n"
        tolerated = run(bootstrap, "topics", *action, "--topic", topic, "--if-exists")
        assert (tolerated.returncode, tolerated.stdout, tolerated.stderr) == (0, "", "")


# ---- produce / consume --------------------------------------------------------------------

def test_keys_and_values_round_trip_through_the_console_tools(bootstrap, topic):
    run(bootstrap, "topics", "--create", "--topic", topic)
    produced = run(bootstrap, "produce", "--topic", topic, "--property", "parse.key=true",
                   "--property", "key.separator=:", stdin="k1:hello\nk2:wor:ld\n:no key\n")
    assert (produced.returncode, produced.stdout, produced.stderr) == (0, "", "")

    consumed = run(bootstrap, "consume", "--topic", topic, "--partition", "0", "--offset",
                   "earliest", "--max-messages", "3", "--property", "print.key=true",
                   "--property", "print.offset=true", "--property", "print.partition=true")
    assert consumed.returncode == 0
    assert consumed.stdout == ("Partition:0\tOffset:0\tk1\thello\n"
                               "Partition:0\tOffset:1\tk2\twor:ld\n"
                               "Partition:0\tOffset:2\t\tno key\n")
    assert consumed.stderr == "Processed a total of 3 messages\n"


def test_headers_and_timestamps_are_printed_as_kafka_prints_them(bootstrap, topic):
    run(bootstrap, "topics", "--create", "--topic", topic)
    run(bootstrap, "produce", "--topic", topic, "--property", "parse.headers=true",
        stdin="trace:abc,tenant:7\tpayload\n")
    consumed = run(bootstrap, "consume", "--topic", topic, "--partition", "0", "--from-beginning",
                   "--max-messages", "1", "--property", "print.headers=true",
                   "--property", "print.timestamp=true")
    assert re.fullmatch(r"CreateTime:\d{13}\ttrace:abc,tenant:7\tpayload\n", consumed.stdout)


def test_consume_from_an_offset_and_stop_after_a_quiet_timeout(bootstrap, topic):
    run(bootstrap, "topics", "--create", "--topic", topic)
    run(bootstrap, "produce", "--topic", topic, stdin="a\nb\nc\n")
    consumed = run(bootstrap, "consume", "--topic", topic, "--partition", "0", "--offset", "1",
                   "--timeout-ms", "1500")
    assert (consumed.returncode, consumed.stdout) == (0, "b\nc\n")
    assert consumed.stderr == "Processed a total of 2 messages\n"


def test_a_line_without_its_key_separator_stops_the_producer(bootstrap, topic):
    result = run(bootstrap, "produce", "--topic", topic, "--property", "parse.key=true",
                 stdin="k\tv\nno separator here\n")
    assert result.returncode == 1
    assert result.stderr == ("Error: No key separator found on line number 2: "
                             "'no separator here'\n")


@needs_groups
def test_consume_with_a_group_from_beginning(bootstrap, topic):
    run(bootstrap, "topics", "--create", "--topic", topic, "--partitions", "2")
    run(bootstrap, "produce", "--topic", topic, stdin="".join(f"m{i}\n" for i in range(10)))
    consumed = run(bootstrap, "consume", "--topic", topic, "--group", f"g-{topic}",
                   "--from-beginning", "--max-messages", "10", "--timeout-ms", "20000")
    assert consumed.returncode == 0
    assert sorted(consumed.stdout.splitlines()) == sorted(f"m{i}" for i in range(10))


# ---- perf ---------------------------------------------------------------------------------

def test_perf_produce_prints_kafkas_final_line(bootstrap, topic):
    result = run(bootstrap, "perf", "produce", "--topic", topic, "--num-records", "2000",
                 "--record-size", "100", "--throughput", "-1",
                 "--producer-props", "acks=1", "linger.ms=5", "batch.size=65536")
    assert result.returncode == 0, result.stderr
    assert re.fullmatch(
        r"2000 records sent, \d+\.\d{6} records/sec \(\d+\.\d\d MB/sec\), \d+\.\d\d ms avg latency, "
        r"\d+\.\d\d ms max latency, \d+ ms 50th, \d+ ms 95th, \d+ ms 99th, \d+ ms 99\.9th\.",
        result.stdout.splitlines()[-1])


@needs_groups
def test_perf_consume_prints_kafkas_header_and_totals(bootstrap, topic):
    run(bootstrap, "perf", "produce", "--topic", topic, "--num-records", "500",
        "--record-size", "10", "--throughput", "-1")
    result = run(bootstrap, "perf", "consume", "--topic", topic, "--messages", "500")
    assert result.returncode == 0, result.stderr
    header, totals = result.stdout.splitlines()
    assert header == ("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, "
                      "nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")
    fields = totals.split(", ")
    assert fields[2] == f"{5000 / 1024 / 1024:.4f}" and fields[4] == "500"
