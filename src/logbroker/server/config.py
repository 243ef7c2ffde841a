"""Broker configuration (Kafka's KafkaConfig): `server.properties` with Kafka's names and defaults.

Three kinds of key, decided by name:

- *Implemented* keys (BROKER_CONFIGS, in `config_defs`) are parsed and checked; a malformed value stops startup with
  a ConfigError naming the key and what it expects. They include the broker synonym of every topic
  config in `storage.log_config.TOPIC_CONFIGS` (`log.segment.bytes` → `segment.bytes`, …), from
  which `KafkaConfig.default_log_config()` builds the default LogConfig of every log.
- Keys Kafka 3.9 knows that logbroker does not use (KAFKA_ONLY_CONFIGS: `num.network.threads`,
  `ssl.*`, …, and everything under `listener.name.`) are accepted with one warning each, so that
  Kafka's own server.properties starts a broker.
- Any other key gets one warning naming it, with the closest known key when there is one (typos).

Defaults are Kafka's, except where logbroker's single-node embedded default needs another, each
said in the key's doc: `broker.id` (0, not -1: we never generate ids), `listeners`
(PLAINTEXT://127.0.0.1:9092, not every interface), `log.dir` (none: the caller chooses a data
directory). `offsets.topic.replication.factor` keeps Kafka's 3: a cluster creates __consumer_offsets
only once that many brokers are alive (as Kafka), a single node with one replica.

Time synonyms follow Kafka's precedence: `log.retention.ms` > `log.retention.minutes` >
`log.retention.hours`; `log.roll.ms` > `log.roll.hours`; `log.roll.jitter.ms` >
`log.roll.jitter.hours`; `log.flush.interval.ms` > `log.flush.scheduler.interval.ms`. A negative
retention time means unlimited (-1).
"""

from __future__ import annotations

import enum
import logging
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from logbroker.remote.store_names import RSM_CONFIG_PREFIX
from logbroker.server import properties
from logbroker.server.config_defs import (
    BROKER_CONFIGS,
    KAFKA_ONLY_CONFIGS,
    LOG_CONFIG_SYNONYMS,
    PASSWORD_SUFFIXES,
    SECURITY_PROTOCOLS,
    BrokerConfigDef,
    ConfigError,
    closest_known_key,
    is_kafka_only,
    parse_override,
    parse_value,
)
from logbroker.storage.log_config import LogConfig
from logbroker.topic_configs import REMOVED_IN_KAFKA_4, TOPIC_CONFIGS, format_value

log = logging.getLogger("kafka.server.KafkaConfig")

# The broker keys of the topic configs Kafka 4.0 removed (log.message.format.version, …).
_REMOVED_BROKER_KEYS = {TOPIC_CONFIGS[name].broker_synonym: why
                        for name, why in REMOVED_IN_KAFKA_4.items()}


class ConfigSource(enum.IntEnum):
    """Where a config value comes from: Kafka's DescribeConfigs `config_source` codes."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


class Endpoint(NamedTuple):
    """One entry of `listeners` / `advertised.listeners`, unpackable as (name, host, port). The
    listener name is upper case; its security protocol is
    `config.listener_security_protocol_map[endpoint.listener_name]`. An empty host means every
    interface (in `listeners`) or the machine's canonical host name (when advertised), as in Kafka."""

    listener_name: str
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener_name}://{host}:{self.port}"


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One row of a DescribeConfigs answer: the value as text (None when unset or sensitive)."""

    name: str
    value: str | None
    source: ConfigSource
    sensitive: bool = False
    read_only: bool = True


_LISTENER_RE = re.compile(r"^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)$")


class KafkaConfig:
    """A broker's static configuration: Kafka's KafkaConfig.

    Every implemented key is an attribute named after it with '.' → '_', holding its parsed value
    (its default when not given; None for an unset key without default). A few attributes hold
    the effective value Kafka derives instead:

    - `listeners`, `advertised_listeners`: tuples of Endpoint (advertised falls back to
      listeners); `listener_security_protocol_map`: dict listener name → protocol;
      `inter_broker_listener_name`: the effective listener name.
    - `log_dirs`: tuple of directories from log.dirs, else log.dir; empty when neither is set
      (the caller chooses).
    - `log_retention_ms`, `log_roll_ms`, `log_roll_jitter_ms`, `log_flush_interval_ms`: in ms,
      after the hours/minutes/ms precedence (retention -1: unlimited).
    - `zookeeper_connection_timeout_ms`: falls back to zookeeper.session.timeout.ms.

    `originals` keeps every key as given (text), `warnings` the warning lines logged for keys not
    used. Construction parses and checks everything; it raises ConfigError and never returns a
    half-checked config. Pure computation: no I/O but `from_file` reading the file.
    """

    # Server basics and listeners
    broker_id: int
    node_id: int | None
    controller_listener_names: list[str]
    broker_rack: str | None
    replica_selector_class: str | None
    listeners: tuple[Endpoint, ...]
    advertised_listeners: tuple[Endpoint, ...]
    listener_security_protocol_map: dict[str, str]
    inter_broker_listener_name: str
    security_inter_broker_protocol: str
    metrics_port: int | None
    schema_registry_listeners: list[str]
    schema_registry_topic: str
    schema_registry_topic_replication_factor: int
    # Security
    ssl_keystore_type: str
    ssl_keystore_location: str | None
    ssl_keystore_certificate_chain: str | None
    ssl_keystore_key: str | None
    ssl_key_password: str | None
    ssl_truststore_type: str
    ssl_truststore_location: str | None
    ssl_truststore_certificates: str | None
    ssl_client_auth: str
    ssl_enabled_protocols: list[str]
    ssl_cipher_suites: list[str]
    sasl_enabled_mechanisms: list[str]
    sasl_jaas_config: str | None
    sasl_mechanism_inter_broker_protocol: str
    sasl_server_max_receive_size: int
    connections_max_reauth_ms: int
    connection_failed_authentication_delay_ms: int
    authorizer_class_name: str
    allow_everyone_if_no_acl_found: bool
    super_users: str | None
    # Logs
    log_dirs: tuple[str, ...]
    log_dir: str | None
    num_partitions: int
    default_replication_factor: int
    min_insync_replicas: int
    auto_create_topics_enable: bool
    delete_topic_enable: bool
    unclean_leader_election_enable: bool
    num_recovery_threads_per_data_dir: int
    message_max_bytes: int
    compression_type: str
    compression_gzip_level: int
    compression_lz4_level: int
    compression_zstd_level: int
    log_segment_bytes: int
    log_roll_ms: int
    log_roll_hours: int
    log_roll_jitter_ms: int
    log_roll_jitter_hours: int
    log_retention_ms: int
    log_retention_minutes: int | None
    log_retention_hours: int
    log_retention_bytes: int
    log_local_retention_ms: int
    log_local_retention_bytes: int
    log_retention_check_interval_ms: int
    log_index_interval_bytes: int
    log_index_size_max_bytes: int
    log_flush_before_ack: bool
    log_flush_interval_messages: int
    log_flush_interval_ms: int
    log_flush_scheduler_interval_ms: int
    log_flush_offset_checkpoint_interval_ms: int
    log_flush_start_offset_checkpoint_interval_ms: int
    log_cleanup_policy: list[str]
    log_segment_delete_delay_ms: int
    log_preallocate: bool
    log_message_timestamp_type: str
    log_message_timestamp_after_max_ms: int
    log_message_timestamp_before_max_ms: int
    log_message_timestamp_difference_max_ms: int
    log_message_downconversion_enable: bool
    log_message_format_version: str
    follower_replication_throttled_replicas: list[str]
    leader_replication_throttled_replicas: list[str]
    # Log cleaner
    log_cleaner_enable: bool
    log_cleaner_threads: int
    log_cleaner_backoff_ms: int
    log_cleaner_dedupe_buffer_size: int
    log_cleaner_io_buffer_size: int
    log_cleaner_io_buffer_load_factor: float
    log_cleaner_io_max_bytes_per_second: float
    log_cleaner_min_cleanable_ratio: float
    log_cleaner_delete_retention_ms: int
    log_cleaner_min_compaction_lag_ms: int
    log_cleaner_max_compaction_lag_ms: int
    # Replication
    replica_lag_time_max_ms: int
    replica_alter_log_dirs_io_max_bytes_per_second: int
    replica_fetch_max_bytes: int
    replica_fetch_min_bytes: int
    replica_fetch_wait_max_ms: int
    replica_fetch_backoff_ms: int
    replica_fetch_response_max_bytes: int
    replica_high_watermark_checkpoint_interval_ms: int
    auto_leader_rebalance_enable: bool
    leader_imbalance_check_interval_seconds: int
    leader_imbalance_per_broker_percentage: int
    controlled_shutdown_enable: bool
    controlled_shutdown_max_retries: int
    controlled_shutdown_retry_backoff_ms: int
    # ZooKeeper
    zookeeper_connect: str | None
    zookeeper_session_timeout_ms: int
    zookeeper_connection_timeout_ms: int
    # Network
    socket_request_max_bytes: int
    socket_send_buffer_bytes: int
    socket_receive_buffer_bytes: int
    connections_max_idle_ms: int
    max_connections: int
    max_connections_per_ip: int
    max_connections_per_ip_overrides: str
    queued_max_requests: int
    max_request_partition_size_limit: int
    request_timeout_ms: int
    # Client quotas
    quota_window_num: int
    quota_window_size_seconds: int
    controller_quota_window_num: int
    controller_quota_window_size_seconds: int
    # Groups and offsets
    offsets_topic_num_partitions: int
    offsets_topic_replication_factor: int
    offsets_topic_segment_bytes: int
    offsets_retention_minutes: int
    offsets_retention_check_interval_ms: int
    offset_metadata_max_bytes: int
    group_initial_rebalance_delay_ms: int
    group_min_session_timeout_ms: int
    group_max_session_timeout_ms: int
    group_consumer_session_timeout_ms: int
    group_consumer_heartbeat_interval_ms: int
    group_consumer_assignors: list[str]
    group_consumer_max_size: int
    # Share groups
    group_share_record_lock_duration_ms: int
    group_share_delivery_count_limit: int
    group_share_partition_max_record_locks: int
    group_share_session_timeout_ms: int
    group_share_heartbeat_interval_ms: int
    share_coordinator_state_topic_num_partitions: int
    share_coordinator_state_topic_replication_factor: int
    share_coordinator_state_topic_min_isr: int
    share_coordinator_state_topic_segment_bytes: int
    # Transactions and producer ids
    transaction_state_log_num_partitions: int
    transaction_state_log_replication_factor: int
    transaction_state_log_min_isr: int
    transaction_state_log_segment_bytes: int
    transaction_state_log_load_buffer_size: int
    transaction_max_timeout_ms: int
    transactional_id_expiration_ms: int
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int
    transaction_remove_expired_transaction_cleanup_interval_ms: int
    transaction_partition_verification_enable: bool
    producer_id_expiration_ms: int
    # Tiered storage
    remote_log_storage_system_enable: bool
    remote_log_storage_manager_class_name: str | None
    remote_log_manager_task_interval_ms: int
    remote_fetch_max_wait_ms: int
    # Delegation tokens and client telemetry
    delegation_token_secret_key: str | None
    delegation_token_master_key: str | None
    delegation_token_max_lifetime_ms: int
    delegation_token_expiry_time_ms: int
    delegation_token_expiry_check_interval_ms: int
    telemetry_max_bytes: int

    def __init__(self, props: Mapping[str, object], *, log_warnings: bool = True) -> None:
        self.originals: dict[str, str] = {
            key: value if isinstance(value, str) else format_value(value)
            for key, value in props.items() if value is not None
        }
        warnings = []
        values: dict[str, object] = {name: d.default for name, d in BROKER_CONFIGS.items()}
        for key, raw in self.originals.items():
            definition = BROKER_CONFIGS.get(key)
            if definition is not None:
                values[key] = parse_value(definition, raw)
                if key in _REMOVED_BROKER_KEYS:
                    warnings.append(f"Broker configuration {key} with value {raw} is deprecated "
                                    f"and was removed in Apache Kafka 4.0; {_REMOVED_BROKER_KEYS[key]}")
            elif _listener_key_used(key, raw) or key.startswith(RSM_CONFIG_PREFIX):
                pass  # rsm.config.*: the remote store's settings (remote/storage_manager.py)
            elif is_kafka_only(key):
                warnings.append(f"Kafka config {key} is not used by logbroker; ignoring it")
            else:
                suggestion = closest_known_key(key)
                hint = f" (did you mean {suggestion}?)" if suggestion else ""
                warnings.append(f"Unknown config {key} was supplied; ignoring it{hint}")
        self._values = values
        for name, value in values.items():
            setattr(self, _attr(name), value)
        self._derive(warnings)
        self.warnings: tuple[str, ...] = tuple(warnings)
        if log_warnings:
            for line in self.warnings:
                log.warning("%s", line)

    # ---- construction -------------------------------------------------------------------

    @classmethod
    def from_props(cls, props: Mapping[str, object],
                   overrides: Mapping[str, object] | Iterable[str] | None = None, *,
                   log_warnings: bool = True) -> KafkaConfig:
        """A config from a key → value mapping, with `overrides` (a mapping, or `key=value`
        strings as given to `--override`) on top."""
        merged = dict(props)
        merged.update(_overrides_dict(overrides))
        return cls(merged, log_warnings=log_warnings)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str],
                  overrides: Mapping[str, object] | Iterable[str] | None = None, *,
                  log_warnings: bool = True) -> KafkaConfig:
        """A config from a server.properties file (blocks on disk), with `overrides` on top.

        Raises ConfigError when the file cannot be read or parsed, or a value is malformed.
        """
        try:
            props = properties.load(path)
        except OSError as e:
            raise ConfigError(f"Cannot read config file {os.fspath(path)}: {e.strerror or e}") from None
        except properties.PropertiesFormatError as e:
            raise ConfigError(f"Cannot parse config file {os.fspath(path)}: {e}") from None
        return cls.from_props(props, overrides, log_warnings=log_warnings)

    def _derive(self, warnings: list[str]) -> None:
        v = self._values
        if v["node.id"] is not None:
            # KRaft's name for the id (Kafka 4's stock file sets only node.id).
            if "broker.id" in self.originals and v["broker.id"] != v["node.id"]:
                raise ConfigError(f"Invalid value {v['broker.id']!r} for configuration broker.id: "
                                  f"must be equal to node.id ({v['node.id']}) when both are set")
            self.broker_id = v["node.id"]
        self.log_dirs = tuple(v["log.dirs"]) if v["log.dirs"] else (
            (v["log.dir"],) if v["log.dir"] else ())
        self.log_roll_ms = self._synonym_value("segment.ms")
        self.log_roll_jitter_ms = self._synonym_value("segment.jitter.ms")
        self.log_flush_interval_ms = self._synonym_value("flush.ms")
        retention = self._synonym_value("retention.ms")
        self.log_retention_ms = -1 if retention < 0 else retention
        if self.log_retention_ms == 0:
            raise ConfigError("Invalid value '0' for configuration log.retention.ms: must be "
                              "unlimited (-1) or at least 1")
        if v["zookeeper.connection.timeout.ms"] is None:
            self.zookeeper_connection_timeout_ms = v["zookeeper.session.timeout.ms"]
        self._derive_listeners(warnings)

    def _synonym_value(self, topic_name: str) -> int:
        """The broker-level value of a topic config: the first of its synonyms that is set."""
        for name, factor in LOG_CONFIG_SYNONYMS[topic_name]:
            value = self._values[name]
            if value is not None:
                return value * factor
        raise AssertionError(f"no synonym of {topic_name} has a default")

    def _derive_listeners(self, warnings: list[str]) -> None:
        v = self._values
        protocol_map = _parse_protocol_map(v["listener.security.protocol.map"])
        self.listener_security_protocol_map = protocol_map
        self.listeners = _parse_endpoints("listeners", v["listeners"], protocol_map,
                                          distinct_ports=True)
        controller_names = {name.upper() for name in v["controller.listener.names"]}
        if controller_names:
            # A KRaft controller listener (Kafka 4's stock file has CONTROLLER://:9093): there is
            # no KRaft quorum here (metadata lives in ZooKeeper or a file), so nothing to serve.
            skipped = [e for e in self.listeners if e.listener_name in controller_names]
            self.listeners = tuple(e for e in self.listeners if e.listener_name not in controller_names)
            for e in skipped:
                warnings.append(f"Listener {e.listener_name} is a KRaft controller listener "
                                f"(controller.listener.names); logbroker has no KRaft controller "
                                f"and does not listen on port {e.port}")
        if not self.listeners:
            raise ConfigError("Invalid value '' for configuration listeners: "
                              "expected at least one listener_name://host:port")
        if v["advertised.listeners"] is None:
            self.advertised_listeners = self.listeners
        else:
            self.advertised_listeners = tuple(e for e in _parse_endpoints(
                "advertised.listeners", v["advertised.listeners"], protocol_map,
                distinct_ports=False) if e.listener_name not in controller_names)
        names = {e.listener_name for e in self.listeners}
        advertised_names = {e.listener_name for e in self.advertised_listeners}
        if not advertised_names <= names:
            raise ConfigError(
                f"Invalid value {v['advertised.listeners']!r} for configuration "
                f"advertised.listeners: listener names must be among those of listeners "
                f"({', '.join(sorted(names))})")
        if any(e.host == "0.0.0.0" for e in self.advertised_listeners):
            shown = v["advertised.listeners"] or v["listeners"]
            raise ConfigError(f"Invalid value {shown!r} for configuration advertised.listeners: "
                              f"0.0.0.0 is not routable; advertise a host clients can reach")
        if v["inter.broker.listener.name"] is not None:
            if "security.inter.broker.protocol" in self.originals:
                raise ConfigError("Only one of inter.broker.listener.name and "
                                  "security.inter.broker.protocol may be set")
            inter_broker = v["inter.broker.listener.name"].upper()
            if inter_broker not in protocol_map:
                raise ConfigError(
                    f"Invalid value {v['inter.broker.listener.name']!r} for configuration "
                    f"inter.broker.listener.name: no such listener in listener.security.protocol.map")
        else:
            inter_broker = v["security.inter.broker.protocol"]
        if inter_broker not in advertised_names:
            raise ConfigError(
                f"Invalid value {inter_broker!r} for configuration inter.broker.listener.name: "
                f"must be a listener name of advertised.listeners "
                f"({', '.join(sorted(advertised_names))})")
        self.inter_broker_listener_name = inter_broker

    @property
    def log_dirs_configured(self) -> bool:
        """Whether log.dirs or log.dir was given (else the caller chooses a data directory)."""
        return bool(self.log_dirs)

    def with_log_dirs(self, log_dirs: Iterable[str | os.PathLike[str]]) -> KafkaConfig:
        """This config with log.dirs set (as if given), warnings not logged a second time."""
        props = dict(self.originals)
        props["log.dirs"] = ",".join(os.fspath(d) for d in log_dirs)
        return KafkaConfig(props, log_warnings=False)

    # ---- reading --------------------------------------------------------------------------

    def get(self, name: str) -> object:
        """The parsed value of an implemented key as configured (None when unset), without the
        derivations the attributes apply. Raises KeyError for a key logbroker does not implement."""
        return self._values[name]

    def listener_value(self, listener_name: str, name: str) -> object:
        """An implemented key's value for one listener: `listener.name.<listener>.<name>` when set
        (Kafka's per-listener override), else the broker-wide value."""
        raw = self.originals.get(f"listener.name.{listener_name.lower()}.{name}")
        if raw is None:
            return self._values[name]
        return parse_value(BROKER_CONFIGS[name], raw)

    def listener_jaas_config(self, listener_name: str, mechanism: str) -> str | None:
        """`listener.name.<listener>.<mechanism>.sasl.jaas.config`, else `sasl.jaas.config`."""
        return (self.originals.get(f"listener.name.{listener_name.lower()}.{mechanism.lower()}.sasl.jaas.config")
                or self.originals.get("sasl.jaas.config"))

    def default_log_config(self) -> LogConfig:
        """The LogConfig every topic starts from: Kafka's topic defaults overlaid with the broker
        synonyms (log.segment.bytes → segment.bytes, log.retention.hours → retention.ms, …)."""
        broker_defaults = {}
        for topic_name, synonyms in LOG_CONFIG_SYNONYMS.items():
            if len(synonyms) > 1:
                value = self._synonym_value(topic_name)
                broker_defaults[topic_name] = -1 if topic_name == "retention.ms" and value < 0 else value
            else:
                broker_defaults[topic_name] = self._values[synonyms[0][0]]
        return LogConfig.defaults().with_overrides(broker_defaults)

    def topic_config_source(self, topic_name: str) -> ConfigSource:
        """Where a topic config's broker-level default comes from: STATIC_BROKER_CONFIG when one
        of its broker synonyms is set in server.properties or an override, else DEFAULT_CONFIG."""
        synonyms = LOG_CONFIG_SYNONYMS.get(topic_name, ())
        if any(name in self.originals for name, _ in synonyms):
            return ConfigSource.STATIC_BROKER_CONFIG
        return ConfigSource.DEFAULT_CONFIG

    def topic_config_synonyms(self, topic_name: str) -> list[ConfigEntry]:
        """The broker-level synonyms of a topic config, for DescribeConfigs with include_synonyms
        (after the topic's own override, if any): each synonym set statically, in priority order,
        then the default, named after the first synonym, as Kafka lists them."""
        synonyms = LOG_CONFIG_SYNONYMS.get(topic_name, ())
        entries = [ConfigEntry(name, self.originals[name].strip(), ConfigSource.STATIC_BROKER_CONFIG)
                   for name, _ in synonyms if name in self.originals]
        if synonyms:
            default = TOPIC_CONFIGS[topic_name].default
            entries.append(ConfigEntry(synonyms[0][0], format_value(default),
                                       ConfigSource.DEFAULT_CONFIG))
        return entries

    def describe(self) -> list[ConfigEntry]:
        """Every implemented key with its value and source, plus every other key that was given
        (with sensitive values hidden), sorted by name: the broker's DescribeConfigs answer."""
        entries = {}
        for name, value in self._values.items():
            source = (ConfigSource.STATIC_BROKER_CONFIG if name in self.originals
                      else ConfigSource.DEFAULT_CONFIG)
            entries[name] = ConfigEntry(name, None if value is None else format_value(value), source)
        for name, raw in self.originals.items():
            if name in entries:
                continue
            sensitive = not is_kafka_only(name) or name.endswith(PASSWORD_SUFFIXES)
            entries[name] = ConfigEntry(name, None if sensitive else raw.strip(),
                                        ConfigSource.STATIC_BROKER_CONFIG, sensitive=sensitive)
        return [entries[name] for name in sorted(entries)]

    def __repr__(self) -> str:
        given = ", ".join(f"{k}={v!r}" for k, v in self.originals.items())
        return f"KafkaConfig({given})"

    def remote_storage_settings(self) -> dict[str, str]:
        """The `rsm.config.` keys, without the prefix (`s3.bucket`, `dir`, …)."""
        return {key[len(RSM_CONFIG_PREFIX):]: value for key, value in self.originals.items()
                if key.startswith(RSM_CONFIG_PREFIX)}


def _listener_key_used(key: str, raw: str) -> bool:
    """A per-listener key logbroker reads (`listener.name.<l>.<implemented key>`, checked here,
    or `listener.name.<l>.<mechanism>.sasl.jaas.config`)."""
    if not key.startswith("listener.name."):
        return False
    listener, _, rest = key[len("listener.name."):].partition(".")
    if not listener:
        return False
    if rest in BROKER_CONFIGS:
        parse_value(BROKER_CONFIGS[rest], raw)
        return True
    return rest.endswith(".sasl.jaas.config")


def _attr(name: str) -> str:
    return name.replace(".", "_")


def _overrides_dict(overrides: Mapping[str, object] | Iterable[str] | None) -> dict[str, object]:
    if overrides is None:
        return {}
    if isinstance(overrides, Mapping):
        return dict(overrides)
    return dict(parse_override(item) for item in overrides)


def _parse_protocol_map(text: str) -> dict[str, str]:
    result = {}
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        name, sep, protocol = (part.strip() for part in entry.partition(":"))
        if not sep or not name or ":" in protocol or protocol.upper() not in SECURITY_PROTOCOLS:
            raise ConfigError(
                f"Invalid value {text!r} for configuration listener.security.protocol.map: "
                f"expected listener_name:protocol entries with a protocol among "
                f"{', '.join(SECURITY_PROTOCOLS)}")
        result[name.upper()] = protocol.upper()
    return result


def _parse_endpoints(key: str, text: str, protocol_map: Mapping[str, str], *,
                     distinct_ports: bool) -> tuple[Endpoint, ...]:
    endpoints = []
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        match = _LISTENER_RE.match(entry)
        if not match or not match.group(1):
            raise ConfigError(f"Invalid value {text!r} for configuration {key}: expected "
                              f"listener_name://host:port entries separated by commas")
        name, host, port = match.group(1).upper(), match.group(2), int(match.group(3))
        if not 0 <= port <= 65535:
            raise ConfigError(f"Invalid value {text!r} for configuration {key}: "
                              f"port {port} must be between 0 and 65535")
        if name not in protocol_map:
            raise ConfigError(f"Invalid value {text!r} for configuration {key}: listener {name} "
                              f"has no security protocol in listener.security.protocol.map")
        endpoints.append(Endpoint(name, host, port))
    names = [e.listener_name for e in endpoints]
    if len(set(names)) != len(names):
        raise ConfigError(f"Invalid value {text!r} for configuration {key}: "
                          f"each listener must have a different name")
    ports = [e.port for e in endpoints if e.port != 0]
    if distinct_ports and len(set(ports)) != len(ports):
        raise ConfigError(f"Invalid value {text!r} for configuration {key}: "
                          f"each listener must have a different port")
    return tuple(endpoints)


__all__ = [
    "BROKER_CONFIGS", "KAFKA_ONLY_CONFIGS", "LOG_CONFIG_SYNONYMS", "BrokerConfigDef", "ConfigEntry",
    "ConfigError", "ConfigSource", "Endpoint", "KafkaConfig", "closest_known_key", "is_kafka_only",
    "parse_override", "parse_value",
]
