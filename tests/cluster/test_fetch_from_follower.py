"""KIP-392 fetch from the closest replica, on three brokers in racks a, b and c with
replica.selector.class=RackAwareReplicaSelector: a confluent-kafka consumer with client.rack=c
is pointed by the leader (broker 1, rack a) to the follower in rack c and reads every record
once from there; what each broker served is read from its own metrics. Followers answer
consumers as Kafka's do: up to their high watermark, OFFSET_OUT_OF_RANGE past their log end,
NOT_LEADER_OR_FOLLOWER to a fetch older than v11 (which may read from leaders only)."""

from __future__ import annotations

import re
import time
import urllib.request
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from kio.index import load_request_schema

from logbroker.server.responses import build

from raw_requests import send

RACK_AWARE = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
CLUSTER = {"brokers": 3, "racks": "a,b,c", "replica.selector.class": RACK_AWARE,
           "metrics.port": "0"}
RECORDS = 300
OFFSET_OUT_OF_RANGE = 1
NOT_LEADER_OR_FOLLOWER = 6

pytestmark = pytest.mark.timeout(120)


def bytes_out(broker, topic: str) -> float:
    """Record bytes the broker sent to consumers for `topic` (BytesOutPerSec, from /metrics)."""
    port = re.search(r"Metrics endpoint listening on http://[^:]+:(\d+)/metrics",
                     broker.new_log_text()).group(1)
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    match = re.search(rf'^kafka_server_brokertopicmetrics_bytesout_total{{topic="{re.escape(topic)}"}} (\S+)$',
                      text, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


def produce(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=0,
                         on_delivery=lambda err, msg: None if err is None else pytest.fail(str(err)))
    assert producer.flush(30) == 0


def consume_all(bootstrap: str, topic: str, count: int, rack: str) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                         "client.rack": rack, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    offsets: list[int] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(offsets) < count and time.monotonic() < deadline:
            for msg in consumer.consume(100, timeout=0.5):
                assert msg.error() is None, msg.error()
                assert msg.value() == b"v%d" % msg.offset()
                offsets.append(msg.offset())
        for msg in consumer.consume(100, timeout=1.0):  # nothing more, nothing twice
            offsets.append(msg.offset())
    finally:
        consumer.close()
    return offsets


@pytest.mark.logbroker_cluster(**CLUSTER)
def test_consumer_with_client_rack_reads_from_the_follower_in_its_rack(logbroker_cluster):
    cluster = logbroker_cluster
    topic = f"closest-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, replica_assignment=[[1, 2, 3]])  # leader 1 (rack a)
    produce(cluster.bootstrap, topic, RECORDS)

    assert consume_all(cluster.bootstrap, topic, RECORDS, rack="c") == list(range(RECORDS))
    served = {broker_id: bytes_out(broker, topic) for broker_id, broker in cluster.brokers.items()}
    assert served[3] > 0 and served[1] == 0 and served[2] == 0, served

    # A consumer in the leader's rack, and one in a rack with no replica, read from the leader.
    assert consume_all(cluster.bootstrap, topic, RECORDS, rack="a") == list(range(RECORDS))
    assert consume_all(cluster.bootstrap, topic, RECORDS, rack="z") == list(range(RECORDS))
    leader_served = bytes_out(cluster.brokers[1], topic)
    assert leader_served >= 2 * served[3] * 0.9, (leader_served, served)
    assert bytes_out(cluster.brokers[2], topic) == 0


def fetch(broker, topic: str, offset: int, *, version: int, rack: str = ""):
    fields = {"replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20,
              "isolation_level": 0, "session_id": 0, "session_epoch": -1, "rack_id": rack,
              "forgotten_topics_data": [],
              "topics": [{"topic": topic, "partitions": [{"partition": 0, "fetch_offset": offset,
                                                           "partition_max_bytes": 1 << 20}]}]}
    response = send(broker, build(load_request_schema(1, version), fields))
    return response.responses[0].partitions[0]


@pytest.mark.logbroker_cluster(**CLUSTER)
def test_leader_and_follower_answers_to_consumers(logbroker_cluster):
    cluster = logbroker_cluster
    topic = f"answers-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, replica_assignment=[[1, 2, 3]])
    produce(cluster.bootstrap, topic, 10)
    leader, follower = cluster.brokers[1], cluster.brokers[3]

    pointed = fetch(leader, topic, 0, version=12, rack="c")
    assert (int(pointed.error_code), pointed.preferred_read_replica) == (0, 3) and not pointed.records
    here = fetch(leader, topic, 0, version=12, rack="a")
    assert (here.preferred_read_replica, int(here.high_watermark)) == (-1, 10)
    assert here.records

    # The follower serves a consumer (v11+) up to its high watermark, once it has learned it.
    deadline = time.monotonic() + 10
    while int((answer := fetch(follower, topic, 0, version=12, rack="c")).high_watermark) < 10:
        assert time.monotonic() < deadline, answer
        time.sleep(0.1)
    assert int(answer.error_code) == 0 and answer.records and answer.preferred_read_replica == -1
    assert int(fetch(follower, topic, 10, version=12, rack="c").error_code) == 0  # at the end: empty
    assert int(fetch(follower, topic, 11, version=12, rack="c").error_code) == OFFSET_OUT_OF_RANGE
    # Before v11 a consumer has no client metadata and may read from leaders only.
    assert int(fetch(follower, topic, 0, version=10).error_code) == NOT_LEADER_OR_FOLLOWER
