"""`logbroker transactions` against a real broker: the verbs of kafka-transactions.sh."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from confluent_kafka import Producer

from logbroker.records.builder import build_batch
from logbroker.testing import TEST_OVERRIDES, BrokerProcess

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent.parent / "broker"))
from clients import RawClient, create_topic  # noqa: E402


def run(bootstrap: str, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "logbroker.cli", "transactions", "--bootstrap-server", bootstrap, *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=90)


def table(stdout: str) -> list[list[str]]:
    return [[cell.strip() for cell in line.split("\t")[:-1]] for line in stdout.splitlines()]


@pytest.fixture
def unverified_broker(tmp_path):
    """A broker without KIP-890 verification, so a raw client can leave a hanging transaction."""
    process = BrokerProcess(tmp_path, overrides={**TEST_OVERRIDES,
                                                 "transaction.partition.verification.enable": "false"})
    yield process.start()
    process.kill()


def test_list_describe_and_describe_producers_of_an_open_transaction(logbroker):
    create_topic(logbroker, "cli-txn", 1)
    producer = Producer({"bootstrap.servers": logbroker, "transactional.id": "cli-txn-id"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("cli-txn", value=b"open")
    producer.flush(30)

    listed = run(logbroker, "list")
    assert listed.returncode == 0, listed.stderr
    rows = table(listed.stdout)
    assert rows[0] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    assert [r for r in rows[1:] if r[0] == "cli-txn-id"][0][1:] == ["0", rows[1][2], "Ongoing"]

    described = run(logbroker, "describe", "--transactional-id", "cli-txn-id")
    assert described.returncode == 0, described.stderr
    header, row = table(described.stdout)
    assert header[0] == "CoordinatorId" and header[-1] == "TopicPartitions"
    assert (row[0], row[1], row[4], row[8]) == ("0", "cli-txn-id", "Ongoing", "cli-txn-0")
    missing = run(logbroker, "describe", "--transactional-id", "nobody")
    assert missing.returncode == 1 and "TRANSACTIONAL_ID_NOT_FOUND" in missing.stderr

    producers = run(logbroker, "describe-producers", "--topic", "cli-txn", "--partition", "0")
    assert producers.returncode == 0, producers.stderr
    header, row = table(producers.stdout)
    assert header == ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                      "CurrentTransactionStartOffset"]
    assert (row[0], row[5]) == (rows[1][2], "0")
    # Not hanging: its coordinator has the partition in the ongoing transaction.
    hanging = run(logbroker, "find-hanging", "--topic", "cli-txn", "--max-transaction-timeout", "0")
    assert hanging.returncode == 0 and len(table(hanging.stdout)) == 1, hanging.stderr
    producer.abort_transaction(30)


def test_find_hanging_and_abort_by_start_offset(unverified_broker):
    bootstrap = unverified_broker.bootstrap
    create_topic(bootstrap, "cli-hang", 1)
    with RawClient(bootstrap) as raw:
        pid, epoch = raw.init_producer_id()
        batch = build_batch([(None, b"hanging")], producer_id=pid, producer_epoch=epoch, base_sequence=0,
                            transactional=True)
        assert raw.produce("cli-hang", 0, batch).error_code == 0
    time.sleep(0.05)
    hanging = run(bootstrap, "find-hanging", "--broker-id", "0", "--max-transaction-timeout", "0")
    assert hanging.returncode == 0, hanging.stderr
    header, row = table(hanging.stdout)
    assert header[:3] == ["Topic", "Partition", "ProducerId"]
    assert (row[0], row[1], row[2], row[5]) == ("cli-hang", "0", str(pid), "0")

    wrong = run(bootstrap, "abort", "--topic", "cli-hang", "--partition", "0", "--start-offset", "5")
    assert wrong.returncode == 1
    assert "Could not find any open transactions starting at offset 5 on partition cli-hang-0" in wrong.stderr
    aborted = run(bootstrap, "abort", "--topic", "cli-hang", "--partition", "0", "--start-offset", "0")
    assert (aborted.returncode, aborted.stderr) == (0, "")
    after = run(bootstrap, "find-hanging", "--topic", "cli-hang", "--max-transaction-timeout", "0")
    assert len(table(after.stdout)) == 1
    with RawClient(bootstrap) as raw:
        response = raw.request(2, 7, replica_id=-1, isolation_level=1, topics=[
            {"name": "cli-hang", "partitions": [{"partition_index": 0, "timestamp": -1}]}])
        assert response.topics[0].partitions[0].offset == 2  # read_committed: the LSO passed the marker
