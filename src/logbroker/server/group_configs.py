"""Group configs: Kafka 4's GROUP config resources (resource type 32, KIP-848 / KIP-932).

Per-group overrides set with IncrementalAlterConfigs (or AlterConfigs) and read back with
DescribeConfigs, as `kafka-configs.sh --entity-type groups` does. Kept in the metadata store
(`/config/groups/<group>` in ZooKeeper; "groups" in a single node's metadata file); a group need
not exist to be configured. Each key has Kafka's name, default and bounds; an unknown key or a bad
value is INVALID_CONFIG naming it, and nothing of that resource is stored.

Honoured: share.auto.offset.reset (where a new share-partition starts), share.record.lock.duration.ms
(the acquisition lock of the group's records), share.isolation.level (read_committed reads up
to the last stable offset). The session and heartbeat keys are stored and described.
"""

from __future__ import annotations

from dataclasses import dataclass

from logbroker.errors import InvalidConfigError, InvalidRequestError
from logbroker.server.config import ConfigSource

GROUP = 32  # ConfigResource.Type.GROUP
GROUP_CONFIG_SOURCE = 8  # DescribeConfigs' ConfigSource.GROUP_CONFIG

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


@dataclass(frozen=True, slots=True)
class GroupConfigDef:
    name: str
    type: str  # "int" or "string"
    broker_default: str  # the broker key whose value is the default ("" → `default`)
    default: str
    doc: str
    choices: tuple[str, ...] = ()
    minimum: int = 1


GROUP_CONFIGS = {d.name: d for d in (
    GroupConfigDef("share.auto.offset.reset", "string", "", "latest",
                   "where a share group starts on a partition it has not read: latest or earliest",
                   ("latest", "earliest")),
    GroupConfigDef("share.record.lock.duration.ms", "int", "group.share.record.lock.duration.ms", "30000",
                   "the acquisition lock of records delivered to the group's members", minimum=1000),
    GroupConfigDef("share.isolation.level", "string", "", "read_uncommitted",
                   "read_committed delivers only committed transactional records",
                   ("read_uncommitted", "read_committed")),
    GroupConfigDef("share.session.timeout.ms", "int", "group.share.session.timeout.ms", "45000",
                   "a share group member not heard from for this long is removed"),
    GroupConfigDef("share.heartbeat.interval.ms", "int", "group.share.heartbeat.interval.ms", "5000",
                   "how often share group members heartbeat"),
    GroupConfigDef("consumer.session.timeout.ms", "int", "", "45000",
                   "a consumer group member not heard from for this long is removed"),
    GroupConfigDef("consumer.heartbeat.interval.ms", "int", "", "5000",
                   "how often consumer group members heartbeat"),
)}


def _backing(store):
    return getattr(store, "backing_store", store)


def group_configs(broker, group_id: str) -> dict[str, str]:
    """A group's overrides (blocks on ZooKeeper in a cluster; called when a share-partition is
    created, and by the config APIs)."""
    return _backing(broker.store).group_configs(group_id)


def effective(broker, group_id: str, key: str) -> str:
    overrides = group_configs(broker, group_id)
    if key in overrides:
        return overrides[key]
    return _default(broker, GROUP_CONFIGS[key])


def _default(broker, definition: GroupConfigDef) -> str:
    if definition.broker_default:
        return str(getattr(broker.config, definition.broker_default.replace(".", "_")))
    return definition.default


def validate(configs: dict[str, str]) -> None:
    for key, value in configs.items():
        definition = GROUP_CONFIGS.get(key)
        if definition is None:
            raise InvalidConfigError(f"Unknown group config name: {key}")
        if definition.choices and value not in definition.choices:
            raise InvalidConfigError(f"Invalid value {value} for configuration {key}: String must be one of: "
                                     f"{', '.join(definition.choices)}")
        if definition.type == "int":
            try:
                number = int(value)
            except ValueError:
                raise InvalidConfigError(f"Invalid value {value} for configuration {key}: Not a number of type INT") from None
            if number < definition.minimum:
                raise InvalidConfigError(f"Invalid value {value} for configuration {key}: "
                                         f"Value must be at least {definition.minimum}")


def alter(broker, group_id: str, operations, *, incremental: bool, validate_only: bool) -> None:
    """Apply IncrementalAlterConfigs operations (or, not `incremental`, replace the overrides
    with AlterConfigs' set) to a group's configs."""
    if not group_id:
        raise InvalidRequestError("A group config resource needs a group id")
    overrides = group_configs(broker, group_id) if incremental else {}
    for op in operations:
        operation = op.config_operation if incremental else SET
        if operation == SET:
            if op.value is None:
                raise InvalidRequestError(f"Null value not supported for : {op.name}")
            overrides[op.name] = op.value
        elif operation == DELETE:
            overrides.pop(op.name, None)
        else:
            raise InvalidRequestError(f"Config value append/subtract is not allowed for config key: {op.name}")
    validate(overrides)
    if not validate_only:
        _backing(broker.store).set_group_configs(group_id, overrides)


def describe(broker, group_id: str, *, keys: set[str] | None, include_synonyms: bool,
             include_documentation: bool) -> list[dict]:
    overrides = group_configs(broker, group_id)
    entries = []
    for name, definition in sorted(GROUP_CONFIGS.items()):
        if keys is not None and name not in keys:
            continue
        source = GROUP_CONFIG_SOURCE if name in overrides else int(ConfigSource.DEFAULT_CONFIG)
        value = overrides.get(name, _default(broker, definition))
        entries.append({"name": name, "value": value, "read_only": False, "config_source": source,
                        "is_sensitive": False,
                        "synonyms": [{"name": name, "value": value, "source": source}] if include_synonyms else [],
                        "config_type": 3 if definition.type == "int" else 2,
                        "documentation": definition.doc if include_documentation else None})
    return entries
