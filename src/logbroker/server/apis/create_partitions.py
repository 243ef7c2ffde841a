"""CreatePartitions (api key 37), v0-3: grow topics to a new partition count.

Per topic (clients.md 13: the per-topic results must come back): a topic named twice in one
request is INVALID_REQUEST; an unknown topic UNKNOWN_TOPIC_OR_PARTITION; a count that is not an
increase INVALID_PARTITIONS; a manual assignment of the wrong length, with unknown brokers or
duplicates INVALID_REPLICA_ASSIGNMENT — each with its error_message. With validate_only nothing
changes. New partitions get leaders and logs before the answer (on a cluster: once this broker's
metadata shows them led, or REQUEST_TIMED_OUT after timeout_ms; server/topic_admin.py).
"""

from __future__ import annotations

from collections import Counter

from logbroker.errors import InvalidRequestError, KafkaError
from logbroker.security.acl import AclOperation
from logbroker.server import topic_admin
from logbroker.server.authorization import require_topic
from logbroker.server.client_quotas import ControllerMutationQuota

API_KEY = 37


async def handle(broker, request) -> dict:
    body = request.body
    counts = Counter(topic.name for topic in body.topics)
    mutations = ControllerMutationQuota(broker, request, strict=request.api_version >= 3)
    results = []
    for topic in body.topics:
        result = {"name": topic.name, "error_code": 0, "error_message": None}
        try:
            if counts[topic.name] > 1:
                raise InvalidRequestError("Duplicate topic in request.")
            require_topic(broker, request, AclOperation.ALTER, topic.name)
            assignment = (None if topic.assignments is None
                          else [tuple(a.broker_ids) for a in topic.assignments])
            info = broker.store.topic(topic.name)
            if not body.validate_only:
                mutations.check()
            await topic_admin.create_partitions(broker, topic.name, topic.count, assignment=assignment,
                                                validate_only=body.validate_only,
                                                timeout_ms=int(body.timeout.total_seconds() * 1000))
            if not body.validate_only and info is not None:
                mutations.record(topic.count - info.num_partitions)
        except KafkaError as exc:
            result.update(error_code=exc.code, error_message=str(exc) or None)
        results.append(result)
    return mutations.respond({"results": results})
