"""The admin APIs through real clients: CreateTopics, DeleteTopics, CreatePartitions,
DescribeConfigs, AlterConfigs, IncrementalAlterConfigs, DescribeCluster, DeleteRecords,
InitProducerId and OffsetForLeaderEpoch.

confluent-kafka (librdkafka) and kafka-python speak the newest versions we offer; kafka-python
pinned to `api_version=(2, 1)` speaks Kafka 2.1's (CreateTopics v3, DescribeConfigs v2,
AlterConfigs v1, …). What clients cannot send on their own (OffsetForLeaderEpoch, InitProducerId
with a transactional id) goes over a plain socket, encoded with kio.
"""

from __future__ import annotations

import functools
import gc
import io
import socket
import struct
import uuid
import warnings

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as TP
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)
from kafka.admin import ConfigResource as KafkaPythonConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient
from kafka.admin import NewPartitions as KafkaPythonNewPartitions
from kafka.admin import NewTopic as KafkaPythonNewTopic
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from logbroker.protocol import apis
from logbroker.server.responses import build
from logbroker.topic_configs import TOPIC_CONFIGS
from logbroker.testing import BrokerProcess

TIMEOUT_S = 15

# A broker whose server.properties sets some topic defaults, for STATIC_BROKER_CONFIG sources.
STATIC_OVERRIDES = {"log.segment.bytes": "536870912", "log.retention.hours": "24",
                    "num.partitions": "2", "delete.topic.enable": "false"}


@pytest.fixture(scope="module")
def static_broker(tmp_path_factory) -> BrokerProcess:
    process = BrokerProcess(tmp_path_factory.mktemp("static-broker"), overrides=STATIC_OVERRIDES)
    yield process.start()
    drop_clients()
    process.kill()


@pytest.fixture(scope="module", autouse=True)
def _drop_clients_after_module():
    yield
    drop_clients()


@pytest.fixture
def bootstrap(shared_broker) -> str:
    return shared_broker.bootstrap


@functools.cache
def admin(bootstrap: str) -> AdminClient:
    """One AdminClient per broker (a client dropped while its futures wait destroys them)."""
    return AdminClient({"bootstrap.servers": bootstrap})


def drop_clients() -> None:
    """Destroy the cached clients before their broker stops, so they do not log reconnects."""
    admin.cache_clear()
    gc.collect()


def kafka_python_admin(bootstrap: str, **configs) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT_S * 1000, **configs)


def failure(future) -> KafkaError:
    with pytest.raises(KafkaException) as info:
        future.result(timeout=TIMEOUT_S)
    return info.value.args[0]


def create(bootstrap: str, topic: str, partitions: int = 1, config: dict | None = None) -> None:
    futures = admin(bootstrap).create_topics([NewTopic(topic, partitions, 1, config=config or {})])
    futures[topic].result(TIMEOUT_S)


def topic_configs(bootstrap: str, topic: str) -> dict[str, ConfigEntry]:
    futures = admin(bootstrap).describe_configs([ConfigResource(ResourceType.TOPIC, topic)])
    return next(iter(futures.values())).result(TIMEOUT_S)


def overrides(bootstrap: str, topic: str) -> dict[str, str]:
    return {name: entry.value for name, entry in topic_configs(bootstrap, topic).items()
            if entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}


def produce(bootstrap: str, topic: str, count: int, **configs) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, **configs})
    for i in range(count):
        producer.produce(topic, value=b"v%d" % i, partition=0)
    assert producer.flush(TIMEOUT_S) == 0


def request(bootstrap: str, api_key: int, version: int, **fields):
    """Send one request over a fresh socket; the decoded kio response body."""
    body = build(load_request_schema(api_key, version), fields)
    encoded = io.BytesIO()
    entity_writer(type(body))(encoded, body)
    flexible = apis.is_flexible(api_key, version)
    client_id = b"test-admin-apis"
    header = struct.pack(">hhih", api_key, version, 1, len(client_id)) + client_id
    frame = header + (b"\x00" if flexible else b"") + encoded.getvalue()
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=TIMEOUT_S) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        (size,) = struct.unpack(">i", _read_exactly(sock, 4))
        data = _read_exactly(sock, size)
    assert struct.unpack_from(">i", data)[0] == 1  # correlation id
    reader = entity_reader(load_response_schema(api_key, version))
    return reader(memoryview(data), 4 + (1 if flexible else 0))[0]  # empty tagged fields


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    chunks = []
    while n:
        chunk = sock.recv(n)
        assert chunk, "connection closed"
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


# ---- CreateTopics -------------------------------------------------------------------------

def test_create_topics_creates_partitions_with_configs(bootstrap, topic):
    create(bootstrap, topic, partitions=3, config={"retention.ms": "60000"})

    metadata = admin(bootstrap).list_topics(topic, timeout=TIMEOUT_S)
    assert sorted(metadata.topics[topic].partitions) == [0, 1, 2]
    assert overrides(bootstrap, topic) == {"retention.ms": "60000"}


def test_create_topics_answers_partitions_replication_factor_and_every_config(bootstrap, topic):
    client = kafka_python_admin(bootstrap)
    result = client.create_topics({topic: {"num_partitions": 2, "replication_factor": 1,
                                           "configs": {"retention.ms": "60000"}}})
    client.close()

    [created] = result["topics"]
    assert created["error_code"] == 0
    assert (created["num_partitions"], created["replication_factor"]) == (2, 1)
    assert created["topic_id"] not in (None, str(uuid.UUID(int=0)))
    configs = created["configs"]
    assert set(configs) == set(TOPIC_CONFIGS)
    assert configs["retention.ms"]["value"] == "60000"
    assert configs["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert configs["segment.bytes"] == {"value": "1073741824", "read_only": False,
                                        "config_source": "DEFAULT_CONFIG", "is_sensitive": False}


def test_create_topics_without_counts_uses_broker_defaults(static_broker, topic):
    client = kafka_python_admin(static_broker.bootstrap)
    result = client.create_topics([topic])  # num_partitions = replication_factor = -1
    client.close()

    [created] = result["topics"]
    assert (created["error_code"], created["num_partitions"], created["replication_factor"]) == (0, 2, 1)


def test_create_topics_validate_only_creates_nothing(bootstrap, topic):
    futures = admin(bootstrap).create_topics([NewTopic(topic, 2, 1)], validate_only=True)
    assert futures[topic].result(TIMEOUT_S) is None

    assert topic not in admin(bootstrap).list_topics(timeout=TIMEOUT_S).topics


def test_create_existing_topic_is_topic_already_exists(bootstrap, topic):
    create(bootstrap, topic)

    error = failure(admin(bootstrap).create_topics([NewTopic(topic, 1, 1)])[topic])
    assert error.code() == KafkaError.TOPIC_ALREADY_EXISTS


@pytest.mark.parametrize(("new_topic_args", "config", "expected", "message"), [
    ((1, 1), {"retention.ms": "soon"}, KafkaError.INVALID_CONFIG, "retention.ms"),
    ((1, 1), {"no.such.config": "1"}, KafkaError.INVALID_CONFIG, "no.such.config"),
    ((1, 1), {"cleanup.policy": "shred"}, KafkaError.INVALID_CONFIG, "cleanup.policy"),
    ((1, 3), {}, KafkaError.INVALID_REPLICATION_FACTOR, "larger than available brokers"),
])
def test_create_topics_errors_name_the_problem(bootstrap, topic, new_topic_args, config, expected, message):
    error = failure(admin(bootstrap).create_topics([NewTopic(topic, *new_topic_args, config=config)])[topic])

    assert error.code() == expected
    assert message in error.str()
    assert topic not in admin(bootstrap).list_topics(timeout=TIMEOUT_S).topics


def test_create_topics_with_bad_counts_or_names(bootstrap, topic):
    client = kafka_python_admin(bootstrap)
    result = client.create_topics({topic: {"num_partitions": 0, "replication_factor": 1},
                                   "bad name!": {"num_partitions": 1, "replication_factor": 1}},
                                  raise_errors=False)
    client.close()

    codes = {t["name"]: t["error_code"] for t in result["topics"]}
    assert codes == {topic: 37, "bad name!": 17}  # INVALID_PARTITIONS, INVALID_TOPIC_EXCEPTION


def test_create_topics_names_colliding_on_dot_and_underscore(bootstrap, topic):
    create(bootstrap, f"{topic}.x")

    error = failure(admin(bootstrap).create_topics([NewTopic(f"{topic}_x", 1, 1)])[f"{topic}_x"])
    assert error.code() == KafkaError.TOPIC_EXCEPTION
    assert "collides" in error.str()


def test_create_topics_with_one_name_twice_is_invalid_request(bootstrap, topic):
    client = kafka_python_admin(bootstrap)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        result = client.create_topics([KafkaPythonNewTopic(topic, 1, 1), KafkaPythonNewTopic(topic, 2, 1)],
                                      raise_errors=False)
    client.close()

    assert [(t["name"], t["error_code"]) for t in result["topics"]] == [(topic, 42), (topic, 42)]
    assert topic not in admin(bootstrap).list_topics(timeout=TIMEOUT_S).topics


# ---- DeleteTopics -------------------------------------------------------------------------

def test_delete_topics_removes_the_topic(bootstrap, topic):
    create(bootstrap, topic, partitions=2)

    assert admin(bootstrap).delete_topics([topic])[topic].result(TIMEOUT_S) is None

    assert topic not in admin(bootstrap).list_topics(timeout=TIMEOUT_S).topics
    error = failure(admin(bootstrap).delete_topics([topic])[topic])
    assert error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_deleted_topic_can_be_created_again_with_a_new_id(bootstrap, topic):
    client = kafka_python_admin(bootstrap)
    first = client.create_topics({topic: {"num_partitions": 1, "replication_factor": 1}})
    deleted = client.delete_topics([topic])
    second = client.create_topics({topic: {"num_partitions": 3, "replication_factor": 1}})
    client.close()

    assert deleted["topics"][0]["error_code"] == 0
    assert deleted["topics"][0]["topic_id"] == first["topics"][0]["topic_id"]  # v6 answers the id
    assert second["topics"][0]["num_partitions"] == 3
    assert second["topics"][0]["topic_id"] != first["topics"][0]["topic_id"]


def test_delete_topics_when_disabled_is_topic_deletion_disabled(static_broker, topic):
    create(static_broker.bootstrap, topic)

    error = failure(admin(static_broker.bootstrap).delete_topics([topic])[topic])

    assert error.code() == KafkaError.TOPIC_DELETION_DISABLED
    assert topic in admin(static_broker.bootstrap).list_topics(timeout=TIMEOUT_S).topics


# ---- CreatePartitions ---------------------------------------------------------------------

def test_create_partitions_grows_the_topic(bootstrap, topic):
    create(bootstrap, topic, partitions=1)

    assert admin(bootstrap).create_partitions([NewPartitions(topic, 4)])[topic].result(TIMEOUT_S) is None

    metadata = admin(bootstrap).list_topics(topic, timeout=TIMEOUT_S)
    assert sorted(metadata.topics[topic].partitions) == [0, 1, 2, 3]


def test_create_partitions_errors(bootstrap, topic):
    create(bootstrap, topic, partitions=3)
    client = admin(bootstrap)

    def error(new_partitions: NewPartitions) -> int:
        return failure(client.create_partitions([new_partitions])[new_partitions.topic]).code()

    assert error(NewPartitions(topic, 3)) == KafkaError.INVALID_PARTITIONS
    assert error(NewPartitions(topic, 2)) == KafkaError.INVALID_PARTITIONS
    unknown_broker = NewPartitions(topic, 5, replica_assignment=[[7], [0]])
    assert error(unknown_broker) == KafkaError.INVALID_REPLICA_ASSIGNMENT
    assert error(NewPartitions(f"{topic}-missing", 2)) == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert len(client.list_topics(topic, timeout=TIMEOUT_S).topics[topic].partitions) == 3


def test_create_partitions_validate_only_changes_nothing(bootstrap, topic):
    create(bootstrap, topic, partitions=1)

    futures = admin(bootstrap).create_partitions([NewPartitions(topic, 3)], validate_only=True)
    assert futures[topic].result(TIMEOUT_S) is None

    assert len(admin(bootstrap).list_topics(topic, timeout=TIMEOUT_S).topics[topic].partitions) == 1


def test_kafka_2_1_clients_create_describe_grow_and_delete_topics(bootstrap, topic):
    """CreateTopics v3, DescribeConfigs v2, CreatePartitions v1, DeleteTopics v3."""
    client = kafka_python_admin(bootstrap, api_version=(2, 1))
    created = client.create_topics({topic: {"num_partitions": 1, "replication_factor": 1,
                                            "configs": {"retention.ms": "60000"}}})
    described = client.describe_configs(
        [KafkaPythonConfigResource(ConfigResourceType.TOPIC, topic)], include_synonyms=True)
    grown = client.create_partitions({topic: KafkaPythonNewPartitions(3)})
    deleted = client.delete_topics([topic])
    client.close()

    assert [(t["name"], t["error_code"]) for t in created["topics"]] == [(topic, 0)]
    assert described["topic"][topic]["retention.ms"]["value"] == "60000"
    assert described["topic"][topic]["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert [(r.name, r.error_code) for r in grown.results] == [(topic, 0)]
    assert deleted == {"topics": [{"name": topic, "error_code": 0}]}


# ---- DescribeConfigs ----------------------------------------------------------------------

def test_describe_configs_lists_every_topic_config_with_its_source(bootstrap, topic):
    create(bootstrap, topic, config={"retention.ms": "60000", "cleanup.policy": "compact"})

    configs = topic_configs(bootstrap, topic)

    assert set(configs) == set(TOPIC_CONFIGS)
    retention = configs["retention.ms"]
    assert (retention.value, retention.source, retention.is_default) == (
        "60000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value, False)
    assert configs["cleanup.policy"].value == "compact"
    segment = configs["segment.bytes"]
    assert (segment.value, segment.source, segment.is_default) == (
        "1073741824", ConfigSource.DEFAULT_CONFIG.value, True)
    assert {entry.source for name, entry in configs.items()
            if name not in ("retention.ms", "cleanup.policy")} == {ConfigSource.DEFAULT_CONFIG.value}
    assert not any(entry.is_read_only or entry.is_sensitive for entry in configs.values())
    assert configs["max.message.bytes"].value == "1048588"
    assert configs["message.timestamp.type"].value == "CreateTime"


def test_describe_configs_synonyms_types_and_documentation(bootstrap, topic):
    create(bootstrap, topic, config={"cleanup.policy": "compact"})
    client = kafka_python_admin(bootstrap)
    resource = KafkaPythonConfigResource(ConfigResourceType.TOPIC, topic,
                                         configs={"cleanup.policy": None, "segment.bytes": None})
    described = client.describe_configs([resource], include_synonyms=True, config_filter="all")
    client.close()

    configs = described["topic"][topic]
    assert set(configs) == {"cleanup.policy", "segment.bytes"}  # configuration_keys filter
    assert configs["cleanup.policy"]["synonyms"] == [
        {"name": "cleanup.policy", "value": "compact", "source": "DYNAMIC_TOPIC_CONFIG"},
        {"name": "log.cleanup.policy", "value": "delete", "source": "DEFAULT_CONFIG"},
    ]
    assert configs["cleanup.policy"]["config_type"] == "LIST"
    assert configs["segment.bytes"]["config_type"] == "INT"


def test_describe_configs_shows_server_properties_as_static_broker_config(static_broker, topic):
    create(static_broker.bootstrap, topic)

    configs = topic_configs(static_broker.bootstrap, topic)

    segment = configs["segment.bytes"]
    assert (segment.value, segment.source) == ("536870912", ConfigSource.STATIC_BROKER_CONFIG.value)
    assert segment.synonyms["log.segment.bytes"].value in ("536870912", "1073741824")
    # As Kafka: log.retention.hours sets retention.ms, but only log.retention.ms would be listed
    # as its synonym, so the source stays DEFAULT_CONFIG.
    retention = configs["retention.ms"]
    assert (retention.value, retention.source) == ("86400000", ConfigSource.DEFAULT_CONFIG.value)


def test_describe_configs_of_unknown_topic_is_unknown_topic_or_partition(bootstrap, topic):
    futures = admin(bootstrap).describe_configs([ConfigResource(ResourceType.TOPIC, topic)])

    assert failure(next(iter(futures.values()))).code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_describe_broker_configs(static_broker):
    futures = admin(static_broker.bootstrap).describe_configs([ConfigResource(ResourceType.BROKER, "0")])
    configs = next(iter(futures.values())).result(TIMEOUT_S)

    assert (configs["num.partitions"].value, configs["num.partitions"].source) == (
        "2", ConfigSource.STATIC_BROKER_CONFIG.value)
    assert (configs["message.max.bytes"].value, configs["message.max.bytes"].source) == (
        "1048588", ConfigSource.DEFAULT_CONFIG.value)
    assert configs["log.segment.bytes"].value == "536870912"
    assert configs["num.partitions"].is_read_only and configs["broker.id"].is_read_only
    # As Kafka: a key is read-only when none of its synonyms is dynamic (log.retention.ms is).
    assert not configs["log.retention.hours"].is_read_only
    assert not configs["message.max.bytes"].is_read_only and not configs["log.retention.ms"].is_read_only


def test_describe_configs_of_another_broker_is_invalid_request(bootstrap):
    response = request(bootstrap, 32, 4, include_synonyms=False, include_documentation=False,
                       resources=[{"resource_type": 4, "resource_name": "7", "configuration_keys": None},
                                  {"resource_type": 4, "resource_name": "", "configuration_keys": None},
                                  {"resource_type": 99, "resource_name": "x", "configuration_keys": None}])

    assert [(r.error_code, len(r.configs)) for r in response.results] == [(42, 0), (0, 0), (42, 0)]


# ---- AlterConfigs and IncrementalAlterConfigs ---------------------------------------------

def alter(bootstrap: str, topic: str, configs: dict[str, str], **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        futures = admin(bootstrap).alter_configs(
            [ConfigResource(ResourceType.TOPIC, topic, set_config=configs)], **kwargs)
    return next(iter(futures.values()))


def incremental(bootstrap: str, topic: str, *ops: tuple[str, str | None, AlterConfigOpType], **kwargs):
    entries = [ConfigEntry(name, value, incremental_operation=op) for name, value, op in ops]
    futures = admin(bootstrap).incremental_alter_configs(
        [ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries)], **kwargs)
    return next(iter(futures.values()))


def test_alter_configs_replaces_every_override(bootstrap, topic):
    create(bootstrap, topic, config={"retention.ms": "60000", "segment.ms": "3600000"})

    assert alter(bootstrap, topic, {"max.message.bytes": "2000000"}).result(TIMEOUT_S) is None

    assert overrides(bootstrap, topic) == {"max.message.bytes": "2000000"}


def test_alter_configs_validate_only_and_bad_values_change_nothing(bootstrap, topic):
    create(bootstrap, topic, config={"retention.ms": "60000"})

    assert alter(bootstrap, topic, {"retention.ms": "1000"}, validate_only=True).result(TIMEOUT_S) is None
    error = failure(alter(bootstrap, topic, {"retention.ms": "1000", "segment.bytes": "big"}))
    assert error.code() == KafkaError.INVALID_CONFIG
    assert "segment.bytes" in error.str()

    assert overrides(bootstrap, topic) == {"retention.ms": "60000"}


def test_kafka_2_1_alter_configs_keeps_the_overrides_it_read(bootstrap, topic):
    """kafka-python on an AlterConfigs-only broker reads the DYNAMIC_TOPIC_CONFIG entries first
    and sends them back with its change: sources make read-modify-write work."""
    create(bootstrap, topic, config={"retention.ms": "60000"})
    client = kafka_python_admin(bootstrap, api_version=(2, 1))
    resource = KafkaPythonConfigResource(ConfigResourceType.TOPIC, topic, configs={"segment.ms": "3600000"})

    assert client.alter_configs([resource], raise_on_unknown=False) == {"topic": {topic: "OK"}}
    client.close()

    assert overrides(bootstrap, topic) == {"retention.ms": "60000", "segment.ms": "3600000"}


def test_incremental_alter_configs_set_delete_append_subtract(bootstrap, topic):
    create(bootstrap, topic, config={"retention.ms": "60000", "segment.ms": "3600000"})

    incremental(bootstrap, topic,
                ("retention.ms", "120000", AlterConfigOpType.SET),
                ("segment.ms", None, AlterConfigOpType.DELETE),
                ("cleanup.policy", "compact", AlterConfigOpType.APPEND)).result(TIMEOUT_S)
    assert overrides(bootstrap, topic) == {"retention.ms": "120000", "cleanup.policy": "delete,compact"}

    incremental(bootstrap, topic, ("cleanup.policy", "delete", AlterConfigOpType.SUBTRACT)).result(TIMEOUT_S)
    assert overrides(bootstrap, topic) == {"retention.ms": "120000", "cleanup.policy": "compact"}

    incremental(bootstrap, topic, ("retention.ms", "1", AlterConfigOpType.SET),
                validate_only=True).result(TIMEOUT_S)
    assert overrides(bootstrap, topic)["retention.ms"] == "120000"


@pytest.mark.parametrize(("op", "expected", "message"), [
    (("retention.ms", "-5", AlterConfigOpType.SET), KafkaError.INVALID_CONFIG, "retention.ms"),
    (("no.such.config", "1", AlterConfigOpType.SET), KafkaError.INVALID_CONFIG, "no.such.config"),
    (("retention.ms", "1", AlterConfigOpType.APPEND), KafkaError.INVALID_REQUEST, "retention.ms"),
    (("cleanup.policy", "shred", AlterConfigOpType.APPEND), KafkaError.INVALID_CONFIG, "cleanup.policy"),
])
def test_incremental_alter_configs_errors(bootstrap, topic, op, expected, message):
    create(bootstrap, topic, config={"retention.ms": "60000"})

    error = failure(incremental(bootstrap, topic, op))

    assert error.code() == expected
    assert message in error.str()
    assert overrides(bootstrap, topic) == {"retention.ms": "60000"}


# Topic configs Kafka 3.9 has and 4.0 removed: accepted and validated as Kafka 3.9 does,
# described back, no effect, one deprecation WARN line each.
REMOVED_IN_KAFKA_4 = {"message.format.version": "2.8", "message.downconversion.enable": "false",
                      "message.timestamp.difference.max.ms": "86400000"}


def test_kafka_3_configs_removed_in_kafka_4_are_accepted_and_described(shared_broker, topic):
    bootstrap = shared_broker.bootstrap
    create(bootstrap, topic, config=REMOVED_IN_KAFKA_4)
    assert overrides(bootstrap, topic) == REMOVED_IN_KAFKA_4
    produce(bootstrap, topic, 3)
    warnings = [line for line in shared_broker.new_log_text().splitlines()
                if "WARN" in line and f"of topic `{topic}` is deprecated" in line]
    assert [w.split("Topic configuration ")[1].split(" ")[0] for w in warnings] == list(REMOVED_IN_KAFKA_4)

    incremental(bootstrap, topic, ("message.format.version", "3.0-IV1", AlterConfigOpType.SET)).result(TIMEOUT_S)
    assert overrides(bootstrap, topic)["message.format.version"] == "3.0-IV1"
    assert topic_configs(bootstrap, f"{topic}")["message.format.version"].is_default is False


def test_a_bad_message_format_version_is_invalid_config(bootstrap, topic):
    create(bootstrap, topic)
    error = failure(incremental(bootstrap, topic, ("message.format.version", "9.9", AlterConfigOpType.SET)))
    assert error.code() == KafkaError.INVALID_CONFIG
    assert "Version 9.9 is not a valid version" in error.str()
    configs = topic_configs(bootstrap, topic)
    assert (configs["message.format.version"].value, configs["message.format.version"].is_default) == (
        "3.0-IV1", True)


def test_alter_configs_of_unknown_topic_is_unknown_topic_or_partition(bootstrap, topic):
    assert failure(alter(bootstrap, topic, {"retention.ms": "1"})).code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    error = failure(incremental(bootstrap, topic, ("retention.ms", "1", AlterConfigOpType.SET)))
    assert error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_altering_a_read_only_broker_config_is_refused_with_a_reason(bootstrap):
    entries = [ConfigEntry("num.partitions", "3", incremental_operation=AlterConfigOpType.SET)]
    futures = admin(bootstrap).incremental_alter_configs(
        [ConfigResource(ResourceType.BROKER, "0", incremental_configs=entries)])

    error = failure(next(iter(futures.values())))
    assert error.code() == KafkaError.INVALID_REQUEST
    assert error.str() == "Cannot update these configs dynamically: Set(num.partitions)"


# ---- DescribeCluster ----------------------------------------------------------------------

def test_describe_cluster(bootstrap):
    client = kafka_python_admin(bootstrap)
    cluster = client.describe_cluster()
    client.close()

    host, port = bootstrap.rsplit(":", 1)
    # kafka-python 3.0 speaks DescribeCluster v2 (KIP-1073's is_fenced): no broker is fenced here.
    assert cluster["brokers"] == [{"broker_id": 0, "host": host, "port": int(port), "rack": None,
                                   "is_fenced": False}]
    assert cluster["controller_id"] == 0
    assert len(cluster["cluster_id"]) == 22
    assert cluster["cluster_id"] == admin(bootstrap).describe_cluster().result(TIMEOUT_S).cluster_id
    assert "DESCRIBE" in cluster["authorized_operations"]


def test_describe_cluster_without_operations_and_for_controllers(bootstrap):
    response = request(bootstrap, 60, 1, include_cluster_authorized_operations=False, endpoint_type=1)
    assert (response.error_code, response.cluster_authorized_operations) == (0, -2147483648)

    response = request(bootstrap, 60, 1, include_cluster_authorized_operations=False, endpoint_type=2)
    assert response.error_code == 115  # UNSUPPORTED_ENDPOINT_TYPE


# ---- DeleteRecords ------------------------------------------------------------------------

def test_delete_records_moves_the_log_start_offset(bootstrap, topic):
    create(bootstrap, topic)
    produce(bootstrap, topic, 10)
    client = admin(bootstrap)

    deleted = client.delete_records([TP(topic, 0, 4)])
    assert next(iter(deleted.values())).result(TIMEOUT_S).low_watermark == 4

    earliest = client.list_offsets({TP(topic, 0): OffsetSpec.earliest()})
    assert next(iter(earliest.values())).result(TIMEOUT_S).offset == 4
    beyond = client.delete_records([TP(topic, 0, 11)])
    assert failure(next(iter(beyond.values()))).code() == KafkaError.OFFSET_OUT_OF_RANGE
    everything = client.delete_records([TP(topic, 0, -1)])  # -1: up to the high watermark
    assert next(iter(everything.values())).result(TIMEOUT_S).low_watermark == 10


def test_delete_records_errors(bootstrap, topic):
    create(bootstrap, topic, config={"cleanup.policy": "compact"})
    response = request(bootstrap, 21, 2, timeout=5000, topics=[
        {"name": topic, "partitions": [{"partition_index": 0, "offset": 0},
                                       {"partition_index": 5, "offset": 0}]},
        {"name": f"{topic}-missing", "partitions": [{"partition_index": 0, "offset": 0}]}])

    results = [(t.name, p.partition_index, p.error_code, p.low_watermark)
               for t in response.topics for p in t.partitions]
    assert results == [(topic, 0, 44, -1),  # POLICY_VIOLATION: compacted topics keep their records
                       (topic, 5, 3, -1), (f"{topic}-missing", 0, 3, -1)]


def earliest_offset(bootstrap: str, topic: str) -> int:
    earliest = admin(bootstrap).list_offsets({TP(topic, 0): OffsetSpec.earliest()})
    return next(iter(earliest.values())).result(TIMEOUT_S).offset


def test_subtracting_the_last_cleanup_policy_leaves_only_delete_records(tmp_path, topic):
    """KAFKA-19112 (Kafka 4.2): cleanup.policy may be emptied; then nothing is deleted by time or
    size, nothing is compacted, and DeleteRecords alone moves the log start."""
    from logbroker.testing import wait_for

    with BrokerProcess(tmp_path, overrides={"log.retention.check.interval.ms": "100"}) as broker:
        bootstrap = broker.bootstrap
        small = {"segment.bytes": "100", "retention.ms": "1", "file.delete.delay.ms": "0"}
        control = f"{topic}-control"
        create(bootstrap, topic, config={"cleanup.policy": "delete", "retention.ms": "3600000"})
        incremental(bootstrap, topic, ("cleanup.policy", "delete", AlterConfigOpType.SUBTRACT),
                    *((k, v, AlterConfigOpType.SET) for k, v in small.items())).result(TIMEOUT_S)
        entry = topic_configs(bootstrap, topic)["cleanup.policy"]
        assert (entry.value, entry.source) == ("", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
        create(bootstrap, control, config={"cleanup.policy": "delete", **small})
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        for i in range(10):  # a batch per record, a segment per batch
            for name in (topic, control):
                producer.produce(name, value=b"v%d" % i, partition=0,
                                 on_delivery=lambda err, msg: None if err is None else pytest.fail(str(err)))
            assert producer.flush(TIMEOUT_S) == 0
        # The control topic (cleanup.policy=delete) loses its old segments to retention.ms …
        wait_for(lambda: earliest_offset(bootstrap, control) > 0, what="retention of the control topic")
        # … in the same retention passes that leave the empty-policy topic whole.
        assert earliest_offset(bootstrap, topic) == 0
        deleted = admin(bootstrap).delete_records([TP(topic, 0, 6)])
        assert next(iter(deleted.values())).result(TIMEOUT_S).low_watermark == 6
        assert earliest_offset(bootstrap, topic) == 6
        drop_clients()


# ---- InitProducerId -----------------------------------------------------------------------

def test_idempotent_producer_gets_a_producer_id(bootstrap, topic):
    create(bootstrap, topic)

    produce(bootstrap, topic, 3, **{"enable.idempotence": True})

    end = admin(bootstrap).list_offsets({TP(topic, 0): OffsetSpec.latest()})
    assert next(iter(end.values())).result(TIMEOUT_S).offset == 3


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_init_producer_id_hands_out_new_ids(bootstrap, version):
    first = request(bootstrap, 22, version, transactional_id=None, transaction_timeout=60000)
    second = request(bootstrap, 22, version, transactional_id=None, transaction_timeout=60000)

    assert (first.error_code, first.producer_epoch, second.error_code, second.producer_epoch) == (0, 0, 0, 0)
    assert 0 <= first.producer_id < second.producer_id


def test_init_producer_id_epoch_bump_gets_a_fresh_id(bootstrap):
    first = request(bootstrap, 22, 4, transactional_id=None, transaction_timeout=60000)
    bumped = request(bootstrap, 22, 4, transactional_id=None, transaction_timeout=60000,
                     producer_id=first.producer_id, producer_epoch=first.producer_epoch)

    assert (bumped.error_code, bumped.producer_epoch) == (0, 0)
    assert bumped.producer_id > first.producer_id
    half = request(bootstrap, 22, 4, transactional_id=None, transaction_timeout=60000,
                   producer_id=first.producer_id, producer_epoch=-1)
    assert (half.error_code, half.producer_id) == (42, -1)  # INVALID_REQUEST


def test_init_producer_id_for_transactions_bumps_the_epoch(broker):
    # A fresh broker: on the session's, another module's transactions may have made
    # __transaction_state already (which of them ran before depends on the xdist worker).
    bootstrap = broker
    early = request(bootstrap, 22, 4, transactional_id="tx-1", transaction_timeout=60000)
    assert early.error_code == 16  # NOT_COORDINATOR: __transaction_state comes with FindCoordinator
    found = request(bootstrap, 10, 3, key="tx-1", key_type=1)
    assert found.error_code == 0
    first = request(bootstrap, 22, 4, transactional_id="tx-1", transaction_timeout=60000)
    second = request(bootstrap, 22, 4, transactional_id="tx-1", transaction_timeout=60000)

    assert (first.error_code, first.producer_epoch) == (0, 0)
    assert (second.error_code, second.producer_id, second.producer_epoch) == (0, first.producer_id, 1)
    too_long = request(bootstrap, 22, 4, transactional_id="tx-1", transaction_timeout=900_001)
    assert too_long.error_code == 50  # INVALID_TRANSACTION_TIMEOUT


# ---- OffsetForLeaderEpoch -----------------------------------------------------------------

def leader_epoch(bootstrap: str, topic: str) -> int:
    response = request(bootstrap, 3, 12, topics=[{"name": topic, "topic_id": bytes(16)}],
                       allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    return response.topics[0].partitions[0].leader_epoch


@pytest.mark.parametrize("version", [2, 3, 4])
def test_offset_for_leader_epoch(bootstrap, topic, version):
    create(bootstrap, topic)
    produce(bootstrap, topic, 5)
    epoch = leader_epoch(bootstrap, topic)

    def ask(*partitions, name=topic):
        response = request(bootstrap, 23, version, replica_id=-1, topics=[
            {"topic": name, "partitions": [{"partition": p, "current_leader_epoch": current,
                                            "leader_epoch": wanted} for p, current, wanted in partitions]}])
        return [(e.error_code, e.leader_epoch, e.end_offset) for e in response.topics[0].partitions]

    assert ask((0, epoch, epoch), (0, -1, epoch), (0, epoch, epoch + 5)) == [
        (0, epoch, 5), (0, epoch, 5), (0, -1, -1)]
    assert ask((0, epoch + 1, epoch)) == [(75, -1, -1)]  # UNKNOWN_LEADER_EPOCH: newer than ours
    if epoch > 0:
        assert ask((0, epoch - 1, epoch)) == [(74, -1, -1)]  # FENCED_LEADER_EPOCH
    assert ask((3, -1, epoch)) == [(3, -1, -1)]
    assert ask((0, -1, 0), name=f"{topic}-missing") == [(3, -1, -1)]
