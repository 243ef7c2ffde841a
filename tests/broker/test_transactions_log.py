"""Transactions in the log, end to end on one broker (no coordinator here): transactional
batches sent with raw Produce requests, COMMIT/ABORT markers with raw WriteTxnMarkers requests.
read_committed fetches stop at the LSO and carry aborted_transactions; ListOffsets READ_COMMITTED
answers the LSO; confluent-kafka's read_committed consumer drops aborted records; restarts and
kill -9 keep it all; DescribeProducers shows the producer state; stale epochs get Kafka's codes.
"""

from __future__ import annotations

import pytest

from logbroker.records.builder import build_batch
from logbroker.records.record_batch import RecordBatch, iter_batches

from clients import RawClient, consume_confluent, create_topic, drop_admins

pytestmark = pytest.mark.timeout(90)

INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
TRANSACTION_COORDINATOR_FENCED = 52
UNKNOWN_TOPIC_OR_PARTITION = 3


class TxnProducer:
    def __init__(self, client: RawClient, topic: str) -> None:
        self.client, self.topic = client, topic
        self.pid, self.epoch = client.init_producer_id()
        self.seq = 0

    def send(self, *values: bytes, transactional: bool = True):
        batch = build_batch([(b"k", v) for v in values], producer_id=self.pid,
                            producer_epoch=self.epoch, base_sequence=self.seq,
                            transactional=transactional)
        answer = self.client.produce(self.topic, 0, batch)
        if int(answer.error_code) == 0:
            self.seq += len(values)
        return answer

    def end(self, commit: bool, *, coordinator_epoch: int = 0, epoch: int | None = None,
            partitions=(0,)) -> int:
        return write_marker(self.client, self.topic, self.pid, self.epoch if epoch is None else epoch,
                            commit, coordinator_epoch=coordinator_epoch, partitions=partitions)


def write_marker(client, topic, pid, epoch, commit, *, coordinator_epoch=0, partitions=(0,)) -> int:
    response = client.request(27, 1, markers=[{
        "producer_id": pid, "producer_epoch": epoch, "transaction_result": commit,
        "coordinator_epoch": coordinator_epoch,
        "topics": [{"name": topic, "partition_indexes": list(partitions)}]}])
    [marker] = response.markers
    [topic_result] = marker.topics
    [partition] = topic_result.partitions
    return int(partition.error_code)


def fetch_committed(client: RawClient, topic: str, offset: int, *, version: int = 12):
    response = client.request(1, version, replica_id=-1, max_wait=0, min_bytes=1, max_bytes=1 << 20,
                              isolation_level=1, session_id=0, session_epoch=-1,
                              topics=[{"topic": topic, "partitions": [{
                                  "partition": 0, "fetch_offset": offset,
                                  "partition_max_bytes": 1 << 20}]}],
                              forgotten_topics_data=[], rack_id="")
    return response.responses[0].partitions[0]


def list_offset(client: RawClient, topic: str, isolation_level: int) -> int:
    response = client.request(2, 7, replica_id=-1, isolation_level=isolation_level, topics=[
        {"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}])
    return int(response.topics[0].partitions[0].offset)


def data_values(records) -> list[bytes]:
    """The values of the data records in a fetched record set (markers left out)."""
    if not records:
        return []
    return [r.value for position, header in iter_batches(records) if not header.is_control
            for r in RecordBatch(records, position).records()]


def aborted(partition_data) -> list[tuple[int, int]]:
    return [(int(a.producer_id), int(a.first_offset)) for a in partition_data.aborted_transactions or ()]


def test_read_committed_stops_at_the_lso_and_lists_aborted_transactions(shared_broker, topic):
    create_topic(shared_broker.bootstrap, topic)
    with RawClient(shared_broker.bootstrap) as client:
        p = TxnProducer(client, topic)
        assert p.send(b"a0", b"a1").base_offset == 0                       # 0-1 open
        plain = client.produce(topic, 0, build_batch([(None, b"plain")]))  # 2
        assert int(plain.error_code) == 0
        data = fetch_committed(client, topic, 0)
        assert (int(data.high_watermark), int(data.last_stable_offset)) == (3, 0)
        assert data_values(data.records) == []
        assert list_offset(client, topic, 1) == 0 and list_offset(client, topic, 0) == 3

        assert p.end(commit=False) == 0                                    # 3: abort
        data = fetch_committed(client, topic, 0)
        assert int(data.last_stable_offset) == 4
        assert aborted(data) == [(p.pid, 0)]
        assert data_values(data.records) == [b"a0", b"a1", b"plain"]

        assert p.send(b"c0").base_offset == 4                              # 4
        assert p.end(commit=True, coordinator_epoch=1) == 0                # 5: commit
        data = fetch_committed(client, topic, 4)
        assert int(data.last_stable_offset) == 6 and aborted(data) == []
        assert list_offset(client, topic, 1) == 6

        # Fetch v4, the oldest: aborted_transactions too.
        assert aborted(fetch_committed(client, topic, 0, version=4)) == [(p.pid, 0)]
        # read_uncommitted: a null array.
        assert client.fetch(topic, 0, 0).aborted_transactions is None

    committed = consume_confluent(shared_broker.bootstrap, topic, {0: 0}, 2,
                                  **{"isolation.level": "read_committed"})
    assert [r.value for r in committed] == [b"plain", b"c0"]
    everything = consume_confluent(shared_broker.bootstrap, topic, {0: 0}, 4,
                                   **{"isolation.level": "read_uncommitted"})
    assert [r.value for r in everything] == [b"a0", b"a1", b"plain", b"c0"]


def test_bad_transactional_input_gets_kafkas_error_codes(shared_broker, topic):
    create_topic(shared_broker.bootstrap, topic)
    with RawClient(shared_broker.bootstrap) as client:
        p = TxnProducer(client, topic)
        p.send(b"x")
        assert int(p.send(b"y", transactional=False).error_code) == INVALID_TXN_STATE
        assert p.end(commit=True, epoch=p.epoch - 1 if p.epoch > 0 else -1) in (INVALID_PRODUCER_EPOCH,)
        assert p.end(commit=True, coordinator_epoch=3) == 0
        p.send(b"z")
        assert p.end(commit=False, coordinator_epoch=2) == TRANSACTION_COORDINATOR_FENCED
        assert p.end(commit=False, partitions=(7,)) == UNKNOWN_TOPIC_OR_PARTITION
        # Nothing else was disturbed: the open transaction still holds the LSO at z's offset.
        assert list_offset(client, topic, 1) == 2 and list_offset(client, topic, 0) == 3


def test_describe_producers_shows_the_open_transaction(shared_broker, topic):
    create_topic(shared_broker.bootstrap, topic)
    with RawClient(shared_broker.bootstrap) as client:
        p = TxnProducer(client, topic)
        p.send(b"x", b"y")
        p.end(commit=True, coordinator_epoch=4)
        p.send(b"z")
        response = client.request(61, 0, topics=[{"name": topic, "partition_indexes": [0, 9]}])
        [t] = response.topics
        ok, missing = t.partitions
        assert int(ok.error_code) == 0 and int(missing.error_code) == UNKNOWN_TOPIC_OR_PARTITION
        [state] = ok.active_producers
        assert (int(state.producer_id), int(state.producer_epoch), int(state.last_sequence),
                int(state.coordinator_epoch), int(state.current_txn_start_offset)) == \
            (p.pid, p.epoch, 2, 4, 3)


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_restart_keeps_lso_and_aborted_transactions(broker_process, how):
    topic = "txn-restart"
    create_topic(broker_process.bootstrap, topic)
    drop_admins()
    with RawClient(broker_process.bootstrap) as client:
        a, b = TxnProducer(client, topic), TxnProducer(client, topic)
        a.send(b"a0")              # 0
        b.send(b"b0")              # 1
        assert a.end(commit=False) == 0   # 2
        b.send(b"b1")              # 3 (b still open from 1)
    if how == "stop":
        assert broker_process.stop() == 0
    else:
        broker_process.kill()
    broker_process.start()
    with RawClient(broker_process.bootstrap) as client:
        data = fetch_committed(client, topic, 0)
        assert int(data.last_stable_offset) == 1
        assert write_marker(client, topic, b.pid, b.epoch, False) == 0   # 4
        data = fetch_committed(client, topic, 0)
        assert int(data.last_stable_offset) == 5
        assert sorted(aborted(data)) == sorted([(a.pid, 0), (b.pid, 1)])
    assert consume_confluent(broker_process.bootstrap, topic, {0: 0}, 1, timeout_s=2,
                             **{"isolation.level": "read_committed"}) == []


def test_read_committed_long_poll_completes_when_the_marker_moves_the_lso(shared_broker, topic):
    import time

    create_topic(shared_broker.bootstrap, topic)
    with RawClient(shared_broker.bootstrap) as client, RawClient(shared_broker.bootstrap) as other:
        p = TxnProducer(client, topic)
        p.send(b"t0")
        max_wait_ms = 20_000
        started = time.monotonic()
        other.send(1, 12, replica_id=-1, max_wait=max_wait_ms, min_bytes=1, max_bytes=1 << 20,
                   isolation_level=1, session_id=0, session_epoch=-1,
                   topics=[{"topic": topic, "partitions": [{"partition": 0, "fetch_offset": 0,
                                                            "partition_max_bytes": 1 << 20}]}],
                   forgotten_topics_data=[], rack_id="")
        assert p.end(commit=True) == 0
        _, response = other.receive(1, 12)
        data = response.responses[0].partitions[0]
        assert data_values(data.records) == [b"t0"]
        assert time.monotonic() - started < max_wait_ms / 2000  # answered by the LSO move
