"""Dynamic broker configs (Kafka's DynamicBrokerConfig): broker keys changed without a restart.

Three layers over server.properties, highest first: this broker's own (`/config/brokers/<id>`),
the cluster-wide default (`/config/brokers/<default>`), the static config, then Kafka's defaults.
A dynamic key replaces its time-unit synonyms of the lower layers (Kafka's overrideProps: a dynamic
log.retention.ms wins over a static log.retention.hours). The effective config is a KafkaConfig
built from the merged layers; `current` is always one that was fully checked, never a mix.

Which keys may change (Kafka's reconfigurable sets, kept to those logbroker acts on):

- the broker default of every topic config (`log.retention.ms`, `log.segment.bytes`,
  `message.max.bytes`, `log.cleanup.policy`, `log.flush.interval.messages`, …, the first broker
  synonym of each, as DynamicLogConfig) — applied to every log without an override of its own;
- the log cleaner's keys (LogCleaner.RECONFIGURABLE_CONFIGS; its threads at least half and at
  most double the current count, as Kafka checks);
- connection limits (`max.connections`, `max.connections.per.ip`, `…per.ip.overrides`);
- `producer.id.expiration.ms` and `transaction.partition.verification.enable`;
- `replica.alter.log.dirs.io.max.bytes.per.second`, the throttle of replica moves between log dirs;
- per listener only, and per broker only: its TLS keystore and truststore
  (`listener.name.<l>.ssl.keystore.location`, …; a request naming a location reloads the file
  even when the path is unchanged, so a renewed certificate is picked up by new connections), its
  SASL JAAS entries (`listener.name.<l>.<mechanism>.sasl.jaas.config`; Kafka takes those only for a
  new listener, logbroker for an existing one too, for new connections) and its `max.connections`.

Every other key Kafka knows is read-only: "Cannot update these configs dynamically: Set(…)";
a key Kafka does not know is refused too (Kafka would store it for plugins, logbroker has none).
Every refusal is INVALID_REQUEST, as Kafka 4's brokers answer; nothing changes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass

from logbroker.errors import InvalidRequestError
from logbroker.server.config import BROKER_CONFIGS, LOG_CONFIG_SYNONYMS, ConfigSource, KafkaConfig
from logbroker.server.config_defs import ConfigError, is_kafka_only, parse_value
from logbroker.topic_configs import REMOVED_IN_KAFKA_4, TOPIC_CONFIGS

log = logging.getLogger("kafka.server.DynamicBrokerConfig")

DEFAULT_ENTITY = "<default>"  # the znode / store name of the cluster-wide default

# DynamicLogConfig.ReconfigurableConfigs: the first broker synonym of each topic config.
LOG_CONFIGS = frozenset(
    d.broker_synonym for name, d in TOPIC_CONFIGS.items()
    if d.broker_synonym and name not in REMOVED_IN_KAFKA_4
    and name not in ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas"))
CLEANER_CONFIGS = frozenset({
    "log.cleaner.threads", "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.load.factor",
    "log.cleaner.io.buffer.size", "message.max.bytes", "log.cleaner.io.max.bytes.per.second",
    "log.cleaner.backoff.ms"})
SOCKET_CONFIGS = frozenset({"max.connections", "max.connections.per.ip", "max.connections.per.ip.overrides"})
# DynamicProducerStateManagerConfig.
PRODUCER_STATE_CONFIGS = frozenset({"producer.id.expiration.ms", "transaction.partition.verification.enable"})
# DynamicConfig.Broker's throttle of replica moves between log dirs (read at each copied chunk).
REPLICA_MOVE_CONFIGS = frozenset({"replica.alter.log.dirs.io.max.bytes.per.second"})
CLUSTER_WIDE_CONFIGS = (LOG_CONFIGS | CLEANER_CONFIGS | SOCKET_CONFIGS | PRODUCER_STATE_CONFIGS
                        | REPLICA_MOVE_CONFIGS)

# Kafka's SslConfigs.RECONFIGURABLE_CONFIGS that a PEM listener uses: per listener, per broker.
LISTENER_SECURITY_CONFIGS = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.certificate.chain", "ssl.keystore.key",
    "ssl.key.password", "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.certificates"})
# The files a request reloads even when their paths did not change (Kafka's ReloadableFileConfigs).
RELOADABLE_FILE_CONFIGS = frozenset({"ssl.keystore.location", "ssl.truststore.location"})
_ALL_SSL_RECONFIGURABLE = LISTENER_SECURITY_CONFIGS | {"ssl.keystore.password", "ssl.truststore.password"}
_PREFIX = "listener.name."


@dataclass(frozen=True, slots=True)
class ListenerKey:
    """A `listener.name.<listener>.<base>` key: the listener (upper case, as Endpoint names it)
    and the base key (`ssl.keystore.location`, `plain.sasl.jaas.config`, `max.connections`)."""

    listener: str
    base: str

    @classmethod
    def parse(cls, name: str) -> ListenerKey | None:
        if not name.startswith(_PREFIX):
            return None
        listener, _, base = name[len(_PREFIX):].partition(".")
        return cls(listener.upper(), base) if listener and base else None

    @property
    def is_jaas(self) -> bool:
        return self.base.endswith(".sasl.jaas.config")

    @property
    def per_broker(self) -> bool:
        return self.base != "max.connections"


def is_dynamic(name: str) -> bool:
    """Whether `name` may be changed without a restart (DescribeConfigs' read_only is the reverse)."""
    key = ListenerKey.parse(name)
    if key is not None:
        return key.base in LISTENER_SECURITY_CONFIGS or key.is_jaas or key.base == "max.connections"
    return name in CLUSTER_WIDE_CONFIGS


def validate_change(props: Mapping[str, str], *, per_broker: bool) -> None:
    """Kafka's DynamicBrokerConfig.validateConfigs on the keys of one request, in Kafka's order:
    read-only keys, security keys without a listener prefix, values of the wrong type, per-broker
    keys set as the cluster default. Raises InvalidRequestError."""
    unknown = [k for k in props if not is_dynamic(k) and k not in BROKER_CONFIGS and not is_kafka_only(k)]
    if unknown:
        raise InvalidRequestError(f"Unknown Dynamic Configuration '{unknown[0]}'.")
    _refuse([k for k in props if not is_dynamic(k) and k not in _ALL_SSL_RECONFIGURABLE],
            "Cannot update these configs dynamically")
    _refuse([k for k in props if k in _ALL_SSL_RECONFIGURABLE],
            "These security configs can be dynamically updated only per-listener using the listener prefix")
    for name, value in props.items():
        key = ListenerKey.parse(name)
        base = key.base if key is not None else name
        if base in BROKER_CONFIGS:
            try:
                parse_value(BROKER_CONFIGS[base], value)
            except ConfigError as exc:
                raise InvalidRequestError(str(exc)) from None
    if not per_broker:
        _refuse([k for k in props if (key := ListenerKey.parse(k)) is not None and key.per_broker],
                "Cannot update these configs at default cluster level, broker id must be specified")


def _refuse(names: list[str], message: str) -> None:
    if names:
        raise InvalidRequestError(f"{message}: Set({', '.join(sorted(names))})")


def _synonyms(name: str) -> list[str]:
    """Kafka's brokerConfigSynonyms(name, matchListenerOverride=false): the time-unit spellings
    of one setting; any other key stands alone."""
    for topic_config, group in LOG_CONFIG_SYNONYMS.items():
        names = [n for n, _factor in group]
        if len(names) > 1 and name in names and (topic_config != "flush.ms" or name == names[0]):
            return names
    return [name]


def merge(static: Mapping[str, str], *layers: Mapping[str, str]) -> dict[str, str]:
    """The static keys overridden by each layer in turn, each key replacing its synonyms."""
    merged = dict(static)
    for layer in layers:
        for name, value in layer.items():
            for synonym in _synonyms(name):
                merged.pop(synonym, None)
            merged[name] = value
    return merged


class DynamicBrokerConfig:
    """The layers of one broker's config and the effective KafkaConfig built from them.

    Invariant: `current` is KafkaConfig(merge(static, default_configs, broker_configs)), built and
    checked; the layers change only together with it (`replace`). Event loop only."""

    def __init__(self, static: KafkaConfig) -> None:
        self.static = static
        self.default_configs: dict[str, str] = {}
        self.broker_configs: dict[str, str] = {}
        self.current = static
        self.alter_lock = asyncio.Lock()  # held by a request from its read of a layer to its apply

    def candidate(self, *, per_broker: bool, configs: Mapping[str, str]) -> KafkaConfig:
        """The effective config if one layer became `configs` (already through validate_change).
        Raises InvalidRequestError when the keys together cannot make a broker config."""
        default = self.default_configs if per_broker else configs
        own = configs if per_broker else self.broker_configs
        try:
            return KafkaConfig(merge(self.static.originals, default, own), log_warnings=False)
        except ConfigError as exc:
            raise InvalidRequestError(f"Invalid dynamic configuration: {exc}") from None

    def replace(self, *, per_broker: bool, configs: Mapping[str, str], config: KafkaConfig) -> None:
        """Make `configs` the layer and `config` (its candidate) the effective config."""
        if per_broker:
            self.broker_configs = dict(configs)
        else:
            self.default_configs = dict(configs)
        self.current = config

    def load(self, *, per_broker: bool, configs: Mapping[str, str]) -> tuple[dict[str, str], KafkaConfig] | None:
        """A stored layer (at startup, or from a change notice) checked: the keys that could not
        have been set dynamically are dropped with an error line, as Kafka's fromPersistentProps
        does; a layer that still does not make a config is ignored (None). Returns the kept keys
        and the effective config they make; `replace` then installs them."""
        kept = {}
        for name, value in configs.items():
            try:
                validate_change({name: value}, per_broker=per_broker)
            except InvalidRequestError as exc:
                log.error("Dynamic %s config %s will be ignored: %s",
                          "broker" if per_broker else "default cluster", name, exc)
                continue
            kept[name] = value
        try:
            return kept, self.candidate(per_broker=per_broker, configs=kept)
        except InvalidRequestError as exc:
            log.error("Dynamic %s configs could not be applied: %s",
                      "broker" if per_broker else "default cluster", exc)
            return None

    def layers(self) -> list[tuple[Mapping[str, str], ConfigSource]]:
        """Where a value may come from, highest first (Kafka's ConfigHelper.configSynonyms)."""
        return [(self.broker_configs, ConfigSource.DYNAMIC_BROKER_CONFIG),
                (self.default_configs, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
                (self.static.originals, ConfigSource.STATIC_BROKER_CONFIG)]
