"""IncrementalAlterConfigs (api key 44), v0-1: change single topic config keys.

Operations (Kafka's AlterConfigOp.OpType): SET (0) a key's override, DELETE (1) it (the topic
falls back to the broker default), APPEND (2) items to / SUBTRACT (3) items from a list-typed key
such as cleanup.policy. APPEND and SUBTRACT start from the topic's current value — its override,
or else the broker's default (Kafka starts from the topic-config default even when server.properties
changed it; the value a client sees in DescribeConfigs is the better start). APPEND skips items
already there; an emptied list is an empty value.

The resulting set of overrides is validated as a whole, then stored (not with validate_only).
Errors, per resource: a resource named twice in one request, a key named twice in one resource,
an unknown operation, a null value to SET, APPEND/SUBTRACT on a non-list key — INVALID_REQUEST;
an unknown key or bad value — INVALID_CONFIG naming the key; an unknown topic —
UNKNOWN_TOPIC_OR_PARTITION. Broker resources: the same operations on its dynamic configs
(server/broker_configs.py). Group resources (type 32) go to server/group_configs.py,
client-metrics subscriptions (type 16) to server/client_metrics_configs.py.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable

from logbroker.errors import InvalidConfigError, InvalidRequestError
from logbroker.security.acl import AclOperation
from logbroker.server import broker_configs, group_configs
from logbroker.server.config import BROKER_CONFIGS
from logbroker.server.dynamic_config import ListenerKey
from logbroker.server.apis.alter_configs import alter_resources, existing_topic, store_topic_configs
from logbroker.server.authorization import require_config_access
from logbroker.topic_configs import TOPIC_CONFIGS, format_value

API_KEY = 44

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


async def handle(broker, request) -> dict:
    body = request.body
    resource_counts = Counter((r.resource_type, r.resource_name) for r in body.resources)

    def check(resource) -> None:
        if resource_counts[(resource.resource_type, resource.resource_name)] > 1:
            raise InvalidRequestError("Each resource must appear at most once.")
        duplicates = sorted(k for k, n in Counter(c.name for c in resource.configs).items() if n > 1)
        if duplicates:
            raise InvalidRequestError(f"Error due to duplicate config keys: {', '.join(duplicates)}")
        require_config_access(broker, request, AclOperation.ALTER_CONFIGS, resource)

    return await alter_resources(
        broker, body.resources, api_name="IncrementalAlterConfigs", check=check,
        alter_topic=lambda resource: alter_topic(broker, resource.resource_name, resource.configs,
                                                 validate_only=body.validate_only),
        alter_broker=lambda resource: alter_broker(broker, resource.resource_name, resource.configs,
                                                   validate_only=body.validate_only),
        alter_group=lambda resource: group_configs.alter(broker, resource.resource_name, resource.configs,
                                                         incremental=True, validate_only=body.validate_only),
        alter_client_metrics=lambda resource: alter_client_metrics(broker, resource, validate_only=body.validate_only))


async def alter_client_metrics(broker, resource, *, validate_only: bool) -> None:
    """A client-metrics subscription (server/client_metrics_configs.py); APPEND / SUBTRACT on its
    list keys (metrics, match)."""
    telemetry = broker.client_telemetry
    configs = apply_operations(telemetry.configs(resource.resource_name), resource.configs,
                               list_typed=lambda key: key in ("metrics", "match"), current=lambda key: "")

    def store() -> None:
        telemetry.set_configs(resource.resource_name, configs, validate_only=validate_only)
    if broker.zk is None:
        store()
    else:  # a ZooKeeper write: off the event loop
        await asyncio.get_running_loop().run_in_executor(None, store)


async def alter_topic(broker, name: str, operations, *, validate_only: bool) -> None:
    info = existing_topic(broker, name)

    def list_typed(key: str) -> bool:
        definition = TOPIC_CONFIGS.get(key)
        if definition is None:
            raise InvalidConfigError(f"Unknown topic config name: {key}")
        return definition.type == "list"

    overrides = apply_operations(dict(info.configs), operations, list_typed=list_typed,
                                 current=lambda key: broker.topic_log_config(info).to_props()[key])
    await store_topic_configs(broker, name, overrides, validate_only=validate_only)


async def alter_broker(broker, name: str, operations, *, validate_only: bool) -> None:
    """The same operations on a broker's (or the default's) dynamic configs; APPEND and
    SUBTRACT start from the layer's value, else the broker's effective one."""
    def list_typed(key: str) -> bool:
        listener_key = ListenerKey.parse(key)
        definition = BROKER_CONFIGS.get(listener_key.base if listener_key else key)
        return definition is not None and definition.type == "list"

    def current(key: str) -> str:
        value = broker.config.get(key) if key in BROKER_CONFIGS else broker.config.originals.get(key)
        return "" if value is None else format_value(value)

    await broker_configs.alter(
        broker, name, lambda layer: apply_operations(layer, operations, list_typed=list_typed, current=current),
        named=[op.name for op in operations if op.config_operation == SET], validate_only=validate_only)


def apply_operations(configs: dict[str, str], operations, *, list_typed: Callable[[str], bool],
                     current: Callable[[str], str]) -> dict[str, str]:
    """`configs` (a resource's overrides) after `operations`, in order; `current(key)` is a key's
    effective value where it has no override (the start of APPEND / SUBTRACT)."""
    for op in operations:
        key, value = op.name, op.value
        if op.config_operation == SET:
            if value is None:
                raise InvalidRequestError(f"Null value not supported for : {key}")
            configs[key] = value
        elif op.config_operation == DELETE:
            configs.pop(key, None)
        elif op.config_operation in (APPEND, SUBTRACT):
            verb = "append" if op.config_operation == APPEND else "subtract"
            if not list_typed(key):
                raise InvalidRequestError(f"Config value {verb} is not allowed for config key: {key}")
            old = _split(configs[key] if key in configs else current(key))
            given = _split(value or "")
            if op.config_operation == APPEND:
                new = old + [item for item in dict.fromkeys(given) if item not in old]
            else:
                new = [item for item in old if item not in given]
            configs[key] = ",".join(new)
        else:
            raise InvalidRequestError(f"Unknown config operation {op.config_operation} for config key: {key}")
    return configs


def _split(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]
