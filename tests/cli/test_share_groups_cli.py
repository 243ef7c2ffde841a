"""`logbroker share-groups` (kafka-share-groups.sh) against a real broker with ShareConsumers."""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest

sys.path.insert(0, str(__import__("pathlib").Path(__file__).parents[1] / "broker"))
from share_helpers import create_topic, drain, produce, set_group_configs, share_consumer  # noqa: E402


def cli(bootstrap: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "logbroker.cli", "share-groups", "--bootstrap-server", bootstrap,
                           *args], capture_output=True, text=True, timeout=60)


@pytest.fixture
def consumed(logbroker):
    """A share group that accepted 6 of 10 records of its topic, then closed."""
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"sg-{uuid.uuid4().hex[:8]}"
    create_topic(logbroker, topic)
    set_group_configs(logbroker, group, share_auto_offset_reset="earliest")
    produce(logbroker, topic, 6)
    consumer = share_consumer(logbroker, group, topic, explicit=True)
    drain([consumer], 6, on_message=lambda _i, c, m: c.acknowledge(m))
    consumer.commit_sync()
    consumer.close()
    produce(logbroker, topic, 4, prefix="later")
    return logbroker, topic, group


def test_list_describe_offsets_and_state(consumed):
    bootstrap, topic, group = consumed
    listed = cli(bootstrap, "--list")
    assert listed.returncode == 0 and group in listed.stdout.split()
    offsets = cli(bootstrap, "--describe", "--group", group)
    assert offsets.returncode == 0, offsets.stderr
    row = [line.split() for line in offsets.stdout.splitlines() if line.startswith(group)]
    assert row == [[group, topic, "0", "0", "6", "4"]]  # start offset 6, 4 records to go
    state = cli(bootstrap, "--describe", "--group", group, "--state")
    assert "Empty" in state.stdout and "GROUP-EPOCH" in state.stdout


def test_reset_to_earliest_redelivers_and_delete_removes_the_group(consumed):
    bootstrap, topic, group = consumed
    plan = cli(bootstrap, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest")
    assert plan.returncode == 0 and plan.stdout.split()[-1] == "0"
    assert cli(bootstrap, "--describe", "--group", group).stdout.splitlines()[-1].split()[4] == "6"  # dry run
    done = cli(bootstrap, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute")
    assert done.returncode == 0, done.stderr
    consumer = share_consumer(bootstrap, group, topic)
    try:
        assert len([m for ms in drain([consumer], 10).values() for m in ms]) == 10
    finally:
        consumer.close()
    deleted = cli(bootstrap, "--delete-offsets", "--group", group, "--topic", topic)
    assert deleted.returncode == 0 and "Successful" in deleted.stdout
    gone = cli(bootstrap, "--delete", "--group", group)
    assert gone.returncode == 0, gone.stderr
    assert group not in cli(bootstrap, "--list").stdout.split()


def test_reset_of_a_group_with_members_is_refused(consumed):
    bootstrap, topic, group = consumed
    consumer = share_consumer(bootstrap, group, topic)
    try:
        drain([consumer], 4)
        refused = cli(bootstrap, "--reset-offsets", "--group", group, "--topic", topic, "--to-latest", "--execute")
    finally:
        consumer.close()
    assert refused.returncode == 1 and "NON_EMPTY_GROUP" in refused.stderr


def test_groups_list_with_types_shows_share_groups(consumed):
    bootstrap, _, group = consumed
    listed = subprocess.run([sys.executable, "-m", "logbroker.cli", "groups", "--bootstrap-server", bootstrap,
                             "--list", "--type"], capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    assert [line.split() for line in listed.stdout.splitlines() if line.startswith(group)] == [[group, "Share"]]
    only = subprocess.run([sys.executable, "-m", "logbroker.cli", "groups", "--bootstrap-server", bootstrap,
                           "--list", "--type", "share", "--state"], capture_output=True, text=True, timeout=60)
    assert [line.split() for line in only.stdout.splitlines()[1:]] == [[group, "Share", "Empty"]]


def test_reset_to_datetime_takes_the_first_record_at_or_after_it(logbroker):
    import confluent_kafka as ck
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"sg-{uuid.uuid4().hex[:8]}"
    create_topic(logbroker, topic)
    producer = ck.Producer({"bootstrap.servers": logbroker})
    base_ms = 1_704_067_200_000  # 2024-01-01T00:00:00.000Z
    for i in range(6):
        producer.produce(topic, value=b"x", partition=0, timestamp=base_ms + i * 1000)
    assert producer.flush(15) == 0
    done = cli(logbroker, "--reset-offsets", "--group", group, "--topic", topic,
               "--to-datetime", "2024-01-01T00:00:03.500", "--execute")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-1] == "4"
    described = cli(logbroker, "--describe", "--group", group)
    assert [line.split()[4] for line in described.stdout.splitlines() if line.startswith(group)] == ["4"]
