"""Authorization of the transaction storage APIs, as Kafka's KafkaApis: WriteTxnMarkers needs
CLUSTER_ACTION on the cluster (inter-broker), DescribeProducers DESCRIBE on the topic."""

from __future__ import annotations

import asyncio

import pytest
from acl_helpers import PASSWORDS, SASL_OVERRIDES, allow, create_acls, forget_admins, new_topic
from confluent_kafka.admin import AclOperation
from kio.index import load_request_schema

from logbroker.client import ClientSecurity, KafkaConnection
from logbroker.server.responses import build
from logbroker.testing import BrokerProcess

CLUSTER_AUTHORIZATION_FAILED = 31
TOPIC_AUTHORIZATION_FAILED = 29


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("acl-txn-broker"), overrides=SASL_OVERRIDES) as broker:
        yield broker
        forget_admins()


def request(broker, user: str, api_key: int, version: int, **fields):
    security = ClientSecurity("SASL_PLAINTEXT", sasl_mechanism="PLAIN", username=user,
                              password=PASSWORDS[user])

    async def round_trip():
        connection = KafkaConnection(broker.host, broker.port, security=security)
        try:
            return await connection.request(build(load_request_schema(api_key, version), fields))
        finally:
            await connection.close()
    return asyncio.run(round_trip())


def marker_code(broker, user: str, topic: str) -> int:
    response = request(broker, user, 27, 1, markers=[{
        "producer_id": 5, "producer_epoch": 0, "transaction_result": True, "coordinator_epoch": 0,
        "topics": [{"name": topic, "partition_indexes": [0]}]}])
    return int(response.markers[0].topics[0].partitions[0].error_code)


def describe_code(broker, user: str, topic: str) -> int:
    response = request(broker, user, 61, 0, topics=[{"name": topic, "partition_indexes": [0]}])
    return int(response.topics[0].partitions[0].error_code)


def test_write_txn_markers_needs_cluster_action(acl_broker):
    topic = new_topic(acl_broker)
    assert marker_code(acl_broker, "alice", topic) == CLUSTER_AUTHORIZATION_FAILED
    assert marker_code(acl_broker, "admin", topic) == 0  # the super user, as a broker would be


def test_describe_producers_needs_describe_on_the_topic(acl_broker):
    topic = new_topic(acl_broker)
    assert describe_code(acl_broker, "bob", topic) == TOPIC_AUTHORIZATION_FAILED
    create_acls(acl_broker, allow("User:bob", AclOperation.DESCRIBE, topic))
    assert describe_code(acl_broker, "bob", topic) == 0
