"""DescribeClientQuotas (api key 48), v0-1: the quota configs of the entities a filter matches.

A filter has at most one component per entity type (user, client-id), each matching an exact
name (match type 0), the default (1) or any name, the default included (2); an entity type with
no component matches entities without that type, or any entity when `strict` is false — Kafka's
ZkAdminManager.describeClientQuotas. Only entities with at least one quota key are listed (a user
with only SCRAM credentials is not). Errors, for the whole request: a duplicate or empty entity
type, or ip with user/client-id, INVALID_REQUEST; another entity type UNSUPPORTED_VERSION; without
DESCRIBE_CONFIGS on the cluster (authorizer on) CLUSTER_AUTHORIZATION_FAILED.

Reads the store itself (ZooKeeper on a cluster), so an alteration made through any broker is
seen at once.
"""

from __future__ import annotations

import asyncio

from logbroker.errors import InvalidRequestError, KafkaError, UnsupportedVersionError
from logbroker.metadata.quota_entities import CLIENT_ID, IP, USER, entity_of_path, quota_values
from logbroker.security.acl import AclOperation
from logbroker.server.authorization import require_cluster

API_KEY = 48

MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2
_ABSENT = object()


async def handle(broker, request) -> dict:
    body = request.body
    try:
        require_cluster(broker, request, AclOperation.DESCRIBE_CONFIGS)
        components = _components(body.components)
        if IP in components:
            return _answer([])  # IP quotas are not kept (AlterClientQuotas refuses them)
        configs = await asyncio.get_running_loop().run_in_executor(None, broker.quota_store.read_all)
    except KafkaError as exc:
        return {"error_code": exc.code, "error_message": str(exc), "entries": None}
    entries = []
    for path, config in sorted(configs.items()):
        values = quota_values(config)
        if not values:
            continue
        try:
            entity = entity_of_path(path)
        except ValueError:
            continue
        if all(_matches(components.get(t), entity.get(t, _ABSENT), body.strict) for t in (USER, CLIENT_ID)):
            entries.append({
                "entity": [{"entity_type": t, "entity_name": entity[t]} for t in (USER, CLIENT_ID) if t in entity],
                "values": [{"key": k, "value": v} for k, v in sorted(values.items())]})
    return _answer(entries)


def _answer(entries: list) -> dict:
    return {"error_code": 0, "error_message": None, "entries": entries}


def _components(components) -> dict[str, tuple[int, str | None]]:
    found: dict[str, tuple[int, str | None]] = {}
    for component in components:
        entity_type = component.entity_type
        if entity_type in found:
            name = "client" if entity_type == CLIENT_ID else entity_type
            raise InvalidRequestError(f"Duplicate {name} filter component entity type")
        if entity_type == "":
            raise InvalidRequestError("Unexpected empty filter component entity type")
        if entity_type not in (USER, CLIENT_ID, IP):
            raise UnsupportedVersionError(f"Custom entity type '{entity_type}' not supported")
        if component.match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED):
            raise InvalidRequestError(f"Unexpected match type: {component.match_type}")
        if component.match_type == MATCH_EXACT and component.match is None:
            raise InvalidRequestError(f"An exact match of {entity_type} needs a name")
        found[entity_type] = (component.match_type, component.match)
    if IP in found and len(found) > 1:
        raise InvalidRequestError("Invalid entity filter component combination, IP filter component should "
                                  "not be used with user or clientId filter component.")
    return found


def _matches(component: tuple[int, str | None] | None, name, strict: bool) -> bool:
    """`name` is _ABSENT (the entity lacks the type), None (the default) or a name."""
    if component is None:
        return name is _ABSENT or not strict
    match_type, match = component
    if name is _ABSENT:
        return False
    if match_type == MATCH_EXACT:
        return name == match
    if match_type == MATCH_DEFAULT:
        return name is None
    return True
