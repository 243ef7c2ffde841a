"""`logbroker groups` (kafka-consumer-groups.sh) against a real broker: what the user sees, and
what the group's committed offsets are afterwards, as a new consumer of the group finds them."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid

import pytest

from logbroker.testing import BrokerProcess

PARTITIONS = 3
RECORDS_PER_PARTITION = 10
# Record i of each partition has the timestamp BASE_MS + i seconds.
BASE_MS = 1_704_067_200_000  # 2024-01-01T00:00:00.000Z
COMMITTED = {0: 4, 1: 7, 2: 10}


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory) -> str:
    process = BrokerProcess(tmp_path_factory.mktemp("groups-broker"),
                            overrides={"group.initial.rebalance.delay.ms": "0"})
    yield process.start().bootstrap
    process.kill()


@pytest.fixture
def group() -> str:
    return f"g-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def filled_topic(bootstrap, topic) -> str:
    """A topic of 3 partitions with 10 records each, timestamped BASE_MS + i s."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS)])[topic].result(timeout=15)
    producer = Producer({"bootstrap.servers": bootstrap})
    for partition in range(PARTITIONS):
        for i in range(RECORDS_PER_PARTITION):
            producer.produce(topic, f"{partition}-{i}".encode(), partition=partition,
                             timestamp=BASE_MS + i * 1000)
    assert producer.flush(15) == 0
    return topic


def run(bootstrap: str, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "logbroker.cli", "groups", "--bootstrap-server", bootstrap,
               *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


def consumer(bootstrap: str, group: str, **extra):
    from confluent_kafka import Consumer
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                     "enable.auto.commit": False, "auto.offset.reset": "earliest",
                     "session.timeout.ms": 6000, "heartbeat.interval.ms": 500, **extra})


def consume_part_and_commit(bootstrap: str, group: str, topic: str):
    """A member of `group` that consumed up to COMMITTED in each partition and committed there;
    returned still in the group."""
    from confluent_kafka import TopicPartition

    member = consumer(bootstrap, group)
    member.subscribe([topic])
    seen: set[tuple[int, int]] = set()
    deadline = time.monotonic() + 20
    while len(seen) < PARTITIONS * RECORDS_PER_PARTITION and time.monotonic() < deadline:
        message = member.poll(0.2)
        if message is not None and message.error() is None:
            seen.add((message.partition(), message.offset()))
    assert len(seen) == PARTITIONS * RECORDS_PER_PARTITION
    member.commit(offsets=[TopicPartition(topic, p, o) for p, o in COMMITTED.items()],
                  asynchronous=False)
    return member


def commit_while_inactive(bootstrap: str, group: str, topic: str) -> None:
    """COMMITTED offsets for a group nobody is a member of."""
    from confluent_kafka import TopicPartition

    client = consumer(bootstrap, group)
    client.commit(offsets=[TopicPartition(topic, p, o) for p, o in COMMITTED.items()],
                  asynchronous=False)
    client.close()


def resumed_offsets(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    """Where a new member of the group starts reading each partition. A partition without a
    committed offset starts at the log end ('latest'), so it would not match any expectation.
    One more record per partition first, so that a group at the log end has one to read."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap})
    for partition in range(PARTITIONS):
        producer.produce(topic, b"after", partition=partition)
    assert producer.flush(15) == 0
    reader = consumer(bootstrap, group, **{"auto.offset.reset": "latest"})
    reader.subscribe([topic])
    first: dict[int, int] = {}
    deadline = time.monotonic() + 20
    while len(first) < PARTITIONS and time.monotonic() < deadline:
        message = reader.poll(0.2)
        if message is not None and message.error() is None:
            first.setdefault(message.partition(), message.offset())
    reader.close()
    return first


def table(stdout: str) -> list[list[str]]:
    """Kafka's tables: a blank line, a header, rows of space-separated cells."""
    lines = stdout.splitlines()
    assert lines[0] == ""
    return [line.split() for line in lines[1:]]


def test_list_and_describe_show_offsets_log_end_and_lag(bootstrap, group, filled_topic):
    member = consume_part_and_commit(bootstrap, group, filled_topic)
    try:
        listed = run(bootstrap, "--list")
        assert listed.returncode == 0, listed.stderr
        assert group in listed.stdout.splitlines()
        with_state = run(bootstrap, "--list", "--state", "stable")
        assert [group, "Stable"] in [line.split() for line in with_state.stdout.splitlines()]

        described = run(bootstrap, "--describe", "--group", group)
        assert (described.returncode, described.stderr) == (0, "")
        rows = table(described.stdout)
        assert rows[0] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET",
                           "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]
        assert [row[:6] for row in rows[1:]] == [
            [group, filled_topic, str(p), str(o), "10", str(10 - o)] for p, o in COMMITTED.items()]
        assert {row[6] for row in rows[1:]} == {member.memberid()}

        members = table(run(bootstrap, "--describe", "--group", group, "--members").stdout)
        assert members[0] == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
        assert members[1][0:2] == [group, member.memberid()] and members[1][-1] == "3"
        state = table(run(bootstrap, "--describe", "--group", group, "--state").stdout)
        assert state[0][-3:] == ["ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]
        assert state[1][-3:] == ["range", "Stable", "1"]
    finally:
        member.close()

    empty = run(bootstrap, "--describe", "--group", group)
    assert empty.returncode == 0
    assert f"Consumer group '{group}' has no active members." in empty.stderr.splitlines()
    assert [row[:9] for row in table(empty.stdout)[1:]] == [
        [group, filled_topic, str(p), str(o), "10", str(10 - o), "-", "-", "-"]
        for p, o in COMMITTED.items()]


def test_list_shows_types_and_describe_shows_a_consumer_protocol_group(bootstrap, group, filled_topic):
    from confluent_kafka import Consumer
    member = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                       "auto.offset.reset": "earliest"})
    member.subscribe([filled_topic])
    try:
        deadline = time.monotonic() + 20
        while len(member.assignment()) < PARTITIONS:
            member.poll(0.1)
            assert time.monotonic() < deadline
        listed = run(bootstrap, "--list", "--type")
        assert (listed.returncode, listed.stderr) == (0, "")
        rows = [line.split() for line in listed.stdout.splitlines()]
        assert rows[0] == ["GROUP", "TYPE"] and [group, "Consumer"] in rows
        only_classic = run(bootstrap, "--list", "--type", "classic", "--state")
        assert group not in only_classic.stdout
        members = table(run(bootstrap, "--describe", "--group", group, "--members").stdout)
        assert members[1][0] == group and members[1][-1] == str(PARTITIONS)
        state = table(run(bootstrap, "--describe", "--group", group, "--state").stdout)
        assert state[1][-3:] == ["uniform", "Stable", "1"]
    finally:
        member.close()


def test_active_group_is_neither_reset_nor_deleted(bootstrap, group, filled_topic):
    member = consume_part_and_commit(bootstrap, group, filled_topic)
    try:
        reset = run(bootstrap, "--reset-offsets", "--group", group, "--topic", filled_topic,
                    "--to-earliest", "--execute")
        assert (reset.returncode, reset.stdout) == (1, "")
        assert reset.stderr == (f"Error: Assignments can only be reset if the group '{group}' is "
                                "inactive, but the current state is Stable.\n")
        deleted = run(bootstrap, "--delete", "--group", group)
        assert deleted.returncode == 1
        assert deleted.stderr.splitlines() == [
            "Error: Deletion of some consumer groups failed:",
            f"* Group '{group}' could not be deleted due to: The group is not empty "
            "(NON_EMPTY_GROUP)."]
    finally:
        member.close()

    deleted = run(bootstrap, "--delete", "--group", group)
    assert (deleted.returncode, deleted.stdout) == (
        0, f"Deletion of requested consumer groups ('{group}') was successful.\n")
    assert group not in run(bootstrap, "--list").stdout.splitlines()
    gone = run(bootstrap, "--describe", "--group", group)
    assert gone.returncode == 1
    assert gone.stderr == f"Error: Consumer group '{group}' does not exist.\n"


def test_dry_run_prints_the_plan_and_commits_nothing(bootstrap, group, filled_topic):
    commit_while_inactive(bootstrap, group, filled_topic)
    plan = run(bootstrap, "--reset-offsets", "--group", group, "--topic", f"{filled_topic}:0,2",
               "--to-offset", "6")
    assert plan.returncode == 0, plan.stderr
    assert table(plan.stdout) == [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
                                  [group, filled_topic, "0", "6"], [group, filled_topic, "2", "6"]]
    assert resumed_offsets(bootstrap, group, filled_topic) == COMMITTED


@pytest.mark.parametrize(("scenario", "expected"), [
    (["--to-earliest"], {0: 0, 1: 0, 2: 0}),
    (["--to-latest"], {0: 10, 1: 10, 2: 10}),
    (["--shift-by", "-3"], {0: 1, 1: 4, 2: 7}),
    (["--to-datetime", "2024-01-01T00:00:05.500"], {0: 6, 1: 6, 2: 6}),
])
def test_execute_moves_where_the_group_resumes(bootstrap, group, filled_topic, scenario, expected):
    commit_while_inactive(bootstrap, group, filled_topic)
    reset = run(bootstrap, "--reset-offsets", "--group", group, "--all-topics", *scenario,
                "--execute")
    assert reset.returncode == 0, reset.stderr
    assert table(reset.stdout)[1:] == [[group, filled_topic, str(p), str(o)]
                                       for p, o in expected.items()]
    assert resumed_offsets(bootstrap, group, filled_topic) == expected


def test_delete_offsets_forgets_one_topic(bootstrap, group, filled_topic):
    commit_while_inactive(bootstrap, group, filled_topic)
    deleted = run(bootstrap, "--delete-offsets", "--group", group, "--topic", f"{filled_topic}:1")
    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stdout.splitlines()[0] == (
        f"Request succeeded for deleting offsets from group {group}.")
    assert [line.split() for line in deleted.stdout.splitlines()[2:]] == [
        ["TOPIC", "PARTITION", "STATUS"], [filled_topic, "1", "Successful"]]
    rows = table(run(bootstrap, "--describe", "--group", group).stdout)
    assert [(row[2], row[3]) for row in rows[1:]] == [("0", "4"), ("2", "10")]
