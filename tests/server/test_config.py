"""KafkaConfig: Kafka's server.properties keys, defaults, warnings and errors."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from logbroker.server import properties
from logbroker.server.config import (
    BROKER_CONFIGS,
    KAFKA_ONLY_CONFIGS,
    LOG_CONFIG_SYNONYMS,
    ConfigError,
    ConfigSource,
    Endpoint,
    KafkaConfig,
)
from logbroker.topic_configs import LONG_MAX, TOPIC_CONFIGS

STOCK = Path(__file__).parent.parent / "fixtures" / "server.properties"  # Kafka 3.9's, ZooKeeper mode
# Kafka 4.1's config/server.properties: KRaft only, a combined broker and controller.
STOCK_KAFKA_4 = Path(__file__).parent.parent / "fixtures" / "server-kafka-4.1.properties"


def config(**props: object) -> KafkaConfig:
    return KafkaConfig.from_props({k.replace("_", "."): v for k, v in props.items()},
                                  log_warnings=False)


# ---- Kafka's stock server.properties ------------------------------------------------------

def test_stock_server_properties_loads_with_one_warning_per_unused_key(caplog):
    caplog.set_level(logging.WARNING, logger="kafka.server.KafkaConfig")
    cfg = KafkaConfig.from_file(STOCK)
    expected = ["Kafka config num.network.threads is not used by logbroker; ignoring it",
                "Kafka config num.io.threads is not used by logbroker; ignoring it"]
    assert list(cfg.warnings) == expected
    assert [r.getMessage() for r in caplog.records] == expected
    assert all(r.levelno == logging.WARNING for r in caplog.records)


def test_stock_server_properties_values():
    cfg = KafkaConfig.from_file(STOCK, log_warnings=False)
    assert cfg.broker_id == 0
    assert cfg.log_dirs == ("/tmp/kafka-logs",)
    assert cfg.num_partitions == 1
    assert cfg.socket_request_max_bytes == 104_857_600
    assert cfg.offsets_topic_replication_factor == 1
    assert cfg.transaction_state_log_min_isr == 1
    assert cfg.log_retention_ms == 168 * 3_600_000
    assert cfg.zookeeper_connect == "localhost:2181"
    assert cfg.zookeeper_connection_timeout_ms == 18_000
    assert cfg.group_initial_rebalance_delay_ms == 0
    assert cfg.listeners == (Endpoint("PLAINTEXT", "127.0.0.1", 9092),)


def test_stock_file_with_its_commented_listener_enabled_listens_on_every_interface():
    cfg = KafkaConfig.from_file(STOCK, ["listeners=PLAINTEXT://:9092"], log_warnings=False)
    assert cfg.listeners == (Endpoint("PLAINTEXT", "", 9092),)
    assert cfg.advertised_listeners == cfg.listeners


def test_kafka_4_stock_server_properties_loads_with_one_warning_per_unused_key():
    cfg = KafkaConfig.from_file(STOCK_KAFKA_4, log_warnings=False)
    assert list(cfg.warnings) == [
        f"Kafka config {key} is not used by logbroker; ignoring it" for key in (
            "process.roles", "controller.quorum.bootstrap.servers", "num.network.threads",
            "num.io.threads")] + [
        "Listener CONTROLLER is a KRaft controller listener (controller.listener.names); "
        "logbroker has no KRaft controller and does not listen on port 9093"]


def test_kafka_4_stock_server_properties_values():
    cfg = KafkaConfig.from_file(STOCK_KAFKA_4, log_warnings=False)
    assert cfg.broker_id == 1  # node.id
    assert cfg.listeners == (Endpoint("PLAINTEXT", "", 9092),)
    assert cfg.advertised_listeners == (Endpoint("PLAINTEXT", "localhost", 9092),)
    assert cfg.inter_broker_listener_name == "PLAINTEXT"
    assert cfg.log_dirs == ("/tmp/kraft-combined-logs",)
    assert cfg.offsets_topic_replication_factor == 1
    assert cfg.zookeeper_connect is None


def test_node_id_and_broker_id_must_agree():
    assert KafkaConfig({"node.id": "3", "broker.id": "3"}, log_warnings=False).broker_id == 3
    with pytest.raises(ConfigError, match="broker.id: must be equal to node.id"):
        KafkaConfig({"node.id": "3", "broker.id": "4"}, log_warnings=False)


@pytest.mark.parametrize("stock", [STOCK, STOCK_KAFKA_4], ids=["kafka-3.9", "kafka-4.1"])
def test_stock_server_properties_start_a_broker_clients_use(request, tmp_path, stock):
    """Each stock file as it is, but for the addresses: a free port, a temp data dir, and for
    Kafka 3.9's (ZooKeeper mode) the test session's ZooKeeper."""
    import uuid

    from confluent_kafka import Consumer, Producer

    from logbroker.testing import BrokerProcess

    overrides = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "data")}
    if stock is STOCK:
        zookeeper = request.getfixturevalue("logbroker_zookeeper")
        overrides["zookeeper.connect"] = f"{zookeeper.connect_string}/stock-{uuid.uuid4().hex[:8]}"
    config_file = tmp_path / "server.properties"
    config_file.write_text(stock.read_text().replace("\nadvertised.listeners=", "\n#advertised.listeners="))
    with BrokerProcess(tmp_path, config_file=config_file, overrides=overrides) as broker:
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        producer.produce("stock", b"hello", partition=0)
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g",
                             "auto.offset.reset": "earliest"})
        try:
            consumer.subscribe(["stock"])
            msg = None
            for _ in range(100):
                msg = consumer.poll(0.3)
                if msg is not None and msg.error() is None:
                    break
            assert msg is not None and msg.value() == b"hello"
        finally:
            consumer.close()


# ---- defaults -----------------------------------------------------------------------------

def test_defaults_are_kafkas_except_the_embedded_ones():
    cfg = KafkaConfig({}, log_warnings=False)
    assert cfg.warnings == ()
    assert cfg.broker_id == 0
    assert cfg.listeners == (Endpoint("PLAINTEXT", "127.0.0.1", 9092),)
    assert cfg.inter_broker_listener_name == "PLAINTEXT"
    assert cfg.log_dirs == () and not cfg.log_dirs_configured
    assert cfg.zookeeper_connect is None
    assert cfg.zookeeper_session_timeout_ms == 18_000
    assert cfg.offsets_topic_num_partitions == 50
    assert cfg.offsets_topic_replication_factor == 3
    assert cfg.offsets_retention_minutes == 10_080
    assert cfg.group_min_session_timeout_ms == 6000
    assert cfg.group_max_session_timeout_ms == 1_800_000
    assert cfg.replica_lag_time_max_ms == 30_000
    assert cfg.replica_high_watermark_checkpoint_interval_ms == 5000
    assert cfg.log_retention_check_interval_ms == 300_000
    assert cfg.log_flush_offset_checkpoint_interval_ms == 60_000
    assert cfg.log_flush_interval_ms == LONG_MAX
    assert cfg.log_retention_ms == 604_800_000
    assert cfg.log_roll_ms == 604_800_000
    assert cfg.auto_create_topics_enable and cfg.delete_topic_enable
    assert not cfg.unclean_leader_election_enable
    assert cfg.producer_id_expiration_ms == 86_400_000
    assert cfg.queued_max_requests == 500
    assert cfg.connections_max_idle_ms == 600_000
    assert cfg.metrics_port is None


def test_default_log_config_without_broker_keys_is_kafkas_topic_defaults():
    from logbroker.storage.log_config import LogConfig
    assert KafkaConfig({}, log_warnings=False).default_log_config() == LogConfig.defaults()


def test_default_log_config_takes_every_broker_synonym():
    cfg = config(log_segment_bytes="1048576", message_max_bytes="2000000",
                 log_cleanup_policy="compact, delete", min_insync_replicas="2",
                 log_index_interval_bytes="100", log_message_timestamp_type="LogAppendTime",
                 log_retention_bytes="5000", compression_type="zstd",
                 log_cleaner_delete_retention_ms="10", log_segment_delete_delay_ms="0",
                 unclean_leader_election_enable="true", log_flush_interval_messages="1")
    log_config = cfg.default_log_config()
    assert log_config.segment_bytes == 1_048_576
    assert log_config.max_message_bytes == 2_000_000
    assert log_config.cleanup_policy == ["compact", "delete"]
    assert log_config.min_insync_replicas == 2
    assert log_config.index_interval_bytes == 100
    assert log_config.log_append_time
    assert log_config.retention_bytes == 5000
    assert log_config.compression_type == "zstd"
    assert log_config.delete_retention_ms == 10
    assert log_config.file_delete_delay_ms == 0
    assert log_config.unclean_leader_election_enable
    assert log_config.flush_messages == 1


def test_every_topic_config_with_a_broker_synonym_is_an_implemented_broker_key():
    for name, definition in TOPIC_CONFIGS.items():
        if definition.broker_synonym:
            assert definition.broker_synonym in BROKER_CONFIGS
            assert LOG_CONFIG_SYNONYMS[name][0] == (definition.broker_synonym, 1)


def test_each_implemented_key_is_a_typed_attribute_and_not_also_kafka_only():
    assert not BROKER_CONFIGS.keys() & KAFKA_ONLY_CONFIGS
    annotated = set(KafkaConfig.__annotations__)
    assert {name.replace(".", "_") for name in BROKER_CONFIGS} == annotated


# ---- time synonyms ------------------------------------------------------------------------

@pytest.mark.parametrize(("props", "retention_ms"), [
    ({"log.retention.hours": "1"}, 3_600_000),
    ({"log.retention.minutes": "2", "log.retention.hours": "1"}, 120_000),
    ({"log.retention.ms": "5", "log.retention.minutes": "2", "log.retention.hours": "1"}, 5),
    ({"log.retention.hours": "-1"}, -1),
    ({"log.retention.ms": "-20"}, -1),
    ({"log.retention.minutes": "-3"}, -1),
])
def test_retention_ms_beats_minutes_beats_hours(props, retention_ms):
    cfg = KafkaConfig(props, log_warnings=False)
    assert cfg.log_retention_ms == retention_ms
    assert cfg.default_log_config().retention_ms == retention_ms


def test_zero_retention_is_refused():
    with pytest.raises(ConfigError, match="log.retention.ms: must be unlimited \\(-1\\) or at least 1"):
        config(log_retention_minutes="0")


def test_roll_and_jitter_ms_beat_hours():
    cfg = config(log_roll_hours="2", log_roll_jitter_hours="1")
    assert (cfg.log_roll_ms, cfg.log_roll_jitter_ms) == (7_200_000, 3_600_000)
    cfg = config(log_roll_hours="2", log_roll_ms="1000", log_roll_jitter_hours="1",
                 log_roll_jitter_ms="10")
    assert (cfg.log_roll_ms, cfg.log_roll_jitter_ms) == (1000, 10)
    assert cfg.default_log_config().segment_ms == 1000
    assert cfg.default_log_config().segment_jitter_ms == 10


def test_flush_interval_falls_back_to_the_scheduler_interval():
    assert config(log_flush_scheduler_interval_ms="2000").default_log_config().flush_ms == 2000
    cfg = config(log_flush_scheduler_interval_ms="2000", log_flush_interval_ms="50")
    assert cfg.log_flush_interval_ms == 50
    assert cfg.log_flush_scheduler_interval_ms == 2000


def test_zookeeper_connection_timeout_defaults_to_the_session_timeout():
    assert config(zookeeper_session_timeout_ms="9000").zookeeper_connection_timeout_ms == 9000
    cfg = config(zookeeper_session_timeout_ms="9000", zookeeper_connection_timeout_ms="100")
    assert cfg.zookeeper_connection_timeout_ms == 100


def test_log_dirs_beats_log_dir():
    assert config(log_dir="/a").log_dirs == ("/a",)
    assert config(log_dir="/a", log_dirs="/b, /c").log_dirs == ("/b", "/c")


def test_with_log_dirs_sets_the_directory_the_caller_chose(tmp_path):
    cfg = KafkaConfig.from_props({"num.io.threads": "8"}, log_warnings=False)
    chosen = cfg.with_log_dirs([tmp_path])
    assert chosen.log_dirs == (str(tmp_path),) and chosen.log_dirs_configured
    assert chosen.warnings == cfg.warnings


# ---- warnings -----------------------------------------------------------------------------

def test_misspelt_key_gets_one_warning_with_the_closest_key():
    cfg = KafkaConfig({"log.retenton.hours": "1"}, log_warnings=False)
    assert cfg.warnings == ("Unknown config log.retenton.hours was supplied; ignoring it "
                            "(did you mean log.retention.hours?)",)
    assert cfg.log_retention_ms == 604_800_000


def test_topic_key_in_server_properties_suggests_its_broker_synonym():
    cfg = KafkaConfig({"retention.ms": "1"}, log_warnings=False)
    assert cfg.warnings[0].endswith("(did you mean log.retention.ms?)")


def test_unrelated_unknown_key_gets_a_warning_without_suggestion():
    cfg = KafkaConfig({"favourite.colour": "blue"}, log_warnings=False)
    assert cfg.warnings == ("Unknown config favourite.colour was supplied; ignoring it",)


@pytest.mark.parametrize("key", ["num.io.threads", "ssl.keystore.password", "process.roles",
                                 "listener.name.internal.ssl.keystore.password", "password.encoder.secret",
                                 "remote.log.reader.threads", "num.replica.fetchers"])
def test_kafka_keys_we_do_not_use_are_accepted_with_one_warning(key):
    cfg = KafkaConfig({key: "whatever, not even checked"}, log_warnings=False)
    assert cfg.warnings == (f"Kafka config {key} is not used by logbroker; ignoring it",)


@pytest.mark.parametrize(("key", "value"), [("log.message.format.version", "2.8"),
                                            ("log.message.format.version", "0.10.2-IV0"),
                                            ("log.message.downconversion.enable", "false"),
                                            ("log.message.timestamp.difference.max.ms", "1000")])
def test_kafka_3_keys_removed_in_kafka_4_are_accepted_with_one_deprecation_warning(key, value):
    cfg = KafkaConfig({key: value}, log_warnings=False)
    [warning] = cfg.warnings
    assert warning.startswith(f"Broker configuration {key} with value {value} is deprecated and "
                              f"was removed in Apache Kafka 4.0; ")
    topic_key = key.removeprefix("log.")
    assert cfg.default_log_config().to_props()[topic_key] == value


def test_message_format_version_is_validated_as_kafka_does():
    with pytest.raises(ConfigError, match="log.message.format.version: Version 3.99 is not a valid version"):
        KafkaConfig({"log.message.format.version": "3.99"}, log_warnings=False)
    assert KafkaConfig({"log.message.format.version": "2.8.1"}, log_warnings=False).warnings


# ---- malformed values ---------------------------------------------------------------------

@pytest.mark.parametrize(("key", "value", "message"), [
    ("log.segment.bytes", "abc",
     "Invalid value 'abc' for configuration log.segment.bytes: expected an integer between "
     "-2147483648 and 2147483647"),
    ("log.segment.bytes", "3000000000",
     "Invalid value '3000000000' for configuration log.segment.bytes: expected an integer "
     "between -2147483648 and 2147483647"),
    ("log.segment.bytes", "10",
     "Invalid value '10' for configuration log.segment.bytes: must be at least 14"),
    ("num.partitions", "0", "Invalid value '0' for configuration num.partitions: must be at least 1"),
    ("auto.create.topics.enable", "yes",
     "Invalid value 'yes' for configuration auto.create.topics.enable: expected true or false"),
    ("log.cleanup.policy", "compact,forever",
     "Invalid value 'compact,forever' for configuration log.cleanup.policy: must be one of "
     "delete, compact"),
    ("log.cleaner.io.buffer.load.factor", "high",
     "Invalid value 'high' for configuration log.cleaner.io.buffer.load.factor: expected a number"),
    ("offsets.topic.replication.factor", "40000",
     "Invalid value '40000' for configuration offsets.topic.replication.factor: expected an "
     "integer between -32768 and 32767"),
    ("broker.id", "-1",
     "Invalid value '-1' for configuration broker.id: must be at least 0"),
    ("log.retention.ms", "", "Invalid value '' for configuration log.retention.ms: expected an "
     "integer between -9223372036854775808 and 9223372036854775807"),
    ("compression.type", "brotli",
     "Invalid value 'brotli' for configuration compression.type: must be one of producer, "
     "uncompressed, gzip, snappy, lz4, zstd"),
])
def test_malformed_value_is_a_startup_error_naming_the_key(key, value, message):
    with pytest.raises(ConfigError) as excinfo:
        KafkaConfig({key: value}, log_warnings=False)
    assert str(excinfo.value) == message


def test_values_are_trimmed_as_kafka_trims_them():
    cfg = config(num_partitions=" 3  ", auto_create_topics_enable=" FALSE ")
    assert cfg.num_partitions == 3 and cfg.auto_create_topics_enable is False


def test_typed_values_are_accepted_from_code():
    cfg = KafkaConfig({"num.partitions": 4, "delete.topic.enable": False,
                       "log.dirs": ["/x", "/y"], "broker.rack": None}, log_warnings=False)
    assert (cfg.num_partitions, cfg.delete_topic_enable, cfg.log_dirs) == (4, False, ("/x", "/y"))
    assert cfg.originals == {"num.partitions": "4", "delete.topic.enable": "false",
                             "log.dirs": "/x,/y"}


def test_missing_config_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="Cannot read config file .*missing.properties"):
        KafkaConfig.from_file(tmp_path / "missing.properties")


# ---- overrides ----------------------------------------------------------------------------

def test_overrides_apply_on_top_of_the_file():
    cfg = KafkaConfig.from_file(STOCK, ["num.partitions=6", "log.dirs=/data/a,/data/b",
                                        "zookeeper.connect="], log_warnings=False)
    assert cfg.num_partitions == 6
    assert cfg.log_dirs == ("/data/a", "/data/b")
    assert cfg.zookeeper_connect == ""


def test_override_value_may_contain_equals_signs():
    cfg = KafkaConfig.from_props({}, ["broker.rack=a=b"], log_warnings=False)
    assert cfg.broker_rack == "a=b"


def test_override_without_equals_sign_is_refused():
    with pytest.raises(ConfigError, match="Invalid override 'num.partitions': expected key=value"):
        KafkaConfig.from_props({}, ["num.partitions"])


# ---- listeners ----------------------------------------------------------------------------

def test_listeners_with_names_of_their_own():
    cfg = config(listeners="INTERNAL://:9092, external://[::1]:9093",
                 advertised_listeners="INTERNAL://broker1:9092,EXTERNAL://broker1.example.com:19093",
                 listener_security_protocol_map="INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL",
                 inter_broker_listener_name="internal")
    assert cfg.listeners == (Endpoint("INTERNAL", "", 9092), Endpoint("EXTERNAL", "::1", 9093))
    assert [str(e) for e in cfg.listeners] == ["INTERNAL://:9092", "EXTERNAL://[::1]:9093"]
    name, host, port = cfg.advertised_listeners[1]
    assert (name, host, port) == ("EXTERNAL", "broker1.example.com", 19093)
    assert cfg.listener_security_protocol_map == {"INTERNAL": "PLAINTEXT", "EXTERNAL": "SASL_SSL"}
    assert cfg.inter_broker_listener_name == "INTERNAL"


@pytest.mark.parametrize(("props", "message"), [
    ({"listeners": "localhost:9092"}, "expected listener_name://host:port entries"),
    ({"listeners": "PLAINTEXT://h:99999"}, "port 99999 must be between 0 and 65535"),
    ({"listeners": "BOGUS://h:1"}, "listener BOGUS has no security protocol"),
    ({"listeners": "PLAINTEXT://a:1,PLAINTEXT://b:2"}, "each listener must have a different name"),
    ({"listeners": "PLAINTEXT://a:1,SSL://b:1"}, "each listener must have a different port"),
    ({"listeners": ""}, "expected at least one listener_name://host:port"),
    ({"advertised.listeners": "PLAINTEXT://0.0.0.0:9092"}, "0.0.0.0 is not routable"),
    ({"advertised.listeners": "SSL://h:9093"}, "listener names must be among those of listeners"),
    ({"listeners": "A://:1", "listener.security.protocol.map": "A:PLAINTEXT"},
     "inter.broker.listener.name: must be a listener name of advertised.listeners"),
    ({"listener.security.protocol.map": "PLAINTEXT:TLS"}, "expected listener_name:protocol"),
    ({"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "PLAINTEXT"},
     "Only one of inter.broker.listener.name and security.inter.broker.protocol may be set"),
])
def test_bad_listener_configs_are_refused(props, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        KafkaConfig(props, log_warnings=False)


# ---- DescribeConfigs ----------------------------------------------------------------------

def test_describe_lists_every_key_with_value_and_source():
    cfg = config(num_partitions="3", num_io_threads="8", ssl_keystore_password="secret",
                 mystery_key="x")
    entries = {e.name: e for e in cfg.describe()}
    assert entries["num.partitions"].value == "3"
    assert entries["num.partitions"].source == ConfigSource.STATIC_BROKER_CONFIG
    assert entries["log.segment.bytes"].value == "1073741824"
    assert entries["log.segment.bytes"].source == ConfigSource.DEFAULT_CONFIG
    assert entries["log.retention.ms"].value is None
    assert entries["log.cleanup.policy"].value == "delete"
    assert entries["num.io.threads"].value == "8"
    assert entries["ssl.keystore.password"].value is None and entries["ssl.keystore.password"].sensitive
    assert entries["mystery.key"].sensitive
    assert set(BROKER_CONFIGS) <= set(entries)
    assert list(entries) == sorted(entries)


def test_topic_config_synonyms_in_kafkas_order():
    cfg = config(log_retention_hours="24", log_retention_minutes="90")
    assert cfg.topic_config_source("retention.ms") == ConfigSource.STATIC_BROKER_CONFIG
    assert cfg.topic_config_source("segment.bytes") == ConfigSource.DEFAULT_CONFIG
    assert [(e.name, e.value, e.source) for e in cfg.topic_config_synonyms("retention.ms")] == [
        ("log.retention.minutes", "90", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "24", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.ms", "604800000", ConfigSource.DEFAULT_CONFIG),
    ]


# ---- the .properties format ---------------------------------------------------------------

def test_properties_separators_and_whitespace():
    text = ("a=1\n"
            "b: 2\n"
            "c 3\n"
            "  d   =   4  \n"
            "e\n"
            "f=\n"
            "g:=5\n"
            "h = x = y\n")
    assert properties.loads(text) == {"a": "1", "b": "2", "c": "3", "d": "4  ", "e": "", "f": "",
                                      "g": "=5", "h": "x = y"}


def test_properties_comments_and_blank_lines():
    text = "# a comment\n! another\n   # indented comment\n\n \t \nkey=value # not a comment\n"
    assert properties.loads(text) == {"key": "value # not a comment"}


def test_properties_line_continuation():
    text = ("fruits = apple, \\\n"
            "         banana, \\\n"
            "         cherry\n"
            "# comment ending in a backslash \\\n"
            "next=1\n"
            "even=a\\\\\n"
            "odd=b\\\\\\\n"
            "  #part-of-value\n")
    assert properties.loads(text) == {"fruits": "apple, banana, cherry", "next": "1",
                                      "even": "a\\", "odd": "b\\#part-of-value"}


def test_properties_escapes():
    text = "k\\=ey\\ name=v\\u0041l\\tue\\n\\\\\nwin\\:key=C\\:\\\\dir\n\\#hash=1\n"
    assert properties.loads(text) == {"k=ey name": "vAl\tue\n\\", "win:key": "C:\\dir", "#hash": "1"}


def test_properties_line_endings_and_last_value_wins():
    assert properties.loads("a=1\r\nb=2\rc=3\na=4") == {"b": "2", "c": "3", "a": "4"}


def test_properties_malformed_unicode_escape_is_an_error():
    with pytest.raises(properties.PropertiesFormatError, match="line 2"):
        properties.loads("ok=1\nbad=\\u12G4\n")


def test_properties_file_in_latin1_still_loads(tmp_path):
    path = tmp_path / "server.properties"
    path.write_bytes("broker.rack=caf\xe9\n".encode("iso-8859-1"))
    assert properties.load(path) == {"broker.rack": "café"}


def test_malformed_properties_file_is_a_config_error(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("broker.rack=\\uzzzz\n")
    with pytest.raises(ConfigError, match="Cannot parse config file .*line 1"):
        KafkaConfig.from_file(path)
