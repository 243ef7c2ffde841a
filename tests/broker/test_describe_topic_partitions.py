"""DescribeTopicPartitions (KIP-966) through kafka-python's describe_topic_partitions and raw
requests: a topic of many partitions paged with ResponsePartitionLimit and the cursor, every
partition exactly once and in order, unknown and illegal names, a cursor that breaks the rules.
(librdkafka's describe_topics uses Metadata, not this API: checked with confluent-kafka 2.16.)"""

from __future__ import annotations

import pytest
from kafka import KafkaAdminClient

from logbroker.protocol.apis import ApiKey
from logbroker.testing import TEST_OVERRIDES, BrokerProcess

from clients import RawClient, create_topic

UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_TOPIC_EXCEPTION = 17
INVALID_REQUEST = 42


@pytest.fixture(scope="module")
def paged_topics(shared_broker):
    bootstrap = shared_broker.bootstrap
    create_topic(bootstrap, "dtp-big", partitions=250)
    create_topic(bootstrap, "dtp-small", partitions=3)
    create_topic(bootstrap, "dtp-tail")
    return bootstrap


def pages(bootstrap: str, topics: list[str], limit: int) -> list[dict]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="tests-dtp")
    try:
        answers, cursor = [], None
        while True:
            answer = admin.describe_topic_partitions(topics, response_partition_limit=limit, cursor=cursor)
            answers.append(answer)
            cursor = answer["next_cursor"]
            if cursor is None:
                return answers
    finally:
        admin.close()


def test_a_large_topic_comes_in_pages_every_partition_once_in_order(paged_topics):
    answers = pages(paged_topics, ["dtp-small", "dtp-big"], 100)
    seen = [(t["name"], p["partition_index"]) for a in answers for t in a["topics"] for p in t["partitions"]]
    assert seen == [("dtp-big", i) for i in range(250)] + [("dtp-small", i) for i in range(3)]
    assert [a["next_cursor"] for a in answers] == [
        {"topic_name": "dtp-big", "partition_index": 100}, {"topic_name": "dtp-big", "partition_index": 200},
        None]  # the last page: 50 of dtp-big and dtp-small's 3
    for a in answers:
        for t in a["topics"]:
            assert t["error_code"] == 0 and t["topic_id"].int != 0 and not t["is_internal"]
            for p in t["partitions"]:
                assert p["error_code"] == 0 and p["leader_id"] == 0 and p["replica_nodes"] == [0]
                assert p["isr_nodes"] == [0] and p["leader_epoch"] >= 0 and p["offline_replicas"] == []


def test_a_page_that_ends_at_a_topics_end_points_at_the_next_topic(paged_topics):
    answers = pages(paged_topics, ["dtp-big", "dtp-small"], 250)
    assert [a["next_cursor"] for a in answers] == [{"topic_name": "dtp-small", "partition_index": 0}, None]
    assert [[(t["name"], len(t["partitions"])) for t in a["topics"]] for a in answers] == [
        [("dtp-big", 250)], [("dtp-small", 3)]]


def test_an_empty_list_describes_every_topic_and_the_limit_is_at_least_one(paged_topics):
    with RawClient(paged_topics) as raw:
        answer = raw.request(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, topics=[], response_partition_limit=0,
                             cursor={"topic_name": "dtp-small", "partition_index": 2})
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in answer.topics] == [("dtp-small", [2])]
    assert answer.next_cursor is not None and answer.next_cursor.topic_name > "dtp-small"


def test_unknown_and_illegal_names_get_their_errors(paged_topics):
    answer = pages(paged_topics, ["dtp-none", "bad/name", "dtp-small"], 2000)[0]
    codes = {t["name"]: t["error_code"] for t in answer["topics"]}
    assert codes == {"bad/name": INVALID_TOPIC_EXCEPTION, "dtp-none": UNKNOWN_TOPIC_OR_PARTITION, "dtp-small": 0}


def test_a_cursor_outside_the_list_or_negative_is_invalid_request(paged_topics):
    with RawClient(paged_topics) as raw:
        for cursor in ({"topic_name": "dtp-big", "partition_index": 0},
                       {"topic_name": "dtp-small", "partition_index": -1}):
            answer = raw.request(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, topics=[{"name": "dtp-small"}],
                                 response_partition_limit=10, cursor=cursor)
            assert [(t.name, t.error_code) for t in answer.topics] == [("dtp-small", INVALID_REQUEST)]


def test_the_brokers_max_request_partition_size_limit_caps_a_page(tmp_path):
    with BrokerProcess(tmp_path, overrides={**TEST_OVERRIDES, "max.request.partition.size.limit": "40"}) as broker:
        create_topic(broker.bootstrap, "capped", partitions=100)
        answers = pages(broker.bootstrap, ["capped"], 2000)
    assert [len(a["topics"][0]["partitions"]) for a in answers] == [40, 40, 20]
