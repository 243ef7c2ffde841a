"""DeleteTopics (api key 20), v1-6: delete topics by name (v6: by name or by topic id).

As Kafka's ZooKeeper-era broker: with delete.topic.enable=false every topic gets
TOPIC_DELETION_DISABLED (v3+; older versions have no such code and get INVALID_REQUEST); an
unknown name is UNKNOWN_TOPIC_OR_PARTITION, an unknown id UNKNOWN_TOPIC_ID, and an entry with both
a name and an id INVALID_REQUEST. v6 answers each topic with its name and id. The answer comes
once the topic is gone — its logs deleted on a single node, gone from this broker's metadata on a
cluster (REQUEST_TIMED_OUT after timeout_ms) — so a topic of the same name can be created right after.
"""

from __future__ import annotations

import uuid

from logbroker.errors import (
    InvalidRequestError,
    KafkaError,
    TopicDeletionDisabledError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)
from logbroker.security.acl import AclOperation
from logbroker.server import topic_admin
from logbroker.server.authorization import require_topic
from logbroker.server.client_quotas import ControllerMutationQuota

API_KEY = 20
ZERO_UUID = uuid.UUID(int=0)


async def handle(broker, request) -> dict:
    body = request.body
    if request.api_version >= 6:
        wanted = [(t.name, t.topic_id or ZERO_UUID) for t in body.topics]
    else:
        wanted = [(name, ZERO_UUID) for name in body.topic_names]
    deletion_enabled = getattr(broker.config, "delete_topic_enable", True)
    mutations = ControllerMutationQuota(broker, request, strict=request.api_version >= 5)
    responses = []
    for name, topic_id in wanted:
        result = {"name": name, "topic_id": topic_id, "error_code": 0, "error_message": None}
        try:
            if not deletion_enabled:
                if request.api_version >= 3:
                    raise TopicDeletionDisabledError("Topic deletion is disabled.")
                raise InvalidRequestError("Topic deletion is disabled.")
            name, topic_id = _resolve(broker, name, topic_id)
            require_topic(broker, request, AclOperation.DELETE, name)
            result.update(name=name, topic_id=topic_id)
            mutations.check()
            info = broker.store.topic(name)
            mutations.record(info.num_partitions if info is not None else 0)
            await topic_admin.delete_topic(broker, name,
                                           timeout_ms=int(body.timeout.total_seconds() * 1000))
        except KafkaError as exc:
            result.update(error_code=exc.code, error_message=str(exc) or None)
        responses.append(result)
    return mutations.respond({"responses": responses})


def _resolve(broker, name: str | None, topic_id: uuid.UUID) -> tuple[str, uuid.UUID]:
    """(name, topic id) of an existing topic named by name or by id."""
    store = broker.store
    if topic_id != ZERO_UUID:
        if name is not None:
            raise InvalidRequestError("Topic name and topic ID can not both be specified.")
        for info in store.topics().values():
            if info.topic_id == topic_id:
                return info.name, info.topic_id
        raise UnknownTopicIdError("This server does not host this topic ID.")
    info = store.topic(name) if name is not None else None
    if info is None:
        raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist.")
    return info.name, info.topic_id

