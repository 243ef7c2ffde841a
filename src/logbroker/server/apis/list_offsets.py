"""ListOffsets (api key 2), v1-10: -1 latest (the high watermark; the last stable offset under
read_committed), -2 earliest (the log start; on a tiered topic the first offset in the remote
store), -3 the max timestamp (v7), -4 the earliest offset on local disk (v8), -5 the last offset
copied to remote storage (v9, KIP-1005; -1/-1/-1 without one), else the first offset whose
timestamp is at least the one asked for, or -1/-1 when there is none (clients.md 12). A timestamp
that remote segments may hold is looked up in the remote store, and the answer then waits for it."""

from __future__ import annotations

import inspect

from logbroker.errors import KafkaError
from logbroker.protocol.responses.list_offsets import (
    ListOffsetsPartitionResult,
    ListOffsetsTopicResult,
    encode_list_offsets_response,
)
from logbroker.security.acl import AclOperation
from logbroker.server.authorization import require_topic
from logbroker.types import TopicPartition

API_KEY = 2


def handle(broker, request):
    """Answers at once, or later when a timestamp is searched in the remote store."""
    body = request.body
    only_committed = body.replica_id < 0
    answers = []
    for topic in body.topics:
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            try:
                require_topic(broker, request, AclOperation.DESCRIBE, topic.name)
                found = broker.replica_manager.fetch_offset_for_timestamp(
                    tp, p.timestamp, current_leader_epoch=getattr(p, "current_leader_epoch", -1),
                    only_committed=only_committed,
                    isolation_level=getattr(body, "isolation_level", 0))
            except KafkaError as exc:
                found = exc
            answers.append((topic.name, p.partition_index, found))
    if any(inspect.isawaitable(found) for _, _, found in answers):
        return _respond_later(request, answers)
    return _respond(request, answers)


async def _respond_later(request, answers):
    settled = []
    for name, partition, found in answers:
        if inspect.isawaitable(found):
            try:
                found = await found
            except KafkaError as exc:
                found = exc
        settled.append((name, partition, found))
    return _respond(request, settled)


def _respond(request, answers):
    topics: dict[str, list] = {}
    for name, partition, found in answers:
        results = topics.setdefault(name, [])
        if isinstance(found, KafkaError):
            results.append(ListOffsetsPartitionResult(partition, found.code))
        elif found is None:
            results.append(ListOffsetsPartitionResult(partition))
        else:
            results.append(ListOffsetsPartitionResult(
                partition, 0, found.timestamp, found.offset,
                -1 if found.leader_epoch is None else found.leader_epoch))
    return [encode_list_offsets_response(
        request.api_version, request.correlation_id,
        [ListOffsetsTopicResult(name, results) for name, results in topics.items()])]
