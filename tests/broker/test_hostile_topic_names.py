"""an illegal topic name is INVALID_TOPIC_EXCEPTION (17) on every path that creates a
topic, and never reaches a directory name or a checkpoint line."""

from __future__ import annotations

import subprocess
import sys

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import NewTopic

from logbroker.protocol.apis import ApiKey
from logbroker.records.builder import build_batch
from logbroker.storage.checkpoints import OffsetCheckpointFile

from clients import RawClient, admin, create_topic

INVALID_TOPIC_EXCEPTION = 17
BAD_NAMES = ["evil\n", "evil\r\n", "a/b", "..", "a b", "caf\u00e9", "x" * 250, ""]


def test_create_topics_refuses_illegal_names_with_invalid_topic_exception(broker_process):
    futures = admin(broker_process.bootstrap).create_topics([NewTopic("evil\n", 1, 1)], request_timeout=15)
    error = futures["evil\n"].exception(30)
    assert error is not None and error.args[0].code() == KafkaError.TOPIC_EXCEPTION
    with RawClient(broker_process.bootstrap) as raw:
        for version in (2, 4, 7):
            body = raw.request(ApiKey.CREATE_TOPICS, version, timeout_ms=5000, validate_only=False, topics=[
                {"name": n, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
                for n in BAD_NAMES])
            assert [t.error_code for t in body.topics] == [INVALID_TOPIC_EXCEPTION] * len(BAD_NAMES), version
    assert_no_topic_dirs_but(broker_process, set())


def test_metadata_auto_create_refuses_illegal_names(broker_process):
    with RawClient(broker_process.bootstrap) as raw:
        v1 = raw.request(ApiKey.METADATA, 1, topics=[{"name": n} for n in BAD_NAMES if n])
        assert {t.error_code for t in v1.topics} == {INVALID_TOPIC_EXCEPTION}
        v12 = raw.request(ApiKey.METADATA, 12, topics=[{"name": "evil\n", "topic_id": None}],
                          allow_auto_topic_creation=True, include_topic_authorized_operations=False)
        assert v12.topics[0].error_code == INVALID_TOPIC_EXCEPTION
        produced = raw.produce("evil\n", 0, bytes(build_batch([(b"k", b"v")])))
        assert produced.error_code != 0
    assert_no_topic_dirs_but(broker_process, set())


def test_illegal_names_leave_every_checkpoint_readable_after_a_restart(broker_process):
    create_topic(broker_process.bootstrap, "good", partitions=2)
    with RawClient(broker_process.bootstrap) as raw:
        assert raw.produce("good", 0, bytes(build_batch([(b"k", b"v")] * 3))).error_code == 0
        raw.request(ApiKey.METADATA, 1, topics=[{"name": "evil\n"}])
        raw.request(ApiKey.CREATE_TOPICS, 4, timeout_ms=5000, validate_only=False, topics=[
            {"name": "evil\n", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}])
    broker_process.restart()
    log_text = broker_process.new_log_text()
    assert "Error reading" not in log_text and "Traceback" not in log_text
    for name in ("recovery-point-offset-checkpoint", "replication-offset-checkpoint"):
        offsets = OffsetCheckpointFile(broker_process.data_dir / name).read()
        assert {tp.topic for tp in offsets} == {"good"}
    high_watermarks = OffsetCheckpointFile(broker_process.data_dir / "replication-offset-checkpoint").read()
    assert sorted(high_watermarks.values()) == [0, 3]
    assert_no_topic_dirs_but(broker_process, {"good"})


@pytest.mark.parametrize("name", ["evil\n", "a/b", "caf\u00e9"], ids=repr)
def test_the_topics_tool_refuses_illegal_names(shared_broker, name):
    result = subprocess.run([sys.executable, "-m", "logbroker.cli", "topics", "--bootstrap-server",
                             shared_broker.bootstrap, "--create", "--topic", name],
                            capture_output=True, text=True, timeout=90)
    assert result.returncode == 1
    assert "INVALID_TOPIC_EXCEPTION" in result.stderr and "is illegal" in result.stderr


def assert_no_topic_dirs_but(broker_process, topics: set[str]) -> None:
    dirs = {p.name.rsplit("-", 1)[0] for p in broker_process.data_dir.iterdir() if p.is_dir()}
    assert dirs <= topics | {"__consumer_offsets"}, dirs


def test_metadata_auto_create_refuses_a_name_that_collides_like_create_topics(broker_process):
    create_topic(broker_process.bootstrap, "a.b")
    with RawClient(broker_process.bootstrap) as raw:
        assert raw.request(ApiKey.METADATA, 1, topics=[{"name": "a_b"}]).topics[0].error_code == INVALID_TOPIC_EXCEPTION
        created = raw.request(ApiKey.CREATE_TOPICS, 4, timeout_ms=5000, validate_only=False, topics=[
            {"name": "a_b", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}])
        assert created.topics[0].error_code == INVALID_TOPIC_EXCEPTION


def test_kafka_python_admin_gets_invalid_topic_error(broker_process):
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewTopic as KafkaPythonNewTopic
    from kafka.errors import InvalidTopicError

    client = KafkaAdminClient(bootstrap_servers=broker_process.bootstrap)
    try:
        with pytest.raises(InvalidTopicError):
            client.create_topics([KafkaPythonNewTopic("evil\n", 1, 1)], raise_errors=True)
    finally:
        client.close()
    assert_no_topic_dirs_but(broker_process, set())
