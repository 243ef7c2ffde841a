"""A three-broker cluster on ZooKeeper loses the leader of a tiered partition (kill -9) while it is
uploading a segment: the new leader goes on copying from where the old one stopped, a consumer
from offset 0 reads every acknowledged record once, in order, and the next passes of the remote
log manager leave no object of the cut-short upload and no segment wholly inside another."""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from pathlib import Path

import pytest

from logbroker.errors import NotLeaderOrFollowerError
from logbroker.remote.metadata import RemoteLogSegmentMetadata
from logbroker.remote.storage_manager import RemoteStorageManager
from logbroker.testing import ClusterProcess

from tiered_helpers import Store, wait_until

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "cluster"))
from replica_checks import SequenceProducer, committed_values  # noqa: E402

# Segments of 256 KiB, a few a second from the producer below (about 1 MB/s): each upload is a
# few requests to moto, and the local log keeps four segments.
TIERED = {"remote.storage.enable": "true", "segment.bytes": str(256 << 10),
          "local.retention.bytes": str(1 << 20), "file.delete.delay.ms": "0"}


def freeze_mid_upload(cluster: ClusterProcess, broker_id: int, store: Store, timeout_s: float = 20.0) -> list[str]:
    """Freeze `broker_id` (SIGSTOP) at a moment the bucket holds objects of a segment without its
    metadata, and check they stay so while it is frozen (no request of it still in flight
    commits them). The keys of that upload, the broker left frozen."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not store.uncommitted():
            continue
        cluster.pause(broker_id)
        time.sleep(0.5)
        caught = store.uncommitted()
        if caught:
            return caught
        cluster.resume(broker_id)
    raise AssertionError(f"no upload of broker {broker_id} caught within {timeout_s} s")


def tiered_cluster(tmp_path, bucket, zookeeper) -> ClusterProcess:
    return ClusterProcess(tmp_path, brokers=3, zk_connect=f"{zookeeper.connect_string}/t-{uuid.uuid4().hex[:12]}",
                          overrides={**bucket.broker_overrides(), "remote.log.manager.task.interval.ms": "200"})


def lead_through_the_change(cluster: ClusterProcess, store: Store, topic: str, interrupt) -> tuple[int, int, list[str]]:
    """Produce acknowledged sequence numbers while `interrupt(leader)` freezes the leader in
    the middle of an upload and deposes it; until the new leader has copied two segments.
    (new leader, last offset the old leader copied, keys of the interrupted upload)."""
    old_leader = cluster.leader(topic, 0)
    producer = SequenceProducer(cluster, topic, idempotent=True, pace_s=0.001, value_bytes=1000).start()
    try:
        wait_until(lambda: store.metadata(), "the first copy")
        interrupted = freeze_mid_upload(cluster, old_leader, store)
        copied_by_old = max(m["end_offset"] for m in store.metadata())
        interrupt(old_leader)
        new_leader = cluster.wait_for_leader(topic, 0, not_in={old_leader})
        wait_until(lambda: sum(m["broker_id"] == new_leader for m in store.metadata()) >= 2,
                   "the new leader copying", timeout_s=30)
    finally:
        producer.stop()
    assert producer.acked and not producer.errors
    settle_and_read(cluster, store, topic, new_leader, copied_by_old, producer.acked)
    return new_leader, copied_by_old, interrupted


def settle_and_read(cluster: ClusterProcess, store: Store, topic: str, new_leader: int, copied_by_old: int,
                    acked: set[int]) -> None:
    """The next passes leave no uncommitted object, no segment without its data and none inside
    another; the copies have no gap; a consumer from offset 0 reads every acknowledged record
    once, in order, the start of them from the bucket."""
    def settled():
        by_stem, committed = store.stems()
        broken = [s for s in committed if not any(k.endswith(".log") for k in by_stem[s])]
        segments = store.metadata()
        inside = [(a["start_offset"], a["end_offset"]) for a in segments for b in segments
                  if a is not b and b["start_offset"] <= a["start_offset"] and a["end_offset"] <= b["end_offset"]]
        return not store.uncommitted() and not broken and not inside and segments

    segments = wait_until(settled, "orphans, broken and covered segments deleted")
    assert segments[0]["start_offset"] == 0
    for before, after in zip(segments, segments[1:]):
        assert before["start_offset"] < after["start_offset"] <= before["end_offset"] + 1  # no gap
    resumed = [m for m in segments if m["broker_id"] == new_leader]
    assert min(m["start_offset"] for m in resumed) <= copied_by_old + 1

    local = cluster.brokers[new_leader].data_dir / f"{topic}-0"
    wait_until(lambda: min(int(p.stem) for p in local.glob("*.log")) > 0, "the new leader's local deletion")
    records = committed_values(cluster, topic, 0)
    assert [offset for offset, _ in records] == list(range(len(records)))
    sequence = [value for _, value in records]
    assert sequence == sorted(set(sequence))  # in order, none twice
    assert acked <= set(sequence)


def test_a_new_leader_resumes_the_uploads_of_a_leader_killed_mid_upload(tmp_path, bucket, logbroker_zookeeper):
    with tiered_cluster(tmp_path, bucket, logbroker_zookeeper) as cluster:
        topic = "tiered-failover"
        cluster.create_topic(topic, replication_factor=3, config=TIERED)
        store = Store(bucket, topic)
        new_leader, _, cut_short = lead_through_the_change(cluster, store, topic, cluster.kill)
        assert not set(bucket.keys(store.prefix)) & set(cut_short)
        assert "unfinished copies" in cluster.brokers[new_leader].new_log_text()


def test_a_leader_deposed_while_frozen_mid_upload_leaves_nothing_behind(tmp_path, bucket, logbroker_zookeeper):
    """The old leader wakes up after a new one took over and finishes its upload: it either sees
    it was deposed and deletes what it wrote, or commits late — then the new leader adopts the
    copy, or deletes it as covered or broken (its orphans may already be gone)."""
    with tiered_cluster(tmp_path, bucket, logbroker_zookeeper) as cluster:
        topic = "tiered-deposed"
        cluster.create_topic(topic, replication_factor=3, config=TIERED)
        store = Store(bucket, topic)

        def wake_after_deposition(old_leader: int) -> None:
            cluster.wait_for_leader(topic, 0, not_in={old_leader})
            cluster.resume(old_leader)

        new_leader, _, interrupted = lead_through_the_change(cluster, store, topic, wake_after_deposition)
        old_leader = next(b for b in cluster.brokers if b != new_leader
                          and cluster.brokers[b].new_log_text().count("Copied segment"))
        cluster.wait_for_isr(topic, 0, size=3)
        texts = cluster.brokers[old_leader].new_log_text() + cluster.brokers[new_leader].new_log_text()
        assert any(line in texts for line in ("Not committing the copy", "Adopting", "unfinished copies",
                                              "lacks its")), interrupted


def test_a_deposed_copier_deletes_what_it_wrote_instead_of_committing_it(tmp_path, bucket):
    """The commit check of a copy (RemoteStorageManager.copy_log_segment_data), against the S3
    server: asked right before the metadata is written, a "no" leaves nothing in the bucket."""
    settings = {k.removeprefix("rsm.config."): v for k, v in bucket.broker_overrides().items()
                if k.startswith("rsm.config.")}
    rsm = RemoteStorageManager.from_config("s3", settings)
    segment = tmp_path / "00000000000000000000.log"
    segment.write_bytes(b"records" * 1000)
    metadata = RemoteLogSegmentMetadata(
        topic="t", partition=0, topic_id="AAAAAAAAAAAAAAAAAAAAAA", segment_id="BBBBBBBBBBBBBBBBBBBBBB",
        start_offset=0, end_offset=9, max_timestamp_ms=0, broker_id=1, event_timestamp_ms=0,
        segment_size_in_bytes=7000)
    files = {".log": segment, ".index": b"", ".timeindex": b"", ".leader_epoch_checkpoint": b"0\n1\n0 0\n"}
    asked = []

    def deposed() -> bool:
        asked.append(sorted(k.rsplit(".", 1)[1] for k in bucket.keys()))  # what is there when asked
        return False

    with pytest.raises(NotLeaderOrFollowerError, match="no longer leads"):
        asyncio.run(rsm.copy_log_segment_data(metadata, files, deposed))
    assert asked == [["index", "leader_epoch_checkpoint", "log", "timeindex"]]
    assert bucket.keys() == []

    asyncio.run(rsm.copy_log_segment_data(metadata, files, lambda: True))
    assert sorted(k.rsplit(".", 1)[1] for k in bucket.keys()) == [
        "index", "leader_epoch_checkpoint", "log", "metadata", "timeindex"]
