"""ListOffsets (api key 2): -1 latest (the high watermark; the last stable offset under
read_committed), -2 earliest (the log start), -3 the max timestamp (v7), else the first offset
whose timestamp is at least the one asked for, or -1/-1 when there is none (KAFKA-NOTES 12)."""

from __future__ import annotations

from logbroker.errors import KafkaError
from logbroker.types import TopicPartition

API_KEY = 2


def handle(broker, request) -> dict:
    body = request.body
    only_committed = body.replica_id < 0
    topics = []
    for topic in body.topics:
        partitions = []
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            entry = {"partition_index": p.partition_index, "timestamp": -1, "offset": -1, "leader_epoch": -1}
            try:
                found = broker.replica_manager.fetch_offset_for_timestamp(
                    tp, p.timestamp, current_leader_epoch=getattr(p, "current_leader_epoch", -1),
                    only_committed=only_committed)
            except KafkaError as exc:
                entry["error_code"] = exc.code
            else:
                if found is not None:
                    entry.update(timestamp=found.timestamp, offset=found.offset, leader_epoch=found.leader_epoch)
            partitions.append(entry)
        topics.append({"name": topic.name, "partitions": partitions})
    return {"topics": topics}
