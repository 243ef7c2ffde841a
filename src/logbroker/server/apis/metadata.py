"""Metadata (api key 3): brokers, cluster id, controller, and each topic's partitions.

Unknown topics are created here when the request allows it and auto.create.topics.enable is on
(clients.md 14). v0 treats an empty topic list as "all topics"; v1+ uses null for that; v10+ may
name a topic by id alone. Encoded by hand (protocol/responses/metadata.py): kio takes ~1 ms for
ten topics, and clients ask often.
"""

from __future__ import annotations

import uuid

from logbroker.errors import (
    InvalidRequestError,
    KafkaError,
    LeaderNotAvailableError,
    TopicAuthorizationFailedError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)
from logbroker.coordinator.offsets_schema import OFFSETS_TOPIC
from logbroker.metadata.model import TopicInfo
from logbroker.protocol.responses.metadata import (
    AUTHORIZED_OPERATIONS_OMITTED,
    MetadataBroker,
    MetadataPartition,
    MetadataTopic,
    encode_metadata_response,
)
from logbroker.security.acl import AclOperation
from logbroker.server.apis.describe_cluster import cluster_operations
from logbroker.server.client_quotas import throttle_request
from logbroker.server.authorization import TOPIC, allowed, authorized_operations, may_create_topic
from logbroker.types import TopicPartition

API_KEY = 3
LISTENER_NOT_FOUND = 72  # not in the KafkaError tree: only Metadata answers it
# Without an authorizer every operation is allowed; Kafka then reports all of them when asked.
DESCRIBE = AclOperation.DESCRIBE
ALL_TOPIC_OPERATIONS = 3576  # READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS


def handle(broker, request):
    body = request.body
    store = broker.store
    version = request.api_version
    topic_ops = ALL_TOPIC_OPERATIONS if getattr(body, "include_topic_authorized_operations", False) \
        else AUTHORIZED_OPERATIONS_OMITTED
    cluster_ops = cluster_operations(broker, request) if getattr(body, "include_cluster_authorized_operations", False) \
        else AUTHORIZED_OPERATIONS_OMITTED
    list_all = body.topics is None or (version == 0 and not body.topics)
    if list_all:
        wanted = [(name, None) for name in sorted(store.topics())]
    else:
        wanted = [(t.name, getattr(t, "topic_id", None)) for t in body.topics]
    allow_auto_create = getattr(body, "allow_auto_topic_creation", True) and broker.config.auto_create_topics_enable
    brokers = [MetadataBroker(b.broker_id, b.host, b.port, b.rack) for b in broker.brokers(getattr(request.connection, "listener_name", None))]
    # Live brokers the client cannot reach: registered without the listener it connected on.
    unreachable = set(broker.store.brokers()) - {b.node_id for b in brokers} if broker.cluster is not None else set()
    topics = []
    for name, topic_id in wanted:
        ops = topic_ops
        if name is None and version < 12:
            # v10-11 requests may carry a null name (the schema allows it) but their responses
            # may not, and topic ids are only honoured from v12: Kafka refuses it as INVALID_REQUEST.
            topics.append(MetadataTopic(InvalidRequestError.code, "", topic_id=topic_id,
                                        topic_authorized_operations=ops))
            continue
        try:
            if broker.authorizer is None:
                info = _lookup(broker, name, topic_id, allow_auto_create)
            else:
                info = _authorized_lookup(broker, request, name, topic_id, allow_auto_create, list_all)
                if info is None:
                    continue
                if ops != AUTHORIZED_OPERATIONS_OMITTED:
                    ops = authorized_operations(broker, request, TOPIC, info.name)
        except KafkaError as exc:
            topics.append(MetadataTopic(exc.code, name, topic_id=topic_id,
                                        topic_authorized_operations=ops))
            continue
        topics.append(describe_topic(broker, info, ops, unreachable))
    quotas = broker.client_quotas
    throttle_ms = throttle_request(broker, request) if quotas is not None and quotas.enabled else 0
    return [encode_metadata_response(version, request.correlation_id, brokers=brokers, topics=topics,
                                     cluster_id=broker.cluster_id, controller_id=broker.controller_id,
                                     cluster_authorized_operations=cluster_ops, throttle_time_ms=throttle_ms)]


def _authorized_lookup(broker, request, name: str | None, topic_id: uuid.UUID | None,
                       allow_auto_create: bool, list_all: bool) -> TopicInfo | None:
    """As `_lookup`, for a principal: a topic it may not DESCRIBE is left out of a list-all answer
    (None) and is TOPIC_AUTHORIZATION_FAILED when named, whether it exists or not; creating one
    needs CREATE on the cluster or the topic."""
    if name and not allowed(broker, request, DESCRIBE, TOPIC, name, log_denied=not list_all):
        if list_all:
            return None
        raise TopicAuthorizationFailedError(f"Not authorized to describe topic {name}")
    may_create = allow_auto_create and bool(name) and broker.store.topic(name) is None \
        and may_create_topic(broker, request, name)
    try:
        info = _lookup(broker, name, topic_id, may_create)
    except UnknownTopicOrPartitionError:
        if allow_auto_create:
            raise TopicAuthorizationFailedError(f"Not authorized to create topic {name}") from None
        raise
    if not name and not allowed(broker, request, DESCRIBE, TOPIC, info.name):
        raise TopicAuthorizationFailedError(f"Not authorized to describe topic id {topic_id}")
    return info


def _lookup(broker, name: str | None, topic_id: uuid.UUID | None, allow_auto_create: bool) -> TopicInfo:
    store = broker.store
    if not name and topic_id is not None and topic_id.int != 0:
        info = store.topic_by_id(topic_id)
        if info is not None:
            return info
        raise UnknownTopicIdError(f"Topic id {topic_id} does not exist")
    info = store.topic(name)
    if info is not None:
        return info
    if not allow_auto_create:
        raise UnknownTopicOrPartitionError(f"Topic {name} does not exist")
    if name == OFFSETS_TOPIC:
        # An internal topic gets its own settings (Kafka's createInternalTopic), never the defaults.
        broker.group_coordinator.ensure_offsets_topic()
        info = store.topic(name)
        if info is None:
            raise LeaderNotAvailableError(f"{name} is being created")
        return info
    config = broker.config
    return broker.create_topic(name, num_partitions=config.num_partitions,
                               replication_factor=config.default_replication_factor, configs={})


def describe_topic(broker, info: TopicInfo, topic_ops: int = AUTHORIZED_OPERATIONS_OMITTED,
                   unreachable: set[int] = frozenset()) -> MetadataTopic:
    """`unreachable`: live brokers without the client's listener; a leader among them is
    answered as leader -1 with LISTENER_NOT_FOUND, as Kafka does."""
    live = broker.controller.live_brokers
    partitions = []
    for partition, replicas in sorted(info.assignment.items()):
        state = broker.store.partition_state(TopicPartition(info.name, partition))
        leader = state.leader if state else -1
        error = LeaderNotAvailableError.code if leader < 0 else 0
        if leader in unreachable:
            leader, error = -1, LISTENER_NOT_FOUND
        partitions.append(MetadataPartition(
            error, partition, leader,
            state.leader_epoch if state else -1, list(replicas), list(state.isr) if state else [],
            [r for r in replicas if r not in live]))
    return MetadataTopic(0, info.name, partitions, info.topic_id, info.name.startswith("__"), topic_ops)
