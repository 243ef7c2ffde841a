"""Dynamic broker configs on a ZooKeeper cluster: the cluster-wide default, written through one
broker to Kafka's znodes (/config/brokers/<default> and a /config/changes notice), reaches every
broker; a per-broker value stays with its broker; a restarted broker reads both again."""

from __future__ import annotations

import json
import uuid

from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.index import load_request_schema

from cluster_helpers import fully_led, start_cluster, wait_for
from raw_requests import send
from logbroker.server.responses import build

TIMEOUT_S = 15


def alter(broker, resource: str, configs: dict[str, str]):
    body = build(load_request_schema(33, 2), {"validate_only": False, "resources": [{
        "resource_type": 4, "resource_name": resource,
        "configs": [{"name": k, "value": v} for k, v in configs.items()]}]})
    result = send(broker, body).responses[0]
    return int(result.error_code), result.error_message


def described(broker, resource: str, key: str):
    """(value, source) of `key` in DescribeConfigs of a BROKER resource on `broker`, or None."""
    body = build(load_request_schema(32, 4), {"include_synonyms": True, "include_documentation": False,
                                              "resources": [{"resource_type": 4, "resource_name": resource,
                                                             "configuration_keys": [key]}]})
    result = send(broker, body).results[0]
    assert int(result.error_code) == 0, result.error_message
    return next(((c.value, int(c.config_source)) for c in result.configs), None)


def delivery_errors(bootstrap: str, topic: str, partitions: int, size: int) -> list:
    """The delivery error code (None: written) of one record of `size` bytes to each partition."""
    producer = Producer({"bootstrap.servers": bootstrap, "message.max.bytes": 10_000_000})
    errors = {}
    for partition in range(partitions):
        producer.produce(topic, b"x" * size, partition=partition,
                         on_delivery=lambda err, msg: errors.__setitem__(msg.partition(), err and err.code()))
    producer.flush(TIMEOUT_S)
    return [errors.get(p, "undelivered") for p in range(partitions)]


def test_the_cluster_default_reaches_every_broker_and_a_per_broker_value_stays_with_its_broker(
        tmp_path, zk_connect, zk_client):
    b1, b2 = start_cluster(tmp_path, zk_connect, count=2)
    try:
        topic = f"t-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": b1.bootstrap})
        admin.create_topics([NewTopic(topic, 2, replica_assignment=[[1], [2]])])[topic].result(TIMEOUT_S)
        wait_for(lambda: fully_led(b1.bootstrap, topic, 2, 1), what="topic led")
        assert delivery_errors(b1.bootstrap, topic, 2, 3000) == [None, None]

        assert alter(b1, "", {"message.max.bytes": "2000"}) == (0, None)

        assert json.loads(zk_client.get("/config/brokers/<default>")[0]) == {
            "version": 1, "config": {"message.max.bytes": "2000"}}
        notices = [json.loads(zk_client.get(f"/config/changes/{n}")[0]) for n in zk_client.get_children("/config/changes")]
        assert {"version": 2, "entity_path": "brokers/<default>"} in notices
        wait_for(lambda: described(b2, "", "message.max.bytes") == ("2000", 3), what="the default on broker 2")
        assert described(b2, "2", "message.max.bytes") == ("2000", 3)
        too_large = KafkaError.MSG_SIZE_TOO_LARGE
        assert delivery_errors(b1.bootstrap, topic, 2, 3000) == [too_large, too_large]  # both leaders refuse

        assert alter(b2, "2", {"message.max.bytes": "5000"}) == (0, None)
        assert json.loads(zk_client.get("/config/brokers/2")[0]) == {"version": 1, "config": {"message.max.bytes": "5000"}}
        assert described(b2, "2", "message.max.bytes") == ("5000", 2)
        assert described(b1, "1", "message.max.bytes") == ("2000", 3)
        errors = delivery_errors(b1.bootstrap, topic, 2, 3000)
        assert errors == [too_large, None]  # partition 0 on broker 1, partition 1 on broker 2

        b2.stop()
        b2.start()
        assert described(b2, "2", "message.max.bytes") == ("5000", 2)
        assert described(b2, "", "message.max.bytes") == ("2000", 3)
        # Broker 1 refuses a per-broker change of broker 2, as Kafka does (clients send it to broker 2).
        assert alter(b1, "2", {"message.max.bytes": "6000"})[0] == 42
    finally:
        for broker in (b1, b2):
            broker.kill()
