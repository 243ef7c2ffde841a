"""read_committed over remote segments when an aborted transaction spans several of them: its
ABORT marker, and so its .txnindex entry, lies in a later segment than its first records."""

from __future__ import annotations

from confluent_kafka import Producer

from clients import TIMEOUT_S, consume_confluent, create_topic
from test_tiered_storage import PRODUCER, TIERED, local_segments, start_broker
from tiered_helpers import wait_until


def test_an_aborted_transaction_spanning_remote_segments_stays_hidden_under_read_committed(tmp_path, bucket):
    broker = start_broker(tmp_path, bucket)
    try:
        topic = "tiered-long-txn"
        create_topic(broker.bootstrap, topic, config=TIERED)
        a = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "a", **PRODUCER})
        b = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "b", **PRODUCER})
        for producer in (a, b):
            producer.init_transactions(TIMEOUT_S)
        committed: list[bytes] = []

        def a_commits(rounds: int, first: int) -> None:
            for round_ in range(first, first + rounds):
                a.begin_transaction()
                values = [f"a{round_:02d}-{i:03d}-".encode() * 10 for i in range(40)]
                for value in values:
                    a.produce(topic, value=value, partition=0)
                a.commit_transaction(TIMEOUT_S)
                committed.extend(values)

        b.begin_transaction()
        for i in range(20):
            b.produce(topic, value=f"b-{i:03d}-".encode() * 10, partition=0)
        b.flush(TIMEOUT_S)  # offsets 0-19
        a_commits(10, 0)  # 400 records and 10 markers: several 8 KiB segments
        for i in range(20, 40):
            b.produce(topic, value=f"b-{i:03d}-".encode() * 10, partition=0)
        b.flush(TIMEOUT_S)
        b.abort_transaction(TIMEOUT_S)  # its marker at offset 450, segments after b's first records
        a_commits(10, 10)
        wait_until(lambda: local_segments(broker, topic)[0] > 451, "the abort marker's segment copied and deleted")

        read = consume_confluent(broker.bootstrap, topic, {0: 0}, len(committed),
                                 **{"isolation.level": "read_committed"})
        assert [r.value for r in read] == committed
        assert read[0].offset == 20
        everything = consume_confluent(broker.bootstrap, topic, {0: 0}, 440, **{"isolation.level": "read_uncommitted"})
        assert sum(1 for r in everything if r.value.startswith(b"b-")) == 40  # there, hidden above
    finally:
        broker.stop()
