"""AlterClientQuotas (api key 49), v0-1: set or remove quota configs of users, client ids, both,
and their defaults (a null entity name is the default).

Each entry is checked, then written (unless validate_only) as one change of the entity's config,
with Kafka's errors per entry (ClientQuotaControlManager): an empty entity, a duplicate or unknown
entity type, an empty name, an unknown quota key, a value not above 0, a fraction for
producer_byte_rate / consumer_byte_rate — INVALID_REQUEST; IP entities (connection_creation_rate)
are not kept by logbroker and are refused the same way. Without ALTER_CONFIGS on the cluster
(authorizer on) every entry gets CLUSTER_AUTHORIZATION_FAILED.

On a cluster the write goes to ZooKeeper with a change notice (metadata/zk_quotas.py), so every
broker applies it within a ZooKeeper round trip; this broker applies it at once.
"""

from __future__ import annotations

import asyncio

from logbroker.errors import KafkaError
from logbroker.metadata.quota_entities import apply_ops, entity_path, validate_entity
from logbroker.security.acl import AclOperation
from logbroker.server.authorization import require_cluster

API_KEY = 49


async def handle(broker, request) -> dict:
    body = request.body
    try:
        require_cluster(broker, request, AclOperation.ALTER_CONFIGS)
        denied = None
    except KafkaError as exc:
        denied = exc
    results = []
    for entry in body.entries:
        echo = [{"entity_type": e.entity_type, "entity_name": e.entity_name} for e in entry.entity]
        try:
            if denied is not None:
                raise denied
            await _alter(broker, entry, validate_only=body.validate_only)
            results.append({"error_code": 0, "error_message": None, "entity": echo})
        except KafkaError as exc:
            results.append({"error_code": exc.code, "error_message": str(exc), "entity": echo})
    return {"entries": results}


async def _alter(broker, entry, *, validate_only: bool) -> None:
    entity = validate_entity((e.entity_type, e.entity_name) for e in entry.entity)
    path = entity_path(entity)
    ops = [(op.key, float(op.value), op.remove) for op in entry.ops]
    apply_ops({}, ops)  # validate before touching the store
    if validate_only:
        return
    store = broker.quota_store
    new = await asyncio.get_running_loop().run_in_executor(
        None, lambda: store.alter_entity(path, lambda config: apply_ops(config, ops)))
    broker.client_quotas.update_entity(path, new)
