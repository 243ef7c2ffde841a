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


def test_transactions_cli_with_a_command_config(acl_broker, tmp_path):
    import subprocess
    import sys
    config = tmp_path / "admin.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                      'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required '
                      'username="admin" password="admin-secret";\n')
    listed = subprocess.run([sys.executable, "-m", "logbroker.cli", "transactions", "--bootstrap-server",
                             acl_broker.bootstrap, "--command-config", str(config), "list"],
                            capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    header = [cell.strip() for cell in listed.stdout.splitlines()[0].split("\t")[:4]]
    assert header == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
