"""DescribeTopicPartitions (api key 75), v0: topics and their partitions, a page at a time.

As Kafka's DescribeTopicPartitionsRequestHandler (KIP-966), which Kafka 3.8+'s `kafka-topics.sh
--describe` uses first (librdkafka's DescribeTopics uses Metadata). An empty topic list means
every topic. Topics are answered in name order, starting at the cursor's topic (and, in it, the
cursor's partition); at most `response_partition_limit` partitions (capped at
max.request.partition.size.limit, 2000 by default, and at least 1) go in one answer, and when
more remain `next_cursor` names the topic and partition to ask for next. A topic of the list the
principal may not DESCRIBE is TOPIC_AUTHORIZATION_FAILED with a zero topic id, whether it exists
or not (left out silently when listing every topic); a named topic that does not exist is
UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for a name Kafka could never create). A cursor
whose topic is not in the list, or with a negative partition, is INVALID_REQUEST for every topic.
"""

from __future__ import annotations

import uuid

from logbroker.errors import (
    InvalidRequestError,
    InvalidTopicError,
    LeaderNotAvailableError,
    TopicAuthorizationFailedError,
    UnknownTopicOrPartitionError,
)
from logbroker.metadata.model import TopicInfo
from logbroker.security.acl import AclOperation
from logbroker.server.authorization import TOPIC, allowed, authorized_operations
from logbroker.metadata.controller import validate_topic_name
from logbroker.types import TopicPartition

API_KEY = 75
ZERO_UUID = uuid.UUID(int=0)


def handle(broker, request) -> dict:
    body = request.body
    list_all = not body.topics
    cursor = body.cursor
    start_topic = cursor.topic_name if cursor is not None else ""
    names = broker.store.topics() if list_all else {t.name for t in body.topics}
    names = sorted(n for n in names if n >= start_topic)
    if cursor is not None and ((not list_all and cursor.topic_name not in names) or cursor.partition_index < 0):
        return {"throttle_time": 0, "topics": [
            {"error_code": InvalidRequestError.code, "name": t.name, "topic_id": ZERO_UUID, "partitions": []}
            for t in body.topics]}
    denied, topics, next_cursor = [], [], None
    remaining = max(min(broker.config.max_request_partition_size_limit, body.response_partition_limit), 1)
    for name in names:
        if not allowed(broker, request, AclOperation.DESCRIBE, TOPIC, name, log_denied=not list_all):
            if not list_all:
                denied.append({"error_code": TopicAuthorizationFailedError.code, "name": name,
                               "topic_id": ZERO_UUID, "partitions": []})
            continue
        if remaining == 0:
            next_cursor = {"topic_name": name, "partition_index": 0}
            break
        info = broker.store.topic(name)
        if info is None:
            if not list_all:
                topics.append({"error_code": _missing_topic_code(name), "name": name,
                               "topic_id": ZERO_UUID, "is_internal": name.startswith("__"), "partitions": []})
            continue
        first = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        indexes = sorted(info.assignment)[first:]
        page = indexes[:remaining]
        topics.append({"error_code": 0, "name": name, "topic_id": info.topic_id or ZERO_UUID,
                       "is_internal": name.startswith("__"), "partitions": _partitions(broker, info, page),
                       "topic_authorized_operations": authorized_operations(broker, request, TOPIC, name)})
        if len(page) < len(indexes):
            next_cursor = {"topic_name": name, "partition_index": indexes[len(page)]}
            break
        remaining -= len(page)
    return {"throttle_time": 0, "topics": topics + denied, "next_cursor": next_cursor}


def _missing_topic_code(name: str) -> int:
    try:
        validate_topic_name(name)
    except InvalidTopicError:
        return InvalidTopicError.code
    return UnknownTopicOrPartitionError.code


def _partitions(broker, info: TopicInfo, indexes: list[int]) -> list[dict]:
    live = broker.controller.live_brokers
    partitions = []
    for index in indexes:
        replicas = list(info.assignment[index])
        state = broker.store.partition_state(TopicPartition(info.name, index))
        leader = state.leader if state else -1
        partitions.append({
            "error_code": LeaderNotAvailableError.code if leader < 0 else 0, "partition_index": index,
            "leader_id": leader, "leader_epoch": state.leader_epoch if state else -1,
            "replica_nodes": replicas, "isr_nodes": list(state.isr) if state else [],
            "eligible_leader_replicas": [], "last_known_elr": [],
            "offline_replicas": [r for r in replicas if r not in live]})
    return partitions
