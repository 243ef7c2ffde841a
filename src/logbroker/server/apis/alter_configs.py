"""AlterConfigs (api key 33), v0-2: replace a topic's config overrides with the given set.

Kafka's semantics, which surprise people: the set given becomes the topic's *whole* set of
overrides, so every override not named is removed (IncrementalAlterConfigs changes single keys).
The new set is validated as a whole before anything changes: an unknown key or a bad value is
INVALID_CONFIG naming the key (Kafka's ZooKeeper-era broker says INVALID_REQUEST for a bad value;
KRaft and we say INVALID_CONFIG), a null value INVALID_REQUEST. validate_only stops after the
checks. On a cluster the new set goes to ZooKeeper off the event loop and every broker applies it
from its config-change watch (server/topic_admin.py).

Broker resources ("<id>": this broker's dynamic configs, "": the cluster-wide default): the given
set becomes the resource's whole set of dynamic configs too (server/broker_configs.py; which keys
may change: server/dynamic_config.py). Other resource types are INVALID_REQUEST.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from logbroker.errors import InvalidRequestError, KafkaError, UnknownTopicOrPartitionError
from logbroker.metadata.model import TopicInfo
from logbroker.security.acl import AclOperation
from logbroker.server.client_metrics_configs import CLIENT_METRICS
from logbroker.server import broker_configs, group_configs, topic_admin
from logbroker.server.apis.describe_configs import BROKER, TOPIC
from logbroker.server.authorization import require_config_access

ALTER_CONFIGS = AclOperation.ALTER_CONFIGS


API_KEY = 33

log = logging.getLogger("kafka.server.ZkAdminManager")


async def handle(broker, request) -> dict:
    body = request.body

    async def alter_topic(resource) -> None:
        null_values = [c.name for c in resource.configs if c.value is None]
        if null_values:
            raise InvalidRequestError(f"Null value not supported for : {','.join(null_values)}")
        await replace_topic_configs(broker, resource.resource_name,
                                    {c.name: c.value for c in resource.configs},
                                    validate_only=body.validate_only)

    async def alter_broker(resource) -> None:
        null_values = [c.name for c in resource.configs if c.value is None]
        if null_values:
            raise InvalidRequestError(f"Null value not supported for : {','.join(null_values)}")
        given = {c.name: c.value for c in resource.configs}
        await broker_configs.alter(broker, resource.resource_name, lambda _old: given, named=given,
                                   validate_only=body.validate_only)

    return await alter_resources(broker, body.resources, api_name="AlterConfigs", alter_topic=alter_topic,
                                 alter_broker=alter_broker, alter_group=lambda resource: group_configs.alter(
                                     broker, resource.resource_name, resource.configs, incremental=False,
                                     validate_only=body.validate_only),
                                 check=lambda r: require_config_access(broker, request, ALTER_CONFIGS, r))


async def alter_resources(broker, resources, *, api_name: str,
                          alter_topic: Callable[[Any], Awaitable[None]],
                          alter_broker: Callable[[Any], Awaitable[None]],
                          check: Callable[[Any], None] | None = None,
                          alter_group: Callable[[Any], None] | None = None,
                          alter_client_metrics: Callable[[Any], Awaitable[None]] | None = None) -> dict:
    """The response of AlterConfigs and IncrementalAlterConfigs: each resource through `check`,
    then `alter_topic`, `alter_broker`, `alter_group` or `alter_client_metrics` by its type; errors
    per resource."""
    responses = []
    for resource in resources:
        result = {"resource_type": resource.resource_type, "resource_name": resource.resource_name,
                  "error_code": 0, "error_message": None}
        try:
            if check is not None:
                check(resource)
            if resource.resource_type == TOPIC:
                await alter_topic(resource)
            elif resource.resource_type == group_configs.GROUP and alter_group is not None:
                alter_group(resource)
            elif resource.resource_type == CLIENT_METRICS and alter_client_metrics is not None:
                await alter_client_metrics(resource)
            elif resource.resource_type == BROKER:
                await alter_broker(resource)
            else:
                raise InvalidRequestError(f"{api_name} is only supported for topics and brokers, "
                                          f"but resource type is {resource.resource_type}")
        except KafkaError as exc:
            result.update(error_code=exc.code, error_message=str(exc) or None)
        responses.append(result)
    return {"responses": responses}


def existing_topic(broker, name: str) -> TopicInfo:
    """The topic a config resource names: INVALID_REQUEST for the default (empty) name,
    UNKNOWN_TOPIC_OR_PARTITION for a topic that does not exist."""
    if not name:
        raise InvalidRequestError("Default topic resources are not allowed.")
    info = broker.store.topic(name)
    if info is None:
        raise UnknownTopicOrPartitionError(f"The topic '{name}' does not exist.")
    return info


async def replace_topic_configs(broker, name: str, configs: dict[str, str], *,
                                validate_only: bool) -> None:
    """Make `configs` the topic's whole set of overrides, after validating them together."""
    existing_topic(broker, name)
    await store_topic_configs(broker, name, configs, validate_only=validate_only)


async def store_topic_configs(broker, name: str, configs: dict[str, str], *,
                              validate_only: bool) -> None:
    """Validate `configs` together as an existing topic's whole set of overrides, then (unless
    `validate_only`) store them."""
    broker.check_topic_configs(name, configs)  # InvalidConfigError naming the key
    if validate_only:
        return
    log.info("Updating topic %s with new configuration : %s", name,
             ",".join(f"{k}={v}" for k, v in sorted(configs.items())))
    await topic_admin.set_topic_configs(broker, name, configs)
