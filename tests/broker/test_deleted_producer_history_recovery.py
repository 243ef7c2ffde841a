"""KIP-360 across recovery: a producer whose data batches are all below the log start, with only
its COMMIT marker left above it, goes on with its next sequence number after a restart.

Kafka rebuilds such a producer's last sequence number from its data batches whatever the log
start: a clean shutdown leaves a snapshot at the log end holding it, and recovery after kill -9
replays the whole segment holding the recovery point (LogSegment.recover reads every batch of the
segment, below the log start too). Built from the marker alone, the producer would have an epoch
and no sequence, and its next batch (sequence > 0) would get OUT_OF_ORDER_SEQUENCE_NUMBER, fatal
to librdkafka. Here the log start is moved onto the marker by DeleteRecords, both checkpoints
(log start, recovery point) are on disk before the restart, and with flush.messages=1 the recovery
point sits inside the active segment, at the log end.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import OffsetSpec

from clients import TIMEOUT_S, admin, create_topic
from offset_checkpoints import checkpointed
from test_deleted_producer_history import free_port
from transactional_clients import read_all, transactional_producer

from logbroker.testing import TEST_OVERRIDES, BrokerProcess, wait_for

pytestmark = pytest.mark.timeout(120)

CHECKPOINTS_OFTEN = {"log.flush.offset.checkpoint.interval.ms": "100",
                     "log.flush.start.offset.checkpoint.interval.ms": "100",
                     "transaction.state.log.num.partitions": "1"}


@pytest.mark.parametrize("flush_messages", ["1", None], ids=["recovery-point-in-segment", "recovery-point-at-base"])
@pytest.mark.parametrize("how", ["stop", "kill"])
def test_a_producer_with_only_its_marker_above_the_log_start_goes_on_after_a_restart(tmp_path, how, flush_messages):
    broker = BrokerProcess(tmp_path, overrides={**TEST_OVERRIDES, **CHECKPOINTS_OFTEN,
                                                "listeners": f"PLAINTEXT://127.0.0.1:{free_port()}"})
    with broker:
        bootstrap = broker.bootstrap
        create_topic(bootstrap, "history", config={"flush.messages": flush_messages} if flush_messages else None)
        producer = transactional_producer(bootstrap, "txn-history")
        errors = []
        producer.begin_transaction()
        for i in range(5):
            producer.produce("history", f"before-{i}".encode(), partition=0,
                             on_delivery=lambda err, _msg: err and errors.append(err))
        producer.commit_transaction(TIMEOUT_S)  # data at offsets 0-4, the COMMIT marker at 5
        wait_for(lambda: read_all(bootstrap, "history", isolation="read_committed", expect=5, timeout_s=2)
                 == [(0, i, f"before-{i}".encode()) for i in range(5)], what="the transaction committed")
        tp = CkTopicPartition("history", 0, 5)
        assert admin(bootstrap).delete_records([tp], operation_timeout=5)[tp].result(TIMEOUT_S).low_watermark == 5
        wait_for(lambda: checkpointed(broker.data_dir, "log-start-offset-checkpoint", "history") == 5,
                 what="log start 5 checkpointed")
        if flush_messages:
            wait_for(lambda: checkpointed(broker.data_dir, "recovery-point-offset-checkpoint", "history") == 6,
                     what="recovery point 6 checkpointed")
        broker.stop() if how == "stop" else broker.kill()
        broker.start()
        for _ in range(2):  # sequence numbers 5 and 6 of the same producer epoch
            producer.begin_transaction()
            producer.produce("history", b"after", partition=0, on_delivery=lambda err, _msg: err and errors.append(err))
            producer.commit_transaction(TIMEOUT_S)
        assert errors == []
        assert read_all(bootstrap, "history", isolation="read_committed", expect=2) == [(0, 6, b"after"), (0, 8, b"after")]


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_a_transactional_producer_goes_on_after_retention_removed_its_segments(tmp_path, how):
    """retention.bytes removes every segment holding a transactional producer's batches and
    markers while an idempotent producer fills the newer ones. After a clean restart the
    producer is known (the snapshot at the log end holds it) and its next sequence follows;
    after kill -9 the log starts at the first kept segment (its base is the log start; Kafka
    checkpoints no log start equal to it), recovery replays the kept segments only, the producer
    is unknown there and any sequence is accepted (Kafka: no current epoch)."""
    broker = BrokerProcess(tmp_path, overrides={**TEST_OVERRIDES, **CHECKPOINTS_OFTEN,
                                                "log.retention.check.interval.ms": "200",
                                                "listeners": f"PLAINTEXT://127.0.0.1:{free_port()}"})
    with broker:
        bootstrap = broker.bootstrap
        create_topic(bootstrap, "retained", config={"segment.bytes": "2048", "retention.bytes": "4096"})
        producer = transactional_producer(bootstrap, "txn-retained")
        errors = []
        for round_ in range(2):
            producer.begin_transaction()
            for i in range(3):
                producer.produce("retained", f"txn-{round_}-{i}".encode() * 20, partition=0,
                                 on_delivery=lambda err, _msg: err and errors.append(err))
            producer.commit_transaction(TIMEOUT_S)  # offsets 0-7: two transactions
        filler = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 0})
        for i in range(40):
            filler.produce("retained", f"filler-{i}".encode() * 40, partition=0)
            filler.flush(TIMEOUT_S)  # one batch each, ~500 bytes: a segment holds three or four
        assert filler.flush(TIMEOUT_S) == 0
        earliest = CkTopicPartition("retained", 0)

        def log_start() -> int:
            return admin(bootstrap).list_offsets({earliest: OffsetSpec.earliest()})[earliest].result(TIMEOUT_S).offset
        wait_for(lambda: log_start() > 8, what="retention past the transactional producer's batches")
        broker.stop() if how == "stop" else broker.kill()
        broker.start()
        for _ in range(2):
            producer.begin_transaction()
            producer.produce("retained", b"after", partition=0, on_delivery=lambda err, _msg: err and errors.append(err))
            producer.commit_transaction(TIMEOUT_S)
        assert errors == []
        records = read_all(bootstrap, "retained", isolation="read_committed", expect=2)
        assert [r for r in records if r[2] == b"after"] == [(0, 48, b"after"), (0, 50, b"after")]
