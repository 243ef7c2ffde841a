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
from confluent_kafka import TopicPartition as CkTopicPartition

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
