"""ShareAcknowledge (api key 79), v1-2: settle acquired records (KIP-932).

ACCEPT, RELEASE or REJECT (and GAP for offsets that hold no record, RENEW to extend a lock) for
records the member holds; each partition's state is persisted before the answer. A record not
acquired by the member, or whose lock expired, is INVALID_RECORD_STATE for its partition and the
partition's other acknowledgements in the request are not applied. The request moves the share
session's epoch on like a ShareFetch; epoch 0 is INVALID_SHARE_SESSION_EPOCH, -1 closes the
session after the acknowledgements.
"""

from __future__ import annotations

from logbroker.coordinator.share_partition_manager import FINAL_SHARE_SESSION_EPOCH
from logbroker.errors import InvalidRequestError, KafkaError, UnknownTopicIdError
from logbroker.security.acl import AclOperation
from logbroker.server.authorization import require_group
from logbroker.types import TopicPartition

API_KEY = 79


async def handle(broker, request) -> dict:
    body = request.body
    manager = broker.share_partition_manager
    names = topic_names(broker, [t.topic_id for t in body.topics])
    try:
        require_group(broker, request, AclOperation.READ, body.group_id)
        if not body.member_id:
            raise InvalidRequestError("The member id is empty")
        session = manager.session(body.group_id, body.member_id, body.share_session_epoch, acknowledge_only=True)
    except KafkaError as exc:
        return {"error_code": exc.code, "error_message": str(exc) or None, "responses": [], "node_endpoints": []}
    errors = await manager.acknowledge(body.group_id, body.member_id, acknowledgements_of(body.topics, names))
    if body.share_session_epoch == FINAL_SHARE_SESSION_EPOCH:
        manager.close_session(session)
    responses = []
    for t in body.topics:
        name = names.get(t.topic_id)
        partitions = []
        for p in t.partitions:
            tp = TopicPartition(name, p.partition_index) if name else None
            error = errors.get(tp) if tp else UnknownTopicIdError(f"Unknown topic id {t.topic_id}")
            partitions.append({"partition_index": p.partition_index, "error_code": error.code if error else 0,
                               "error_message": str(error) if error else None,
                               "current_leader": leader_and_epoch(broker, tp)})
        responses.append({"topic_id": t.topic_id, "partitions": partitions})
    return {"error_code": 0, "responses": responses, "node_endpoints": []}


def topic_names(broker, topic_ids) -> dict:
    """topic id → name (None for an id this cluster does not know)."""
    names = {}
    for topic_id in topic_ids:
        if topic_id not in names:
            info = broker.store.topic_by_id(topic_id)
            names[topic_id] = info.name if info else None
    return names


def acknowledgements_of(topics, names) -> dict[TopicPartition, list[tuple[int, int, list[int]]]]:
    """The acknowledgement batches of a request, by partition (a topic may appear twice)."""
    result: dict[TopicPartition, list[tuple[int, int, list[int]]]] = {}
    for t in topics:
        name = names.get(t.topic_id)
        if name is None:
            continue
        for p in t.partitions:
            if p.acknowledgement_batches:
                result.setdefault(TopicPartition(name, p.partition_index), []).extend(
                    (b.first_offset, b.last_offset, list(b.acknowledge_types)) for b in p.acknowledgement_batches)
    return result


def leader_and_epoch(broker, tp: TopicPartition | None) -> dict:
    partition = broker.replica_manager.partitions.get(tp) if tp else None
    if partition is None or not partition.is_leader:
        return {"leader_id": -1, "leader_epoch": -1}
    return {"leader_id": broker.broker_id, "leader_epoch": partition.leader_epoch}
