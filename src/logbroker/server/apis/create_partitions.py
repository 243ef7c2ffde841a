"""CreatePartitions (api key 37), v0-3: grow topics to a new partition count.

Per topic (KAFKA-NOTES 13: the per-topic results must come back): a topic named twice in one
request is INVALID_REQUEST; an unknown topic UNKNOWN_TOPIC_OR_PARTITION; a count that is not an
increase INVALID_PARTITIONS; a manual assignment of the wrong length, with unknown brokers or
duplicates INVALID_REPLICA_ASSIGNMENT — each with its error_message. With validate_only nothing
changes. New partitions get leaders and logs before the answer.
"""

from __future__ import annotations

from collections import Counter

from logbroker.errors import InvalidRequestError, KafkaError

API_KEY = 37


def handle(broker, request) -> dict:
    body = request.body
    counts = Counter(topic.name for topic in body.topics)
    results = []
    for topic in body.topics:
        result = {"name": topic.name, "error_code": 0, "error_message": None}
        try:
            if counts[topic.name] > 1:
                raise InvalidRequestError("Duplicate topic in request.")
            assignment = (None if topic.assignments is None
                          else [tuple(a.broker_ids) for a in topic.assignments])
            broker.create_partitions(topic.name, topic.count, assignment=assignment,
                                     validate_only=body.validate_only)
        except KafkaError as exc:
            result.update(error_code=exc.code, error_message=str(exc) or None)
        results.append(result)
    return {"results": results}
