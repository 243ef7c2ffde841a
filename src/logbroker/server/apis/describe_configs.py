"""DescribeConfigs (api key 32), v1-4: every config of a topic or of this broker, with its source.

Clients do read-modify-write with this answer (clients.md 13): a tool that keeps only the
entries whose source is DYNAMIC_TOPIC_CONFIG must find exactly the topic's overrides there, so
sources and synonyms follow Kafka's ConfigHelper to the letter:

- A topic config lists every key of `TOPIC_CONFIGS` with its effective value. Its synonyms are the
  topic's override (source 1), then its broker synonyms set dynamically for this broker (2) or
  as the cluster default (3), in server.properties (source 4), then those with a Kafka default (5) — from the first one *named like the topic config's own
  broker key* on, so `retention.ms` with only `log.retention.hours` set has no synonyms and
  source DEFAULT_CONFIG, exactly as Kafka answers. The entry's source is its first synonym's.
- A broker resource named after this broker's id lists every key KafkaConfig implements, plus
  every other key given to it (hidden when possibly sensitive), with the same four-layer synonyms
  (DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG); a
  key is read_only unless it can change dynamically (server/dynamic_config.py). The empty name
  (the cluster-wide dynamic default) lists the keys set there.

CreateTopics v5+ answers with the same topic entries (`topic_config_entries`).
"""

from __future__ import annotations

from logbroker.errors import InvalidRequestError, KafkaError, UnknownTopicOrPartitionError
from logbroker.metadata.controller import validate_topic_name
from logbroker.metadata.model import TopicInfo
from logbroker.security.acl import AclOperation
from logbroker.server.authorization import require_config_access
from logbroker.server import client_metrics_configs
from logbroker.server import group_configs
from logbroker.server.broker_configs import is_per_broker
from logbroker.server.config import BROKER_CONFIGS, LOG_CONFIG_SYNONYMS, ConfigSource
from logbroker.server.config_defs import PASSWORD_SUFFIXES
from logbroker.server.dynamic_config import ListenerKey, is_dynamic
from logbroker.topic_configs import TOPIC_CONFIGS, format_value

API_KEY = 32

# ConfigResource.Type
TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8

# DescribeConfigsResponse.ConfigType, by our config types' names.
CONFIG_TYPES = {"boolean": 1, "string": 2, "int": 3, "short": 4, "long": 5, "double": 6,
                "list": 7, "class": 8, "password": 9}
UNKNOWN_CONFIG_TYPE = 0

# Topic configs that have no broker-level key in Kafka (ServerTopicConfigSynonyms leaves them
# out), so they answer with no synonyms.
_NO_BROKER_SYNONYM = frozenset({"leader.replication.throttled.replicas",
                                "follower.replication.throttled.replicas"})


def handle(broker, request) -> dict:
    body = request.body
    include_synonyms = body.include_synonyms
    include_documentation = getattr(body, "include_documentation", False)
    results = []
    for resource in body.resources:
        result = {"resource_type": resource.resource_type, "resource_name": resource.resource_name,
                  "error_code": 0, "error_message": None, "configs": []}
        keys = set(resource.configuration_keys) if resource.configuration_keys else None
        try:
            require_config_access(broker, request, AclOperation.DESCRIBE_CONFIGS, resource)
            if resource.resource_type == TOPIC:
                result["configs"] = describe_topic(broker, resource.resource_name, keys=keys,
                                                   include_synonyms=include_synonyms,
                                                   include_documentation=include_documentation)
            elif resource.resource_type == BROKER:
                result["configs"] = describe_broker(broker, resource.resource_name, keys=keys,
                                                    include_synonyms=include_synonyms,
                                                    include_documentation=include_documentation)
            elif resource.resource_type == group_configs.GROUP:
                result["configs"] = group_configs.describe(broker, resource.resource_name, keys=keys,
                                                           include_synonyms=include_synonyms,
                                                           include_documentation=include_documentation)
            elif resource.resource_type == client_metrics_configs.CLIENT_METRICS:
                result["configs"] = client_metrics_configs.describe(
                    broker.client_telemetry.configs(resource.resource_name), keys=keys,
                    include_synonyms=include_synonyms, include_documentation=include_documentation)
            else:
                raise InvalidRequestError(f"Unsupported resource type: {resource.resource_type}")
        except KafkaError as exc:
            result.update(error_code=exc.code, error_message=str(exc) or None, configs=[])
        results.append(result)
    return {"results": results}


# ---- topics ---------------------------------------------------------------------------------

def describe_topic(broker, name: str, *, keys: set[str] | None, include_synonyms: bool,
                   include_documentation: bool) -> list[dict]:
    validate_topic_name(name)
    info = broker.store.topic(name)
    if info is None:
        raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist.")
    return topic_config_entries(broker, info, keys=keys, include_synonyms=include_synonyms,
                                include_documentation=include_documentation)


def topic_config_entries(broker, info: TopicInfo, *, keys: set[str] | None = None,
                         include_synonyms: bool = False,
                         include_documentation: bool = False) -> list[dict]:
    """Every config of a topic (or only `keys`), as DescribeConfigs and CreateTopics list them.

    `info` need not be stored yet (CreateTopics with validate_only)."""
    values = broker.topic_log_config(info).to_props()
    entries = []
    for name in sorted(values):
        if keys is not None and name not in keys:
            continue
        definition = TOPIC_CONFIGS[name]
        value = values[name]
        synonyms = topic_broker_synonyms(broker.dynamic_config, name)
        if name in info.configs:
            synonyms.insert(0, _synonym(name, value, ConfigSource.DYNAMIC_TOPIC_CONFIG))
        entries.append({
            "name": name,
            "value": value,
            "read_only": False,
            "config_source": synonyms[0]["source"] if synonyms else int(ConfigSource.DEFAULT_CONFIG),
            "is_sensitive": False,
            "synonyms": synonyms if include_synonyms else [],
            "config_type": CONFIG_TYPES.get(definition.type, UNKNOWN_CONFIG_TYPE),
            "documentation": definition.doc if include_documentation else None,
        })
    return entries


def topic_broker_synonyms(dynamic, topic_config: str) -> list[dict]:
    """The broker-level synonyms of a topic config, as Kafka lists them (see the module doc)."""
    if topic_config in _NO_BROKER_SYNONYM:
        return []
    group = [name for name, _factor in LOG_CONFIG_SYNONYMS.get(topic_config, ())]
    if not group:
        return []
    return _config_synonyms(dynamic, group[0], group)


# ---- brokers ---------------------------------------------------------------------------------

def describe_broker(broker, resource_name: str, *, keys: set[str] | None, include_synonyms: bool,
                    include_documentation: bool) -> list[dict]:
    """A broker id: every key of its effective config. "": the cluster-wide dynamic defaults only,
    without this broker's own layer among the synonyms (Kafka's ConfigHelper)."""
    dynamic = broker.dynamic_config
    if not resource_name:
        values = {name: value for name, value in dynamic.default_configs.items()}
        rows = [(name, value, name.endswith(PASSWORD_SUFFIXES)) for name, value in sorted(values.items())]
        per_broker = False
    else:
        try:
            int(resource_name)
        except ValueError:
            raise InvalidRequestError(f"Broker id must be an integer, but it is: {resource_name}") from None
        is_per_broker(broker, resource_name)
        rows = [(e.name, e.value, e.sensitive or e.name.endswith(PASSWORD_SUFFIXES)) for e in broker.config.describe()]
        per_broker = True
    entries = []
    for name, value, sensitive in rows:
        if keys is not None and name not in keys:
            continue
        listener_key = ListenerKey.parse(name)
        definition = BROKER_CONFIGS.get(listener_key.base if listener_key else name)
        config_type = CONFIG_TYPES.get(definition.type if definition else "", UNKNOWN_CONFIG_TYPE)
        group = [name, listener_key.base] if listener_key else _broker_synonym_group(name)
        synonyms = _config_synonyms(dynamic, name, group, hide=sensitive)
        if not per_broker:
            synonyms = [s for s in synonyms if s["source"] != ConfigSource.DYNAMIC_BROKER_CONFIG]
        entries.append({
            "name": name,
            "value": None if sensitive else value,
            "read_only": not any(is_dynamic(n) for n in group),
            "config_source": synonyms[0]["source"] if synonyms else int(ConfigSource.DEFAULT_CONFIG),
            "is_sensitive": sensitive,
            "synonyms": synonyms if include_synonyms else [],
            "config_type": config_type,
            "documentation": (definition.doc if definition else None) if include_documentation else None,
        })
    return entries


def _broker_synonym_group(name: str) -> list[str]:
    """Kafka's DynamicBrokerConfig.brokerConfigSynonyms: the time-unit spellings of one setting
    (log.roll.ms / log.roll.hours, …) are synonyms of each other; log.flush.interval.ms falls back
    to log.flush.scheduler.interval.ms but not the other way round; any other key stands alone."""
    for topic_config, synonyms in LOG_CONFIG_SYNONYMS.items():
        group = [n for n, _factor in synonyms]
        if len(group) > 1 and name in group and (topic_config != "flush.ms" or name == group[0]):
            return group
    return [name]


# ---- Kafka's synonym order ------------------------------------------------------------------

def _config_synonyms(dynamic, name: str, group: list[str], *, hide: bool = False) -> list[dict]:
    """Kafka's ConfigHelper.configSynonyms: the keys of `group` set in this broker's dynamic
    layer, then in the cluster default's, then statically, then those with a default — each
    layer in the group's order — then drop everything before the first entry named `name`. The
    drop is why `retention.ms` does not show `log.retention.hours`: Kafka only lists synonyms from
    the config's own key on. `hide`: a sensitive key's values are not shown."""
    found = [_synonym(key, None if hide else layer[key].strip(), source)
             for layer, source in dynamic.layers() for key in group if key in layer]
    for key in group:
        definition = BROKER_CONFIGS.get(key)
        if definition is not None and definition.default is not None:
            found.append(_synonym(key, format_value(definition.default), ConfigSource.DEFAULT_CONFIG))
    for i, synonym in enumerate(found):
        if synonym["name"] == name:
            return found[i:]
    return []


def _synonym(name: str, value: str | None, source: ConfigSource) -> dict:
    return {"name": name, "value": value, "source": int(source)}
