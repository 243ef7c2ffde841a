"""OffsetFetch (api key 9), v1-10: a group's committed offsets.

A partition with no commit gets offset -1 and empty metadata; null topics (v2+) mean every
partition the group has committed. v5+ returns the committed leader epoch (-1 when the commit
carried none). v2+ has a top-level error, v8+ answers a batch of groups. With require_stable
(v7+), a partition whose group holds an offset committed in a transaction not yet complete
answers UNSTABLE_OFFSET_COMMIT (the consumer retries), as Kafka. v9+ may name the asking member
of a KIP-848 consumer group: an unknown one is UNKNOWN_MEMBER_ID, a stale epoch
STALE_MEMBER_EPOCH. v10 names topics by id: an id we
do not know is UNKNOWN_TOPIC_ID, and every topic of the answer carries its id.
"""

from __future__ import annotations

from logbroker.coordinator.transactional_offsets import has_pending_offset
from logbroker.errors import KafkaError, TopicAuthorizationFailedError, UnknownTopicIdError, UnstableOffsetCommitError
from logbroker.security.acl import AclOperation
from logbroker.server.apis._topic_ids import topic_id, topic_names
from logbroker.server.authorization import TOPIC, allowed_names, require_group
from logbroker.types import TopicPartition

API_KEY = 9


def handle(broker, request) -> dict:
    body = request.body
    if request.api_version >= 10:
        return {"groups": [dict(_fetch_by_id(broker, request, group, body.require_stable), group_id=group.group_id)
                           for group in body.groups]}
    if request.api_version >= 8:
        groups = []
        for group in body.groups:
            topics = (None if group.topics is None
                      else [(t.name, t.partition_indexes) for t in group.topics])
            result = _fetch(broker, request, group.group_id, topics, body.require_stable, _member(group))
            groups.append(dict(result, group_id=group.group_id))
        return {"groups": groups}
    topics = None if body.topics is None else [(t.name, t.partition_indexes) for t in body.topics]
    result = _fetch(broker, request, body.group_id, topics, getattr(body, "require_stable", False))
    if request.api_version < 2 and result["error_code"]:
        # v0-1 have no top-level error: every partition carries it.
        code = result["error_code"]
        result["topics"] = [{"name": name, "partitions": [_partition(p, None, code) for p in parts]}
                            for name, parts in (topics or [])]
    return result


def _fetch_by_id(broker, request, group, require_stable: bool) -> dict:
    """v10: the topics go by id, in the request and in the answer."""
    if group.topics is None:
        result = _fetch(broker, request, group.group_id, None, require_stable, _member(group))
        for topic in result["topics"]:
            topic["topic_id"] = topic_id(broker, topic["name"])
        return result
    ids = [t.topic_id for t in group.topics]
    names = topic_names(broker, ids)
    result = _fetch(broker, request, group.group_id,
                    [(n, t.partition_indexes) for n, t in zip(names, group.topics) if n is not None], require_stable,
                    _member(group))
    if result["error_code"]:
        return result
    answered = iter(result["topics"])
    result["topics"] = [
        dict(next(answered), topic_id=i) if n is not None
        else {"topic_id": i, "partitions": [_partition(p, None, UnknownTopicIdError.code)
                                            for p in t.partition_indexes]}
        for n, i, t in zip(names, ids, group.topics)]
    return result


def _member(group) -> tuple[str | None, int]:
    """v9+: the asking member of a KIP-848 consumer group and its epoch ((None, -1): not a member)."""
    return getattr(group, "member_id", None), getattr(group, "member_epoch", -1)


def _fetch(broker, request, group_id: str, topics: list[tuple[str, list[int]]] | None,
           require_stable: bool = False, member: tuple[str | None, int] = (None, -1)) -> dict:
    wanted = None if topics is None else [TopicPartition(name, p) for name, parts in topics for p in parts]
    try:
        require_group(broker, request, AclOperation.DESCRIBE, group_id)
        offsets = broker.group_coordinator.fetch_offsets(group_id, wanted, member_id=member[0],
                                                         member_epoch=member[1])
    except KafkaError as exc:
        return {"error_code": exc.code, "topics": []}
    if require_stable:
        result = _unstable(broker, group_id, offsets, topics)
        if result is not None:
            return result
    if broker.authorizer is not None:
        return _fetch_authorized(broker, request, offsets, topics)
    return _answer(offsets, topics)


def _unstable(broker, group_id: str, offsets, topics) -> dict | None:
    group = broker.group_coordinator.groups.get(group_id)
    if group is None or not group.pending_txn_offsets:
        return None
    unstable = {tp for tp in offsets if has_pending_offset(group, tp)}
    if topics is None:
        unstable |= {tp for pending in group.pending_txn_offsets.values() for tp in pending}
    if not unstable:
        return None
    names = [(n, ps) for n, ps in topics] if topics is not None else \
        [(n, sorted(tp.partition for tp in offsets.keys() | unstable if tp.topic == n))
         for n in sorted({tp.topic for tp in offsets.keys() | unstable})]
    return {"error_code": 0, "topics": [
        {"name": name, "partitions": [
            _partition(p, None, UnstableOffsetCommitError.code) if TopicPartition(name, p) in unstable
            else _partition(p, offsets.get(TopicPartition(name, p)), 0) for p in parts]}
        for name, parts in names]}


def _fetch_authorized(broker, request, offsets, topics: list[tuple[str, list[int]]] | None) -> dict:
    """The answer for a principal: topics it may not DESCRIBE are left out of an all-topics fetch
    and answered TOPIC_AUTHORIZATION_FAILED when named."""
    describable = allowed_names(broker, request, AclOperation.DESCRIBE, TOPIC,
                                (tp.topic for tp in offsets) if topics is None else (n for n, _ in topics),
                                log_denied=topics is not None)
    return _answer(offsets, topics, describable)


def _answer(offsets, topics: list[tuple[str, list[int]]] | None, describable=None) -> dict:
    """Each topic as asked, in the request's order (a repeated one twice, as Kafka); for null
    topics every committed partition, by topic and partition. Topics not `describable` (None:
    all are) are left out of the latter and answered TOPIC_AUTHORIZATION_FAILED when named."""
    if topics is None:
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(offsets):
            if describable is None or tp.topic in describable:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
        topics = list(by_topic.items())
    return {"error_code": 0, "topics": [
        {"name": name, "partitions": [
            _partition(p, offsets.get(TopicPartition(name, p)), 0) if describable is None or name in describable
            else _partition(p, None, TopicAuthorizationFailedError.code) for p in parts]}
        for name, parts in topics]}


def _partition(partition: int, committed, code: int) -> dict:
    if committed is None:
        return {"partition_index": partition, "committed_offset": -1, "committed_leader_epoch": -1,
                "metadata": "", "error_code": code}
    return {"partition_index": partition, "committed_offset": committed.offset,
            "committed_leader_epoch": committed.leader_epoch, "metadata": committed.metadata,
            "error_code": code}
