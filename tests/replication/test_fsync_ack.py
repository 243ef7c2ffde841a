"""flush.before.ack: a produce is answered only once its batch is fsynced, by group commits.

The first tests drive a ReplicaManager over real logs on disk and look at the log's recovery
point (everything below it is fsynced) at the moment the answer comes. The last ones run a real
broker with a real client and read the recovery points from its recovery-point-offset-checkpoint.
A kill -9 test would prove nothing here: the page cache survives the process, so a broker that
never fsyncs loses nothing to kill -9 either.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from replica_managers import TIMEOUT_MS, TP, batch

from logbroker.storage.checkpoints import OffsetCheckpointFile
from logbroker.testing import BrokerProcess
from logbroker.types import TopicPartition

@pytest.mark.parametrize("acks", [1, -1])
def test_the_answer_waits_for_the_fsync(leader_of, acks):
    manager = leader_of(flush_before_ack=True)
    log = manager.partitions[TP].log

    async def produce():
        pending = manager.append_records_now(timeout_ms=TIMEOUT_MS, required_acks=acks,
                                             entries={TP: batch(5)})
        assert asyncio.iscoroutine(pending)  # not answered from the page cache
        assert log.log_end_offset == 5
        answered = asyncio.ensure_future(pending)
        # Note the recovery point at the very moment the answer is ready.
        at_answer = []
        answered.add_done_callback(lambda _: at_answer.append(log.recovery_point))
        results = await answered
        return results[TP], at_answer[0]

    result, recovery_point = asyncio.run(produce())
    assert result.error is None and (result.base_offset, result.last_offset) == (0, 4)
    assert recovery_point == 5
    assert manager.group_commit.commits == 1


def test_without_the_setting_acks_1_is_answered_from_the_page_cache(leader_of):
    manager = leader_of(flush_before_ack=False)

    async def produce():
        return manager.append_records_now(timeout_ms=TIMEOUT_MS, required_acks=1,
                                          entries={TP: batch(5)})

    results = asyncio.run(produce())
    assert isinstance(results, dict) and results[TP].last_offset == 4
    assert manager.partitions[TP].log.recovery_point == 0
    assert manager.group_commit.commits == 0


def test_concurrent_produces_share_fsyncs(leader_of):
    """20 clients, each sending 25 produces one after the other: 500 answers, far fewer commits."""
    manager = leader_of(flush_before_ack=True)
    log = manager.partitions[TP].log

    async def client(answers: list):
        for _ in range(25):
            results = await manager.append_records(timeout_ms=TIMEOUT_MS, required_acks=-1,
                                                   entries={TP: batch(2)})
            answers.append((results[TP], log.recovery_point))

    async def run():
        answers = []
        await asyncio.gather(*(client(answers) for _ in range(20)))
        return answers

    answers = asyncio.run(run())
    assert len(answers) == 500
    assert all(r.error is None and recovery_point > r.last_offset for r, recovery_point in answers)
    assert sorted(r.base_offset for r, _ in answers) == list(range(0, 1000, 2))
    assert manager.group_commit.commits <= 100, manager.group_commit.commits


def test_acks_all_waits_for_the_followers_as_well_as_the_fsync(leader_of):
    manager = leader_of(flush_before_ack=True, isr=(1, 2), replicas=(1, 2))
    partition = manager.partitions[TP]

    async def produce():
        answered = asyncio.ensure_future(manager.append_records(
            timeout_ms=TIMEOUT_MS, required_acks=-1, entries={TP: batch(3)}))
        while partition.log.recovery_point < 3:  # the leader's own commit is done ...
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        assert not answered.done()  # ... but follower 2 has not fetched past the batch
        partition.update_follower_fetch(2, 3)  # its fetch offset: durable on it (fetcher.py)
        manager.on_isr_changed(partition)
        return await answered

    results = asyncio.run(produce())
    assert results[TP].error is None and results[TP].last_offset == 2
    assert partition.high_watermark == 3


# -- a real broker ------------------------------------------------------------------------------

def recovery_points(broker: BrokerProcess) -> dict[TopicPartition, int]:
    path = broker.data_dir / "recovery-point-offset-checkpoint"
    return OffsetCheckpointFile(path).read() if path.exists() else {}


@pytest.mark.parametrize("acks", ["1", "all"])
def test_acked_records_are_fsynced_only_with_the_setting(tmp_path, acks):
    """Topic `on` has flush.before.ack; topic `off` does not (and flush.ms is Kafka's infinite
    default, so nothing there is ever fsynced while the broker runs)."""
    overrides = {"log.flush.offset.checkpoint.interval.ms": "100"}
    with BrokerProcess(tmp_path, overrides=overrides) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        futures = admin.create_topics([NewTopic("on", 1, 1, config={"flush.before.ack": "true"}),
                                       NewTopic("off", 1, 1)])
        for future in futures.values():
            future.result(10)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": acks, "linger.ms": 0})
        acked = {"on": 0, "off": 0}

        def on_delivery(err, msg):
            assert err is None, err
            acked[msg.topic()] += 1

        for i in range(300):
            for topic in ("on", "off"):
                producer.produce(topic, b"record-%d" % i, partition=0, on_delivery=on_delivery)
            producer.poll(0)
        assert producer.flush(60) == 0
        assert acked == {"on": 300, "off": 300}
        # The checkpoint is written every 100 ms: the acknowledged records are on disk.
        deadline = time.monotonic() + 30
        while recovery_points(broker).get(TopicPartition("on", 0)) != 300:
            assert time.monotonic() < deadline, recovery_points(broker)
            time.sleep(0.05)
        assert recovery_points(broker)[TopicPartition("off", 0)] == 0
