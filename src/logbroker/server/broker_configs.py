"""Altering dynamic broker configs: check a new layer, store it where Kafka stores it, apply it.

AlterConfigs and IncrementalAlterConfigs on a BROKER resource come here with the layer's new
content (resource name "<id>": this broker's own layer; "": the cluster-wide default). In order,
all before anything changes: the keys (server/dynamic_config.py), the effective config they make,
then what applying it needs — each changed listener's TLS context and SASL settings built (a
keystore that does not load is refused), the connection limits, the cleaner's thread count. Only
then is the layer stored — the metadata file on a single node, `/config/brokers/<id>` or
`/config/brokers/<default>` with a `/config/changes` notice on a cluster (every broker applies it
from the notice, server/zk_cluster.py) — and applied here. A refusal leaves everything as it was.

Applying: the broker's config becomes the new one (what request handlers read: message sizes,
transaction verification); the broker default LogConfig and every log without its own override
get the new topic defaults, and every log's producer state the new producer.id.expiration.ms;
connection limits change for the next accept; a listener whose
security changed gets a new TLS context / SASL settings for new connections (open ones keep
theirs, as in Kafka).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from logbroker.errors import InvalidConfigError, InvalidRequestError
from logbroker.server.config import KafkaConfig
from logbroker.server.config_defs import PASSWORD_SUFFIXES, ConfigError
from logbroker.server.connection_quotas import ConnectionQuotas
from logbroker.storage.log_config import LogConfig
from logbroker.server.dynamic_config import (
    DEFAULT_ENTITY,
    RELOADABLE_FILE_CONFIGS,
    SOCKET_CONFIGS,
    ListenerKey,
    validate_change,
)

log = logging.getLogger("kafka.server.DynamicBrokerConfig")


@dataclass(slots=True)
class Reconfiguration:
    """What applying a new effective config takes, all of it built (and so checked) beforehand."""

    config: KafkaConfig
    securities: dict = field(default_factory=dict)  # listener name → its new ListenerSecurity
    quotas: ConnectionQuotas | None = None
    log_default: LogConfig | None = None  # new broker defaults of topic configs, if they changed
    topic_configs: dict = field(default_factory=dict)  # topic name → its LogConfig over them


def is_per_broker(broker, resource_name: str) -> bool:
    """True for this broker's id, False for "" (the default); INVALID_REQUEST for another id."""
    if not resource_name:
        return False
    if resource_name != str(broker.broker_id):
        raise InvalidRequestError(f"Unexpected broker id, expected {broker.broker_id} or empty "
                                  f"string, but received {resource_name}")
    return True


async def alter(broker, resource_name: str, change: Callable[[dict[str, str]], dict[str, str]], *,
                named: Iterable[str], validate_only: bool) -> None:
    """Make `change(layer)` the dynamic layer `resource_name` names; `named` are the keys the
    request gave (a keystore location among them is reloaded even when unchanged)."""
    per_broker = is_per_broker(broker, resource_name)
    dynamic = broker.dynamic_config
    async with dynamic.alter_lock:  # one change at a time: each starts from the last
        configs = change(dict(dynamic.broker_configs if per_broker else dynamic.default_configs))
        validate_change(configs, per_broker=per_broker)
        config = dynamic.candidate(per_broker=per_broker, configs=configs)
        reload = {key.listener for key in map(ListenerKey.parse, named)
                  if key is not None and key.base in RELOADABLE_FILE_CONFIGS}
        try:
            plan = prepare(broker, config, reload=reload)
        except ConfigError as exc:
            raise InvalidRequestError(f"Invalid dynamic configuration: {exc}") from None
        if validate_only:
            return
        entity = str(broker.broker_id) if per_broker else DEFAULT_ENTITY
        if broker.zk is not None:
            await asyncio.get_running_loop().run_in_executor(None, broker.zk.set_broker_configs, entity, configs)
        else:
            broker.store.set_broker_configs(entity, configs)
        dynamic.replace(per_broker=per_broker, configs=configs, config=config)
        apply(broker, plan)
        log.info("Updated %s dynamic configs: %s", f"broker {broker.broker_id}" if per_broker else "cluster default",
                 ",".join(f"{k}={_shown(k, v)}" for k, v in sorted(configs.items())) or "(none)")


def apply_stored(broker, entity: str, configs: dict[str, str]) -> None:
    """A layer read from the store (a change notice on a cluster): apply it if it is this
    broker's or the default, skip what cannot apply with an error line. Event loop."""
    if entity != DEFAULT_ENTITY and entity != str(broker.broker_id):
        return
    per_broker = entity != DEFAULT_ENTITY
    dynamic = broker.dynamic_config
    loaded = dynamic.load(per_broker=per_broker, configs=configs)
    if loaded is None:
        return
    kept, config = loaded
    if kept == (dynamic.broker_configs if per_broker else dynamic.default_configs):
        return  # already applied (this broker answered the request that wrote it)
    try:
        plan = prepare(broker, config, reload=set())
    except ConfigError as exc:
        log.error("Dynamic %s configs could not be applied: %s", entity, exc)
        return
    dynamic.replace(per_broker=per_broker, configs=kept, config=config)
    apply(broker, plan)
    log.info("Applied dynamic configs of %s: %s", entity,
             ",".join(f"{k}={_shown(k, v)}" for k, v in sorted(kept.items())) or "(none)")


def prepare(broker, config: KafkaConfig, *, reload: set[str]) -> Reconfiguration:
    """Build everything `config` needs that differs from the broker's current config, so that
    `apply` cannot fail halfway. Raises ConfigError naming the key."""
    old = broker.config
    plan = Reconfiguration(config)
    if old.log_cleaner_threads != config.log_cleaner_threads:
        _check_cleaner_threads(old.log_cleaner_threads, config.log_cleaner_threads)
    log_default = config.default_log_config()
    if log_default != broker.default_log_config:
        plan.log_default = log_default
        for name, info in broker.store.topics().items():
            if not info.configs:  # most topics: the defaults themselves
                plan.topic_configs[name] = log_default
                continue
            try:
                plan.topic_configs[name] = log_default.with_overrides(info.configs)
            except InvalidConfigError as exc:
                raise ConfigError(f"the configs of topic {name} would not hold: {exc}") from None
    if any(old.get(k) != config.get(k) for k in SOCKET_CONFIGS) or _prefixed(old, "") != _prefixed(config, ""):
        plan.quotas = ConnectionQuotas.from_config(config)
    for name, _host, _port in config.listeners:
        if name in reload or _prefixed(old, name) != _prefixed(config, name):
            plan.securities[name] = broker.listener_security(name, config)
    return plan


def apply(broker, plan: Reconfiguration) -> None:
    """Switch the broker to `plan.config`. Nothing here can fail on a config value."""
    broker.config = plan.config
    if plan.log_default is not None:
        broker.default_log_config = plan.log_default
        broker.log_manager.update_default_config(plan.log_default, plan.topic_configs)
    if broker.log_manager is not None:
        broker.log_manager.set_producer_id_expiration_ms(plan.config.producer_id_expiration_ms)
    if plan.quotas is not None and broker.server is not None:
        broker.server.set_quota_limits(plan.quotas)
    for name, security in plan.securities.items():
        if broker.server is not None:
            broker.server.set_listener_security(name, security)
            log.info("Listener %s: new connections use its new security settings", name)


def _check_cleaner_threads(current: int, new: int) -> None:
    """LogCleaner.validateReconfiguration."""
    if new < 1:
        raise ConfigError("Log cleaner threads should be at least 1")
    if new < current / 2:
        raise ConfigError(f"Log cleaner threads cannot be reduced to less than half the current value {current}")
    if new > current * 2:
        raise ConfigError(f"Log cleaner threads cannot be increased to more than double the current value {current}")


def _prefixed(config: KafkaConfig, listener: str) -> dict[str, str]:
    """The listener-prefixed keys of one listener ("" : of every listener)."""
    prefix = f"listener.name.{listener.lower()}." if listener else "listener.name."
    return {k: v for k, v in config.originals.items() if k.startswith(prefix)}


def _shown(name: str, value: str) -> str:
    return "[hidden]" if name.endswith(PASSWORD_SUFFIXES) else value
