"""ListConfigResources (api key 74; v0 was ListClientMetricsResources): v0 lists the
client-metrics subscriptions; v1 the config resources of the asked types (none asked: every type)
— topics (2), brokers (4) and broker loggers (8) by id, client-metrics subscriptions (16), the groups
this broker coordinates (32). Another type is INVALID_REQUEST. Needs
DESCRIBE_CONFIGS on the cluster, as in Kafka."""

from __future__ import annotations

from logbroker.errors import InvalidRequestError, KafkaError
from logbroker.security.acl import AclOperation
from logbroker.server.authorization import require_cluster
from logbroker.server.client_metrics_configs import CLIENT_METRICS

API_KEY = 74
TOPIC, BROKER, BROKER_LOGGER, GROUP = 2, 4, 8, 32
LISTED_TYPES = (TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP)


def handle(broker, request) -> dict:
    asked = tuple(getattr(request.body, "resource_types", ()) or ()) if request.api_version >= 1 else (CLIENT_METRICS,)
    try:
        require_cluster(broker, request, AclOperation.DESCRIBE_CONFIGS)
        unknown = sorted(set(asked) - set(LISTED_TYPES))
        if unknown:
            raise InvalidRequestError(f"Unsupported resource types: {unknown}")
        resources = []
        for resource_type in asked or LISTED_TYPES:
            resources += [{"resource_name": name, "resource_type": resource_type}
                          for name in _names(broker, resource_type)]
    except KafkaError as exc:
        return {"error_code": exc.code, "config_resources": []}
    return {"error_code": 0, "config_resources": resources}


def _names(broker, resource_type: int) -> list[str]:
    if resource_type == CLIENT_METRICS:
        return broker.client_telemetry.names()
    if resource_type == TOPIC:
        return sorted(broker.store.topics())
    if resource_type in (BROKER, BROKER_LOGGER):
        return [str(b.broker_id) for b in sorted(broker.brokers(), key=lambda b: b.broker_id)]
    return sorted(g.group_id for g in broker.group_coordinator.owned_groups())
