"""CreateTopics (api key 19), v2-7: create topics, or with validate_only check that they could be.

Per topic, as Kafka's ZooKeeper-era broker: a name given twice in one request is INVALID_REQUEST
for each entry; num_partitions / replication_factor of -1 take num.partitions /
default.replication.factor; a manual assignment excludes both; a config with a null value is
INVALID_CONFIG; a name colliding with an existing topic's once '.' and '_' are treated alike is
INVALID_TOPIC_EXCEPTION (their metric names would clash). Each failure carries its error_message.

v5+ answers a created (or validated) topic with its partition count, replication factor and every
topic config with its source, as DescribeConfigs would (clients.md 13); v7 with its topic id
(zero for validate_only: nothing was created). A failed topic gets -1, -1 and no configs.

The answer comes once the topic is ready: on a single node its logs exist; on a cluster this
broker's metadata shows every partition led, or after timeout_ms the topic gets REQUEST_TIMED_OUT
(it is still created; server/topic_admin.py).

Each created topic's partitions count against the client's controller_mutation_rate; from v6 a
topic asked for while that quota is exhausted gets THROTTLING_QUOTA_EXCEEDED (server/client_quotas.py).
"""

from __future__ import annotations

import uuid

from collections import Counter

from logbroker.errors import (
    InvalidConfigError,
    InvalidRequestError,
    KafkaError,
    TopicAuthorizationFailedError,
)
from logbroker.metadata.model import TopicInfo
from logbroker.server import topic_admin
from logbroker.server.apis.describe_configs import topic_config_entries
from logbroker.server.authorization import may_create_topic
from logbroker.server.client_quotas import ControllerMutationQuota

API_KEY = 19
NO_NUM_PARTITIONS = -1
NO_REPLICATION_FACTOR = -1
ZERO_UUID = uuid.UUID(int=0)


async def handle(broker, request) -> dict:
    body = request.body
    counts = Counter(topic.name for topic in body.topics)
    mutations = ControllerMutationQuota(broker, request, strict=request.api_version >= 6)
    results = []
    for topic in body.topics:
        try:
            if counts[topic.name] > 1:
                raise InvalidRequestError("Found multiple entries for this topic.")
            if not may_create_topic(broker, request, topic.name):
                raise TopicAuthorizationFailedError(f"Not authorized to create topic {topic.name}.")
            if not body.validate_only:
                mutations.check()
            info = await create_topic(broker, topic, validate_only=body.validate_only,
                                      timeout_ms=int(body.timeout.total_seconds() * 1000))
            if not body.validate_only:
                mutations.record(info.num_partitions)
        except KafkaError as exc:
            results.append({"name": topic.name, "topic_id": ZERO_UUID, "error_code": exc.code,
                            "error_message": str(exc) or None, "num_partitions": -1,
                            "replication_factor": -1, "configs": []})
            continue
        results.append({
            "name": topic.name,
            "topic_id": ZERO_UUID if body.validate_only else info.topic_id,
            "error_code": 0,
            "error_message": None,
            "num_partitions": info.num_partitions,
            "replication_factor": info.replication_factor,
            "configs": topic_config_entries(broker, info) if request.api_version >= 5 else [],
        })
    return mutations.respond({"topics": results})


async def create_topic(broker, topic, *, validate_only: bool, timeout_ms: int) -> TopicInfo:
    """Create (or validate) one CreatableTopic. Raises the KafkaError to answer it with."""
    null_configs = [c.name for c in topic.configs if c.value is None]
    if null_configs:
        raise InvalidConfigError(f"Null value not supported for topic configs: {','.join(null_configs)}")
    assignment = {a.partition_index: tuple(a.broker_ids) for a in topic.assignments}
    if assignment and (topic.num_partitions != NO_NUM_PARTITIONS
                       or topic.replication_factor != NO_REPLICATION_FACTOR):
        raise InvalidRequestError("Both numPartitions or replicationFactor and replicasAssignments "
                                  "were set. Both cannot be used at the same time.")
    return await topic_admin.create_topic(
        broker, topic.name, num_partitions=topic.num_partitions,
        replication_factor=topic.replication_factor, configs={c.name: c.value for c in topic.configs},
        assignment=assignment or None, validate_only=validate_only, timeout_ms=timeout_ms)
