"""A single broker whose disk was erased, with no replica to follow: its tiered partition's log
starts after the bucket's last offset with the leader epochs and the producer state of the last
remote segment, so OffsetForLeaderEpoch answers for the old epochs as before and an idempotent
producer goes on with its sequence; until the bucket is listed, produce is refused with
NOT_LEADER_OR_FOLLOWER (retriable) instead of taking offsets the bucket holds."""

from __future__ import annotations

import shutil

from clients import RawClient, consume_confluent, create_topic, produce_confluent
from test_tiered_cluster import idempotent_batch, log_end, offset_for_leader_epoch
from tiered_helpers import PRODUCER, TIERED, earliest_offset, remote_metadata, specs, start_broker, wait_until

NOT_LEADER_OR_FOLLOWER = 6


def leader_epoch(broker, topic: str) -> int:
    with RawClient(broker.bootstrap) as client:
        return int(client.list_offset(topic, 0, -1, version=9).leader_epoch)


def erase_logs(broker) -> None:
    """The disk's logs and checkpoints go; the topic's metadata (on ZooKeeper in a cluster) stays."""
    for path in broker.data_dir.iterdir():
        if path.name not in ("logbroker-metadata.json", "meta.properties"):
            shutil.rmtree(path) if path.is_dir() else path.unlink()


def test_an_erased_single_broker_starts_after_the_bucket_with_its_epochs_and_producers(tmp_path, bucket):
    broker = start_broker(tmp_path, bucket)
    topic = "tiered-erased"
    try:
        create_topic(broker.bootstrap, topic, config=TIERED)
        with RawClient(broker.bootstrap) as client:
            pid, producer_epoch = client.init_producer_id()
            first = client.produce(topic, 0, idempotent_batch(pid, producer_epoch, 0, 2))
        assert (int(first.error_code), first.base_offset) == (0, 0)
        produce_confluent(broker.bootstrap, topic, specs(400), **PRODUCER)
        first_epoch = leader_epoch(broker, topic)

        broker.stop()  # a restart: the partition's next leader epoch
        broker.start()
        second_epoch = leader_epoch(broker, topic)
        assert second_epoch > first_epoch
        second_epoch_start = log_end(broker, topic)
        assert second_epoch_start == 402
        last_batch = idempotent_batch(pid, producer_epoch, 2, 2)
        with RawClient(broker.bootstrap) as client:
            last = client.produce(topic, 0, last_batch)
        assert (int(last.error_code), last.base_offset) == (0, 402)
        produce_confluent(broker.bootstrap, topic, specs(400, 400), **PRODUCER)
        wait_until(lambda: max((m["end_offset"] for m in remote_metadata(bucket, topic)), default=-1) > 404,
                   "the idempotent producer's last batch copied")
        before = offset_for_leader_epoch(broker.bootstrap, topic, first_epoch)
        assert before == (first_epoch, second_epoch_start)
    finally:
        broker.stop()
    stored = remote_metadata(bucket, topic)
    copied = max(m["end_offset"] for m in stored)
    # While a `restore-topic` seems to be filling the partition's directory its first listing
    # does not end: produce to the empty log is refused meanwhile.
    marker = stored[0]["segment_id"]
    directory = next(k for k in bucket.keys("cluster-a/") if marker in k).rsplit("/", 1)[0]
    bucket.client.put_object(Bucket=bucket.name, Key=f"{directory}/restoring", Body=b"")

    erase_logs(broker)
    broker.start()
    try:
        with RawClient(broker.bootstrap) as client:
            refused = client.produce(topic, 0, idempotent_batch(pid, producer_epoch, 4, 2))
        assert int(refused.error_code) == NOT_LEADER_OR_FOLLOWER
        assert log_end(broker, topic) == 0
        bucket.client.delete_object(Bucket=bucket.name, Key=f"{directory}/restoring")
        wait_until(lambda: log_end(broker, topic) == copied + 1, "the log started after the bucket")
        text = broker.new_log_text()
        assert (f"starting the local log at {copied + 1} with the 2 leader epoch(s) and 1 producer(s) "
                f"of remote segment") in text

        assert earliest_offset(broker, topic) == 0
        third_epoch = leader_epoch(broker, topic)
        assert third_epoch > second_epoch
        # The lineage came from the bucket's leader epoch checkpoint.
        assert offset_for_leader_epoch(broker.bootstrap, topic, first_epoch) == before
        assert offset_for_leader_epoch(broker.bootstrap, topic, second_epoch) == (second_epoch, copied + 1)
        with RawClient(broker.bootstrap) as client:
            # The producer state came from the bucket's snapshot: a retry of the last copied
            # batch is a duplicate (answered with its offset, not written), the next one follows.
            again = client.produce(topic, 0, last_batch)
            assert (int(again.error_code), again.base_offset) == (0, 402)
            following = client.produce(topic, 0, idempotent_batch(pid, producer_epoch, 4, 2))
            assert (int(following.error_code), following.base_offset) == (0, copied + 1)
        assert log_end(broker, topic) == copied + 3
        records = consume_confluent(broker.bootstrap, topic, {0: 0}, copied + 3)
        assert [r.offset for r in records] == list(range(copied + 3))
        idem = [b"idem-%d" % i for i in range(6)]
        values = idem[:2] + [s.value for s in specs(400)] + idem[2:4] + [s.value for s in specs(400, 400)]
        assert [r.value for r in records] == values[:copied + 1] + idem[4:6]
    finally:
        broker.stop()


def test_an_unreadable_checkpoint_starts_the_log_after_the_bucket_without_the_remote_state(tmp_path, bucket):
    broker = start_broker(tmp_path, bucket)
    topic = "tiered-erased-unreadable"
    try:
        create_topic(broker.bootstrap, topic, config=TIERED)
        produce_confluent(broker.bootstrap, topic, specs(400), **PRODUCER)
        wait_until(lambda: max((m["end_offset"] for m in remote_metadata(bucket, topic)), default=-1) > 0,
                   "segments copied")
    finally:
        broker.stop()
    last = max(remote_metadata(bucket, topic), key=lambda m: m["end_offset"])
    copied = last["end_offset"]
    [checkpoint] = [k for k in bucket.keys("cluster-a/")
                    if last["segment_id"] in k and k.endswith(".leader_epoch_checkpoint")]
    bucket.client.put_object(Bucket=bucket.name, Key=checkpoint, Body=b"\xff not a checkpoint")

    erase_logs(broker)
    broker.start()
    try:
        # librdkafka retries the NOT_LEADER_OR_FOLLOWER answered until the bucket is listed.
        produce_confluent(broker.bootstrap, topic, specs(1, 400), **PRODUCER)
        assert log_end(broker, topic) == copied + 2
        text = broker.new_log_text()
        assert text.count(f"Starting the empty local log of {topic}-0 after the remote store's offset "
                          f"{copied} without the leader epochs and producer state there") == 1
        assert f"starting the local log at {copied + 1} with no remote state" in text
        records = consume_confluent(broker.bootstrap, topic, {0: 0}, copied + 2)
        assert [r.offset for r in records] == list(range(copied + 2))
        assert [r.value for r in records] == [s.value for s in specs(copied + 1)] + [specs(1, 400)[0].value]
    finally:
        broker.stop()
