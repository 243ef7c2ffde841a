"""Tiered storage in a two-broker cluster on ZooKeeper: a follower learns what the leader copied
and deletes it locally; a follower with an erased disk rejoins without copying the tiered history
(OFFSET_MOVED_TO_TIERED_STORAGE), taking the leader epochs and the producer state at its new log
start from the bucket (and waiting, with one log line, while the bucket cannot give them); as the
new leader it serves the history from the bucket, answers for old epochs, goes on with the
producers that wrote before, and goes on copying."""

from __future__ import annotations

import uuid

from confluent_kafka import Producer
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

from logbroker.records.builder import build_batch
from logbroker.testing import ClusterProcess

from clients import TIMEOUT_S, RawClient, admin, consume_confluent, produce_confluent
from test_deleted_producer_history import free_port
from test_tiered_storage import PRODUCER, TIERED, earliest_offset, local_segments, remote_metadata, specs
from tiered_helpers import wait_until

# The transaction coordinator's log on both brokers, so a transaction outlives its leader.
TXN_STATE = {"transaction.state.log.replication.factor": "2", "transaction.state.log.min.isr": "1"}


def idempotent_batch(pid: int, epoch: int, sequence: int, count: int) -> bytes:
    """A batch as an idempotent producer sends it (crafted: a real one resends a batch only
    after a lost answer)."""
    return build_batch([(b"idem", b"idem-%d" % (sequence + i)) for i in range(count)],
                       producer_id=pid, producer_epoch=epoch, base_sequence=sequence)


def offset_for_leader_epoch(bootstrap: str, topic: str, epoch: int) -> tuple[int, int]:
    with RawClient(bootstrap) as client:
        response = client.request(23, 4, replica_id=-1, topics=[{"topic": topic, "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "leader_epoch": epoch}]}])
    [result] = response.topics[0].partitions
    assert int(result.error_code) == 0, result
    return int(result.leader_epoch), int(result.end_offset)


def log_end(broker, topic: str) -> int:
    with RawClient(broker.bootstrap) as client:
        return int(client.list_offset(topic, 0, -1).offset)


def test_a_wiped_follower_rebuilds_its_state_from_the_bucket_and_leads_on_without_the_history(
        tmp_path, bucket, logbroker_zookeeper):
    cluster = ClusterProcess(tmp_path, brokers=2,
                             zk_connect=f"{logbroker_zookeeper.connect_string}/t-{uuid.uuid4().hex[:12]}",
                             overrides={**bucket.broker_overrides(), "remote.log.manager.task.interval.ms": "100",
                                        **TXN_STATE},
                             # Same addresses after a restart: the transactional producer finds
                             # its coordinator on the broker that comes back.
                             broker_overrides={b: {"listeners": f"PLAINTEXT://127.0.0.1:{free_port()}"}
                                               for b in (1, 2)})
    with cluster:
        topic = "tiered-cluster"
        cluster.create_topic(topic, replica_assignment=[[1, 2]], config=TIERED)
        first_epoch = cluster.partition_state(topic, 0).leader_epoch
        one, two = cluster.brokers[1], cluster.brokers[2]

        # Broker 1 leads: an idempotent producer, a committed and an aborted transaction, records.
        with RawClient(one.bootstrap) as client:
            pid, producer_epoch = client.init_producer_id()
            for k in range(3):
                answer = client.produce(topic, 0, idempotent_batch(pid, producer_epoch, 2 * k, 2))
                assert (int(answer.error_code), answer.base_offset) == (0, 2 * k)
        txn = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "takeover", **PRODUCER})
        txn.init_transactions(TIMEOUT_S)
        committed, aborted = [b"t1-%02d" % i for i in range(10)], [b"t2-%02d" % i for i in range(10)]
        for values, commit in ((committed, True), (aborted, False)):
            txn.begin_transaction()
            for value in values:
                txn.produce(topic, value=value, partition=0)
            txn.flush(TIMEOUT_S)
            (txn.commit_transaction if commit else txn.abort_transaction)(TIMEOUT_S)
        produce_confluent(cluster.bootstrap, topic, specs(1000), **PRODUCER, acks="all")

        # Broker 1 steps down; broker 2 leads in a later epoch, the idempotent producer writes
        # its last batch there, and records after it push it out of the local logs.
        cluster.stop(1)
        assert cluster.wait_for_leader(topic, 0, not_in={1}) == 2
        second_epoch = cluster.partition_state(topic, 0).leader_epoch
        second_epoch_start = log_end(two, topic)
        last_batch = idempotent_batch(pid, producer_epoch, 6, 2)
        with RawClient(two.bootstrap) as client:
            last_answer = client.produce(topic, 0, last_batch)
        assert int(last_answer.error_code) == 0 and last_answer.base_offset >= second_epoch_start
        produce_confluent(two.bootstrap, topic, specs(1000, 1000), **PRODUCER, acks="all")
        wait_until(lambda: local_segments(two, topic)[0] > last_answer.base_offset + 2,
                   "the idempotent producer's last batch only in the bucket")
        # Local deletion stops here: the epochs checked below stay in the new leader's cache
        # whether or not local deletion trims it.
        resource = ConfigResource("TOPIC", topic, incremental_configs=[
            ConfigEntry("local.retention.bytes", "-2", incremental_operation=AlterConfigOpType.SET)])
        admin(two.bootstrap).incremental_alter_configs([resource])[resource].result(TIMEOUT_S)
        with RawClient(two.bootstrap) as client:
            local_start = int(client.list_offset(topic, 0, -4, version=9).offset)

        # Broker 1 comes back with an empty disk while the producer snapshot it needs is
        # unreadable in the bucket: one line, it waits; once the object is whole it starts there.
        [before] = [m for m in remote_metadata(bucket, topic)
                    if m["start_offset"] <= local_start - 1 <= m["end_offset"]]
        snapshot_key = next(k for k in bucket.keys(f"cluster-a/{topic}-0-")
                            if before["segment_id"] in k and k.endswith(".snapshot"))
        snapshot = bucket.get(snapshot_key)
        bucket.client.put_object(Bucket=bucket.name, Key=snapshot_key, Body=snapshot[:-3] + b"bad")
        cluster.wipe(1)
        cluster.start_broker(1)
        wait_until(lambda: "is not readable from tiered storage" in one.new_log_text(), "the follower's error line")
        assert list(cluster.partition_state(topic, 0).isr) == [2]
        assert local_segments(one, topic) == [0]  # nothing started without the producer state
        bucket.client.put_object(Bucket=bucket.name, Key=snapshot_key, Body=snapshot)
        cluster.wait_for_isr(topic, 0, size=2)
        text = one.new_log_text()
        assert text.count("is not readable from tiered storage") == 1 and "Unreadable producer snapshot" in text
        assert f"starting at {before['end_offset'] + 1} with the" in text and "in tiered storage" in text
        assert local_segments(one, topic)[0] == before["end_offset"] + 1  # the history left remote

        # A transaction open across the change of leader; broker 1 leads from here.
        txn.begin_transaction()
        open_values = [b"t3-%02d" % i for i in range(10)]
        for value in open_values:
            txn.produce(topic, value=value, partition=0)
        txn.flush(TIMEOUT_S)
        third_epoch_start = log_end(two, topic)
        cluster.stop(2)
        assert cluster.wait_for_leader(topic, 0, not_in={2}) == 1
        txn.commit_transaction(TIMEOUT_S)

        with RawClient(one.bootstrap) as client:
            # The producer state came from the bucket's snapshot: its last batch is still
            # recognised as a retry, and its next one follows on.
            again = client.produce(topic, 0, last_batch)
            assert (int(again.error_code), again.base_offset) == (0, last_answer.base_offset)
            following = client.produce(topic, 0, idempotent_batch(pid, producer_epoch, 8, 2))
            assert int(following.error_code) == 0 and following.base_offset > third_epoch_start
        # The leader epoch lineage came from the bucket's checkpoint.
        assert offset_for_leader_epoch(one.bootstrap, topic, first_epoch) == (first_epoch, second_epoch_start)
        assert offset_for_leader_epoch(one.bootstrap, topic, second_epoch) == (second_epoch, third_epoch_start)
        assert earliest_offset(one, topic) == 0

        idem = [b"idem-%d" % i for i in range(10)]
        expected = (idem[:6] + committed + [s.value for s in specs(1000)] + idem[6:8]
                    + [s.value for s in specs(1000, 1000)] + open_values + idem[8:])
        read = consume_confluent(one.bootstrap, topic, {0: 0}, len(expected),
                                 **{"isolation.level": "read_committed"})
        assert [r.value for r in read] == expected
        offsets = [r.offset for r in read]
        assert offsets == sorted(offsets) and offsets[0] == 0

        # The new leader goes on copying after what broker 2 copied, without overlaps.
        resource = ConfigResource("TOPIC", topic, incremental_configs=[
            ConfigEntry("local.retention.bytes", TIERED["local.retention.bytes"],
                        incremental_operation=AlterConfigOpType.SET)])
        admin(one.bootstrap).incremental_alter_configs([resource])[resource].result(TIMEOUT_S)
        produce_confluent(one.bootstrap, topic, specs(500, 2000), **PRODUCER, acks=1)
        wait_until(lambda: any(m["broker_id"] == 1 and m["start_offset"] > local_start
                               for m in remote_metadata(bucket, topic)), "the new leader copying")
        segments = remote_metadata(bucket, topic)
        for earlier, later in zip(segments, segments[1:]):
            assert later["start_offset"] > earlier["end_offset"]
