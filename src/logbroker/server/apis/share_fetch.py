"""ShareFetch (api key 78), v1-2: acquire records for a share group member (KIP-932).

The request carries the member's share session epoch (share_partition_manager.py has the rules),
the partitions to add to the session and to forget, and piggybacked acknowledgements, which are
applied and persisted before anything is fetched. The response lists, per partition, the whole
batches that hold acquired records and the acquired ranges with their delivery counts; the client
delivers exactly those offsets. `max_records` is a soft limit on batch boundaries (whole batches,
no new one once it is reached) unless a v2 request asks for ShareAcquireMode RECORD_LIMIT. The
session holds its partitions by topic id: one whose topic was deleted (perhaps created again
under its name, with another id) is no longer read. Errors: a bad session epoch or an
acknowledgement on the opening request is a top-level error; per partition, the fetch error
(UNKNOWN_TOPIC_ID, NOT_LEADER_OR_FOLLOWER, …) and the acknowledgement error
(INVALID_RECORD_STATE, …) apart.
"""

from __future__ import annotations

from logbroker.coordinator.share_partition_manager import FINAL_SHARE_SESSION_EPOCH, check_no_acknowledgements_on_open
from logbroker.errors import InvalidRequestError, KafkaError, UnknownTopicIdError
from logbroker.security.acl import AclOperation
from logbroker.server.apis.share_acknowledge import acknowledgements_of, leader_and_epoch, topic_names
from logbroker.server.authorization import require_group
from logbroker.types import TopicPartition

API_KEY = 78
# ShareFetch v2's ShareAcquireMode (KIP-1206); v1 is always batch-optimized.
BATCH_OPTIMIZED, RECORD_LIMIT = 0, 1


async def handle(broker, request) -> dict:
    body = request.body
    manager = broker.share_partition_manager
    names = topic_names(broker, [t.topic_id for t in body.topics]
                        + [t.topic_id for t in body.forgotten_topics_data])
    try:
        require_group(broker, request, AclOperation.READ, body.group_id)
        if not body.member_id:
            raise InvalidRequestError("The member id is empty")
        acknowledgements = acknowledgements_of(body.topics, names)
        check_no_acknowledgements_on_open(body.share_session_epoch, bool(acknowledgements))
        session = manager.session(body.group_id, body.member_id, body.share_session_epoch)
    except KafkaError as exc:
        return _error(exc)
    requested = [(t.topic_id, p.partition_index) for t in body.topics for p in t.partitions]
    if body.share_session_epoch != FINAL_SHARE_SESSION_EPOCH:
        for topic_id, index in requested:
            if (name := names.get(topic_id)) is not None:
                session.partitions[(topic_id, index)] = TopicPartition(name, index)
        for t in body.forgotten_topics_data:
            for index in t.partitions:
                session.partitions.pop((t.topic_id, index), None)
    ack_errors = await manager.acknowledge(body.group_id, body.member_id, acknowledgements) \
        if acknowledgements else {}
    if body.share_session_epoch == FINAL_SHARE_SESSION_EPOCH:
        manager.close_session(session)
        acquired = {}
    else:
        # Only the session's partitions whose topic still has that id: a topic deleted (and
        # perhaps created again under its name) is not read for a client that knows the old id.
        current = topic_names(broker, [topic_id for topic_id, _ in session.partitions])
        live = {tp: key for key, tp in session.partitions.items() if current[key[0]] == tp.topic}
        acquired = await manager.acquire(
            body.group_id, body.member_id, sorted(live),
            max_wait_ms=int(body.max_wait.total_seconds() * 1000),
            max_bytes=body.max_bytes, max_records=max(body.max_records, 1),
            record_limit=getattr(body, "share_acquire_mode", BATCH_OPTIMIZED) == RECORD_LIMIT)
    # Answer the partitions asked about, acknowledged, or with records or an error to report.
    wanted: dict[tuple, None] = dict.fromkeys(requested)
    for tp in ack_errors:
        if (info := broker.store.topic(tp.topic)) is not None:
            wanted[(info.topic_id, tp.partition)] = None
    for tp, result in acquired.items():
        if result.acquired or result.error:
            wanted[live[tp]] = None
    topics: dict = {}
    for topic_id, index in wanted:
        name = names.get(topic_id) or _name(broker, topic_id)
        tp = TopicPartition(name, index) if name else None
        result = acquired.get(tp) if tp else None
        error = UnknownTopicIdError(f"Unknown topic id {topic_id}") if tp is None else (result.error if result else None)
        ack_error = ack_errors.get(tp) if tp else None
        topics.setdefault(topic_id, []).append({
            "partition_index": index, "error_code": error.code if error else 0,
            "error_message": str(error) if error else None,
            "acknowledge_error_code": ack_error.code if ack_error else 0,
            "acknowledge_error_message": str(ack_error) if ack_error else None,
            "current_leader": leader_and_epoch(broker, tp),
            "records": result.records if result else b"",
            "acquired_records": [{"first_offset": a.first_offset, "last_offset": a.last_offset,
                                  "delivery_count": a.delivery_count} for a in (result.acquired if result else ())]})
    return {"error_code": 0, "acquisition_lock_timeout": broker.config.group_share_record_lock_duration_ms,
            "responses": [{"topic_id": topic_id, "partitions": partitions} for topic_id, partitions in topics.items()],
            "node_endpoints": []}


def _name(broker, topic_id) -> str | None:
    info = broker.store.topic_by_id(topic_id)
    return info.name if info else None


def _error(exc: KafkaError) -> dict:
    return {"error_code": exc.code, "error_message": str(exc) or None, "acquisition_lock_timeout": 0,
            "responses": [], "node_endpoints": []}
