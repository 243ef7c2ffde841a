"""`kafka.isolation.level=read_committed`: the source stops at the last stable offset, skips
records of aborted transactions, and never turns transaction markers into rows — in batch and
streaming reads through brokers, and in the offline reader of a stopped broker's log dir."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Producer
from spark_kafka import create_topic, new_topic_name

from logbroker.testing import BrokerProcess, TEST_OVERRIDES


def transactional_producer(bootstrap: str) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 4096,
                         "transactional.id": f"txn-{uuid.uuid4().hex[:8]}"})
    producer.init_transactions(30)
    return producer


def write_transactions(bootstrap: str, topic: str, *, leave_open: bool) -> tuple[list, list]:
    """committed c0..c29, aborted a0..a19, committed c30..c39, then (if asked) o0..o9 left in
    an open transaction; plus n0..n4 produced outside transactions before the open one.
    Returns (what read_committed sees, what read_uncommitted sees), as sorted values."""
    producer = transactional_producer(bootstrap)
    plain = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})

    def txn(values, *, commit):
        producer.begin_transaction()
        for i, v in enumerate(values):
            producer.produce(topic, v, partition=i % 2)
        assert producer.flush(30) == 0  # abort_transaction drops records not yet sent
        (producer.commit_transaction if commit else producer.abort_transaction)(30)

    committed = [f"c{i}".encode() for i in range(30)]
    # 40 KB: with 16 KB segments the aborted transaction spans segments (offline test).
    aborted = [f"a{i}".encode() + b"x" * 2000 for i in range(20)]
    late = [f"c{i}".encode() for i in range(30, 40)]
    txn(committed, commit=True)
    txn(aborted, commit=False)
    txn(late, commit=True)
    non_txn = [f"n{i}".encode() for i in range(5)]
    for i, v in enumerate(non_txn):
        plain.produce(topic, v, partition=i % 2)
    assert plain.flush(30) == 0
    opened = []
    if leave_open:
        opened = [f"o{i}".encode() for i in range(10)]
        producer.begin_transaction()
        for i, v in enumerate(opened):
            producer.produce(topic, v, partition=i % 2)
        assert producer.flush(30) == 0
    visible = committed + late + non_txn
    return sorted(visible), sorted(visible + aborted + opened)


def batch_values(spark, bootstrap, topic, isolation):
    df = (spark.read.format("logbroker").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", topic).option("kafka.isolation.level", isolation).load())
    return sorted(bytes(r.value) for r in df.select("value").collect())


def test_batch_read_committed_skips_aborted_and_stops_at_the_open_transaction(spark, bootstrap):
    topic = new_topic_name()
    create_topic(bootstrap, topic, 2)
    committed, everything = write_transactions(bootstrap, topic, leave_open=True)
    # Everything before the open transaction is stable; the LSO stops the read there.
    assert batch_values(spark, bootstrap, topic, "read_committed") == committed
    assert batch_values(spark, bootstrap, topic, "read_uncommitted") == everything


def test_stream_read_committed_yields_committed_records_once(spark, bootstrap, tmp_path):
    topic = new_topic_name()
    create_topic(bootstrap, topic, 2)
    committed, _ = write_transactions(bootstrap, topic, leave_open=False)
    query = (spark.readStream.format("logbroker").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", topic).option("startingOffsets", "earliest")
             .option("kafka.isolation.level", "read_committed")
             .option("maxOffsetsPerTrigger", "17").load()
             .select("value", "offset").writeStream.format("parquet")
             .option("path", str(tmp_path / "out"))
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    rows = spark.read.parquet(str(tmp_path / "out")).collect()
    assert sorted(bytes(r.value) for r in rows) == committed


def test_offline_read_skips_aborted_transactions_and_markers(spark, tmp_path):
    broker = BrokerProcess(tmp_path / "broker",
                           overrides={**TEST_OVERRIDES, "log.segment.bytes": "16384"}).start()
    topic = "txns"
    try:
        create_topic(broker.bootstrap, topic, 2)
        committed, _ = write_transactions(broker.bootstrap, topic, leave_open=False)
    finally:
        assert broker.stop() == 0
    assert any(p.stat().st_size for p in broker.data_dir.glob(f"{topic}-*/*.txnindex"))
    assert len(list(broker.data_dir.glob(f"{topic}-0/*.log"))) >= 2  # the aborted txn spans two
    df = spark.read.format("logbroker").option("path", str(broker.data_dir)) \
        .option("subscribe", topic).load()
    assert sorted(bytes(r.value) for r in df.select("value").collect()) == committed
