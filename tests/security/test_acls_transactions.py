"""Transactions under ACLs: the TransactionalId resource (WRITE, which implies DESCRIBE) guards
FindCoordinator, InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn and TxnOffsetCommit,
as Kafka's KafkaApis checks them."""

from __future__ import annotations

import confluent_kafka
import pytest
from acl_helpers import SASL_OVERRIDES, allow, create_acls, end_offset, forget_admins, new_topic, sasl
from confluent_kafka.admin import AclOperation, ResourceType

from logbroker.testing import BrokerProcess


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("acl-txn-broker"), overrides=SASL_OVERRIDES) as broker:
        yield broker
        forget_admins()


def test_transactional_producer_needs_write_on_its_transactional_id(acl_broker):
    topic = new_topic(acl_broker, "txn-acl-")
    create_acls(acl_broker, allow("User:alice", AclOperation.WRITE, topic),
                allow("User:bob", AclOperation.WRITE, topic),
                allow("User:alice", AclOperation.WRITE, "alice-txn", resource=ResourceType.TRANSACTIONAL_ID))
    alice = confluent_kafka.Producer({**sasl(acl_broker, "alice"), "transactional.id": "alice-txn"})
    alice.init_transactions(30)
    alice.begin_transaction()
    alice.produce(topic, b"by-alice")
    alice.commit_transaction(30)
    assert end_offset(acl_broker, topic) == 2  # the record and its COMMIT marker

    bob = confluent_kafka.Producer({**sasl(acl_broker, "bob"), "transactional.id": "alice-txn"})
    with pytest.raises(confluent_kafka.KafkaException) as raised:
        bob.init_transactions(30)
    assert raised.value.args[0].code() == confluent_kafka.KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
