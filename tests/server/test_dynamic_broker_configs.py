"""Dynamic broker configs on a single node, through real clients: set per broker (confluent-kafka,
kafka-python) or as the cluster default (`logbroker configs --entity-default`, and a raw request:
neither client can name the default resource), applied without a restart, kept in the metadata
file across one, described with Kafka's sources and synonyms; bad input refused with Kafka's
error and nothing changed."""

from __future__ import annotations

import functools
import gc
import json
import socket
import struct
import subprocess
import sys
import uuid

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka import TopicPartition as TP
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    OffsetSpec,
    ResourceType,
)
from kafka.admin import ConfigResource as KafkaPythonConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient

from logbroker.testing import TEST_OVERRIDES, BrokerProcess, wait_for
from test_admin_apis import request

TIMEOUT_S = 15
DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT = 2, 3, 4, 5
INVALID_REQUEST = 42


@pytest.fixture
def broker(tmp_path) -> BrokerProcess:
    process = BrokerProcess(tmp_path, overrides={**TEST_OVERRIDES, "log.retention.hours": "24",
                                                 "log.retention.check.interval.ms": "200"})
    yield process.start()
    admin.cache_clear()
    gc.collect()
    process.kill()


@functools.cache
def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def set_broker_config(bootstrap: str, name: str, value: str | None, *, resource: str = "0") -> None:
    op = AlterConfigOpType.SET if value is not None else AlterConfigOpType.DELETE
    futures = admin(bootstrap).incremental_alter_configs(
        [ConfigResource(ResourceType.BROKER, resource, incremental_configs=[ConfigEntry(name, value, incremental_operation=op)])])
    next(iter(futures.values())).result(TIMEOUT_S)


def alter_raw(bootstrap: str, resource: str, configs: dict[str, str], *, validate_only: bool = False):
    """AlterConfigs v2 for one BROKER resource: (error code, message)."""
    response = request(bootstrap, 33, 2, validate_only=validate_only, resources=[{
        "resource_type": 4, "resource_name": resource,
        "configs": [{"name": k, "value": v} for k, v in configs.items()]}])
    result = response.responses[0]
    return int(result.error_code), result.error_message


def describe_raw(bootstrap: str, resource: str, keys: list[str] | None = None) -> dict:
    """DescribeConfigs v4 with synonyms: name → (value, source, read_only, [(name, value, source)])."""
    response = request(bootstrap, 32, 4, include_synonyms=True, include_documentation=False, resources=[
        {"resource_type": 4, "resource_name": resource, "configuration_keys": keys}])
    result = response.results[0]
    assert int(result.error_code) == 0, result.error_message
    return {c.name: (c.value, int(c.config_source), c.read_only,
                     [(s.name, s.value, int(s.source)) for s in c.synonyms]) for c in result.configs}


def produce_one(bootstrap: str, topic: str, size: int):
    """Produce one record of `size` bytes; its delivery error (None when written)."""
    producer = Producer({"bootstrap.servers": bootstrap, "message.max.bytes": 10_000_000})
    errors = []
    producer.produce(topic, b"x" * size, on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(TIMEOUT_S)
    return errors[0]


def configs_tool(bootstrap: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "logbroker.cli", "configs", "--bootstrap-server", bootstrap,
                           *args], capture_output=True, text=True, timeout=60)


def test_message_max_bytes_lowered_per_broker_applies_at_once_and_survives_a_restart(broker):
    topic = f"t-{uuid.uuid4().hex[:8]}"
    assert produce_one(broker.bootstrap, topic, 3000) is None

    set_broker_config(broker.bootstrap, "message.max.bytes", "2000")

    assert produce_one(broker.bootstrap, topic, 3000).code() == KafkaError.MSG_SIZE_TOO_LARGE
    assert produce_one(broker.bootstrap, topic, 500) is None
    value, source, read_only, synonyms = describe_raw(broker.bootstrap, "0", ["message.max.bytes"])["message.max.bytes"]
    assert (value, source, read_only) == ("2000", DYNAMIC_BROKER, False)
    assert synonyms == [("message.max.bytes", "2000", DYNAMIC_BROKER), ("message.max.bytes", "1048588", DEFAULT)]
    stored = json.loads((broker.data_dir / "logbroker-metadata.json").read_text())["brokers"]
    assert stored == {"0": {"message.max.bytes": "2000"}}

    admin.cache_clear()
    gc.collect()
    broker.stop()
    broker.start()
    assert produce_one(broker.bootstrap, topic, 3000).code() == KafkaError.MSG_SIZE_TOO_LARGE

    set_broker_config(broker.bootstrap, "message.max.bytes", None)
    assert produce_one(broker.bootstrap, topic, 3000) is None
    assert describe_raw(broker.bootstrap, "0", ["message.max.bytes"])["message.max.bytes"][:2] == ("1048588", DEFAULT)


def test_cluster_default_retention_applies_to_topics_without_their_own(broker):
    """log.retention.ms set as the cluster default deletes old segments of a topic with no
    retention of its own; a topic with its own retention.ms keeps its records."""
    plain, own = f"plain-{uuid.uuid4().hex[:8]}", f"own-{uuid.uuid4().hex[:8]}"
    futures = admin(broker.bootstrap).create_topics([
        NewTopic(plain, 1, 1, config={"segment.bytes": "1024"}),
        NewTopic(own, 1, 1, config={"segment.bytes": "1024", "retention.ms": "604800000"})])
    for future in futures.values():
        future.result(TIMEOUT_S)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(40):
        for topic in (plain, own):
            producer.produce(topic, b"v" * 100, key=str(i).encode())
        producer.flush(TIMEOUT_S)

    done = configs_tool(broker.bootstrap, "--alter", "--entity-type", "brokers", "--entity-default",
                        "--add-config", "log.retention.ms=1")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Completed updating default config for brokers in the cluster.\n"

    def earliest(topic: str) -> int:
        futures = admin(broker.bootstrap).list_offsets({TP(topic, 0): OffsetSpec.earliest()})
        return next(iter(futures.values())).result(TIMEOUT_S).offset

    assert wait_for(lambda: earliest(plain) > 0, what="old segments of the topic deleted")
    assert earliest(own) == 0
    retention = {c.name: c for c in admin(broker.bootstrap).describe_configs(
        [ConfigResource(ResourceType.TOPIC, plain)])[ConfigResource(ResourceType.TOPIC, plain)].result(TIMEOUT_S).values()}
    assert (retention["retention.ms"].value, retention["retention.ms"].source) == ("1", DYNAMIC_DEFAULT)
    response = request(broker.bootstrap, 32, 4, include_synonyms=True, include_documentation=False, resources=[
        {"resource_type": 2, "resource_name": plain, "configuration_keys": ["retention.ms"]}])
    assert [(s.name, s.value, int(s.source)) for s in response.results[0].configs[0].synonyms] == [
        ("log.retention.ms", "1", DYNAMIC_DEFAULT), ("log.retention.hours", "24", STATIC),
        ("log.retention.hours", "168", DEFAULT)]
    # The default resource lists what is set there, with no per-broker layer.
    assert describe_raw(broker.bootstrap, "") == {"log.retention.ms": (
        "1", DYNAMIC_DEFAULT, False, [("log.retention.ms", "1", DYNAMIC_DEFAULT), ("log.retention.hours", "24", STATIC),
                                      ("log.retention.hours", "168", DEFAULT)])}
    shown = configs_tool(broker.bootstrap, "--describe", "--entity-type", "brokers", "--entity-default")
    assert shown.stdout == ("Default configs for brokers in the cluster are:\n  log.retention.ms=1 sensitive=false "
                            "synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=1, "
                            "STATIC_BROKER_CONFIG:log.retention.hours=24, DEFAULT_CONFIG:log.retention.hours=168}\n")


def test_a_per_broker_value_beats_the_cluster_default(broker):
    assert alter_raw(broker.bootstrap, "", {"log.segment.bytes": "2000000"}) == (0, None)
    assert alter_raw(broker.bootstrap, "0", {"log.segment.bytes": "3000000"}) == (0, None)

    value, source, _, synonyms = describe_raw(broker.bootstrap, "0", ["log.segment.bytes"])["log.segment.bytes"]
    assert (value, source) == ("3000000", DYNAMIC_BROKER)
    assert synonyms == [("log.segment.bytes", "3000000", DYNAMIC_BROKER), ("log.segment.bytes", "2000000", DYNAMIC_DEFAULT),
                        ("log.segment.bytes", "1073741824", DEFAULT)]
    # AlterConfigs replaces the resource's whole set: this broker's own value goes.
    assert alter_raw(broker.bootstrap, "0", {}) == (0, None)
    assert describe_raw(broker.bootstrap, "0", ["log.segment.bytes"])["log.segment.bytes"][:2] == ("2000000", DYNAMIC_DEFAULT)


@pytest.mark.parametrize(("configs", "message"), [
    ({"message.max.bytes": "5000", "broker.id": "3"}, "Cannot update these configs dynamically: Set(broker.id)"),
    ({"message.max.bytes": "5000", "log.retention.hours": "1"},
     "Cannot update these configs dynamically: Set(log.retention.hours)"),
    ({"message.max.bytes": "5000", "ssl.keystore.location": "/k.pem"},
     "These security configs can be dynamically updated only per-listener using the listener prefix: "
     "Set(ssl.keystore.location)"),
    ({"message.max.bytes": "5000", "no.such.config": "1"}, "Unknown Dynamic Configuration 'no.such.config'."),
    ({"message.max.bytes": "many"}, "Invalid value 'many' for configuration message.max.bytes: "
                                     "expected an integer between -2147483648 and 2147483647"),
    ({"message.max.bytes": "-1"}, "Invalid value '-1' for configuration message.max.bytes: must be at least 0"),
    ({"max.connections.per.ip": "0"}, "Invalid dynamic configuration: Invalid value 0 for configuration "
                                      "max.connections.per.ip: it can be 0 only when max.connections.per.ip.overrides is set"),
    ({"log.cleaner.threads": "3"}, "Invalid dynamic configuration: Log cleaner threads cannot be increased to more "
                                   "than double the current value 1"),
])
def test_bad_input_is_refused_and_the_old_value_kept(broker, configs, message):
    assert alter_raw(broker.bootstrap, "0", {"message.max.bytes": "4000"}) == (0, None)

    assert alter_raw(broker.bootstrap, "0", configs) == (INVALID_REQUEST, message)

    current = describe_raw(broker.bootstrap, "0", ["message.max.bytes", "log.cleaner.threads"])
    assert current["message.max.bytes"][:2] == ("4000", DYNAMIC_BROKER)
    assert current["log.cleaner.threads"][:2] == ("1", DEFAULT)
    stored = json.loads((broker.data_dir / "logbroker-metadata.json").read_text())["brokers"]
    assert stored == {"0": {"message.max.bytes": "4000"}}


def test_refusals_of_the_default_resource_and_of_another_broker(broker):
    assert alter_raw(broker.bootstrap, "", {"listener.name.plaintext.ssl.keystore.location": "/k.pem"}) == (
        INVALID_REQUEST, "Cannot update these configs at default cluster level, broker id must be specified: "
                         "Set(listener.name.plaintext.ssl.keystore.location)")
    assert alter_raw(broker.bootstrap, "7", {"message.max.bytes": "5000"}) == (
        INVALID_REQUEST, "Unexpected broker id, expected 0 or empty string, but received 7")
    assert describe_raw(broker.bootstrap, "") == {}


def test_validate_only_checks_and_changes_nothing(broker):
    assert alter_raw(broker.bootstrap, "0", {"message.max.bytes": "2000"}, validate_only=True) == (0, None)
    assert alter_raw(broker.bootstrap, "0", {"broker.id": "2"}, validate_only=True)[0] == INVALID_REQUEST

    assert describe_raw(broker.bootstrap, "0", ["message.max.bytes"])["message.max.bytes"][:2] == ("1048588", DEFAULT)
    assert json.loads((broker.data_dir / "logbroker-metadata.json").read_text())["brokers"] == {}


def test_kafka_python_admin_alters_and_describes_broker_configs(broker):
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=TIMEOUT_S * 1000)
    try:
        result = client.alter_configs([KafkaPythonConfigResource(
            ConfigResourceType.BROKER, "0", {"log.cleaner.backoff.ms": "1000", "max.connections.per.ip": "50"})])
        assert result == {"broker": {"0": "OK"}}
        refused = client.alter_configs([KafkaPythonConfigResource(
            ConfigResourceType.BROKER, "0", {"num.partitions": "4"})], raise_on_unknown=False)
        assert refused == {"broker": {"0": "[Error 42] InvalidRequestError: Cannot update these configs "
                                           "dynamically: Set(num.partitions)"}}
        described = client.describe_configs([KafkaPythonConfigResource(ConfigResourceType.BROKER, "0")],
                                            include_synonyms=True, config_filter="all")
    finally:
        client.close()
    entries = described["broker"]["0"]
    backoff = entries["log.cleaner.backoff.ms"]
    assert (backoff["value"], backoff["config_source"], backoff["read_only"]) == (
        "1000", "DYNAMIC_BROKER_CONFIG", False)
    assert backoff["synonyms"] == [
        {"name": "log.cleaner.backoff.ms", "value": "1000", "source": "DYNAMIC_BROKER_CONFIG"},
        {"name": "log.cleaner.backoff.ms", "value": "15000", "source": "DEFAULT_CONFIG"}]
    assert (entries["num.partitions"]["value"], entries["num.partitions"]["read_only"]) == ("1", True)


def test_a_lowered_max_connections_per_ip_applies_to_new_connections(broker):
    assert alter_raw(broker.bootstrap, "0", {"max.connections.per.ip": "1"}) == (0, None)

    first = wait_for(lambda: served(broker.bootstrap), what="one connection served")
    try:
        second = socket.create_connection((broker.host, broker.port), timeout=TIMEOUT_S)
        with second:
            assert second.recv(1) == b""  # closed by the broker at once: the IP has its one
    finally:
        first.close()
    assert alter_raw_when_served(broker.bootstrap, {"max.connections.per.ip": "2"}) == (0, None)
    sockets = [wait_for(lambda: served(broker.bootstrap), what="a connection served") for _ in range(2)]
    for sock in sockets:
        sock.close()


def served(bootstrap: str) -> socket.socket | None:
    """A connection the broker answered an ApiVersions v0 on (kept open), or None."""
    host, port = bootstrap.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=TIMEOUT_S)
    sock.sendall(struct.pack(">ihhih", 10, 18, 0, 1, 0))
    try:
        if len(sock.recv(4)) == 4:
            sock.recv(65536)
            return sock
    except OSError:
        pass
    sock.close()
    return None


def alter_raw_when_served(bootstrap: str, configs: dict[str, str]):
    """alter_raw, retried while the broker still counts an earlier connection of this IP."""
    def attempt():
        try:
            return alter_raw(bootstrap, "0", configs)
        except (AssertionError, OSError):
            return None
    return wait_for(attempt, what="the alter request served")


def test_incremental_append_and_subtract_start_from_the_effective_value(broker):
    def change(op, value):
        return alter_incremental(broker.bootstrap, "0", [("log.cleanup.policy", op, value)])

    assert change(2, "compact") == (0, None)  # APPEND to the default "delete"
    assert describe_raw(broker.bootstrap, "0", ["log.cleanup.policy"])["log.cleanup.policy"][:2] == (
        "delete,compact", DYNAMIC_BROKER)
    assert change(3, "delete") == (0, None)  # SUBTRACT
    assert describe_raw(broker.bootstrap, "0", ["log.cleanup.policy"])["log.cleanup.policy"][:2] == (
        "compact", DYNAMIC_BROKER)
    assert alter_incremental(broker.bootstrap, "0", [("message.max.bytes", 2, "5")]) == (
        INVALID_REQUEST, "Config value append is not allowed for config key: message.max.bytes")
    assert alter_incremental(broker.bootstrap, "0", [("log.cleanup.policy", 2, "bogus")]) == (
        INVALID_REQUEST, "Invalid value 'compact,bogus' for configuration log.cleanup.policy: "
                         "must be one of delete, compact")


def alter_incremental(bootstrap: str, resource: str, ops: list[tuple[str, int, str | None]]):
    """IncrementalAlterConfigs v1 for one BROKER resource: (error code, message)."""
    response = request(bootstrap, 44, 1, validate_only=False, resources=[{
        "resource_type": 4, "resource_name": resource,
        "configs": [{"name": k, "config_operation": op, "value": v} for k, op, v in ops]}])
    result = response.responses[0]
    return int(result.error_code), result.error_message


def test_stored_configs_that_cannot_be_dynamic_are_dropped_at_startup(broker):
    broker.stop()
    path = broker.data_dir / "logbroker-metadata.json"
    data = json.loads(path.read_text())
    data["brokers"] = {"0": {"message.max.bytes": "3000", "broker.id": "5"}, "<default>": {"log.segment.bytes": "x"}}
    path.write_text(json.dumps(data))

    broker.start()

    log = broker.new_log_text()
    assert "Dynamic broker config broker.id will be ignored: Cannot update these configs dynamically: Set(broker.id)" in log
    assert "Dynamic default cluster config log.segment.bytes will be ignored: Invalid value 'x'" in log
    current = describe_raw(broker.bootstrap, "0", ["message.max.bytes", "broker.id", "log.segment.bytes"])
    assert current["message.max.bytes"][:2] == ("3000", DYNAMIC_BROKER)
    assert current["broker.id"][0] == "0"
    assert current["log.segment.bytes"][:2] == ("1073741824", DEFAULT)


def test_a_lowered_producer_id_expiration_forgets_idle_producers(broker):
    topic = f"t-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
    producer.produce(topic, b"v")
    assert producer.flush(TIMEOUT_S) == 0

    def active_producers() -> list[int]:
        response = request(broker.bootstrap, 61, 0, topics=[{"name": topic, "partition_indexes": [0]}])
        partition = response.topics[0].partitions[0]
        assert int(partition.error_code) == 0
        return [int(p.producer_id) for p in partition.active_producers]

    assert len(active_producers()) == 1
    set_broker_config(broker.bootstrap, "producer.id.expiration.ms", "1")

    wait_for(lambda: active_producers() == [], what="the idle producer forgotten")
    assert describe_raw(broker.bootstrap, "0", ["producer.id.expiration.ms"])["producer.id.expiration.ms"][:2] == (
        "1", DYNAMIC_BROKER)
