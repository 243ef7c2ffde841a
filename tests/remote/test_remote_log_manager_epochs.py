"""The remote log manager's leadership rules on a real log and a local-directory store: a leader
that finds a newer leader epoch in the store expires nothing (it was deposed and does not know
yet), and once it leads in that epoch the foreign copy goes; the leader epoch cache keeps the
epochs of what is remote while local segments go, and is trimmed when the log start moves."""

from __future__ import annotations

import asyncio
import json
import uuid

from logbroker.clock import ManualClock
from logbroker.metadata.model import PartitionState
from logbroker.records.builder import build_batch
from logbroker.remote.remote_log_manager import RemoteLogManager
from logbroker.remote.storage_manager import RemoteStorageManager
from logbroker.replication.partition import Partition
from logbroker.storage.checkpoints import random_kafka_uuid, uuid_to_kafka_str
from logbroker.storage.log import Log
from logbroker.storage.log_config import LogConfig
from logbroker.types import TopicPartition

TP = TopicPartition("epochs", 0)
NOW = 1_800_000_000_000


def leader_log(tmp_path, clock) -> tuple[Partition, Log]:
    config = LogConfig.defaults().with_overrides({
        "remote.storage.enable": "true", "local.retention.bytes": "1", "file.delete.delay.ms": "0"})
    log = Log.open(tmp_path / "epochs-0", config, clock=clock, topic_id=uuid.uuid4(), topic_partition=TP)
    return Partition(TP, log=log, local_broker_id=1, clock=clock), log


def append_segments(partition: Partition, log: Log, count: int, epoch: int) -> None:
    """`count` closed segments of 10 records each, all committed."""
    for _ in range(count):
        log.append_as_leader(build_batch([(None, b"v%d" % i) for i in range(10)], partition_leader_epoch=epoch,
                                         now_ms=NOW), leader_epoch=epoch)
        log.roll()
    log.update_high_watermark(log.log_end_offset)


def lead(rlm: RemoteLogManager, partition: Partition, epoch: int) -> None:
    assert partition.make_leader(PartitionState(leader=1, leader_epoch=epoch, isr=(1,)), (1,))
    rlm.on_leadership(TP, partition)


def plant_copy(store_dir, source: dict, **changes) -> str:
    """A copy of a committed segment's objects under a new id, its metadata changed by `changes`."""
    directory = next(store_dir.iterdir())
    segment_id = uuid_to_kafka_str(random_kafka_uuid())
    old_stem = f"{source['start_offset']:020d}-{source['segment_id']}"
    new_stem = f"{source['start_offset']:020d}-{segment_id}"
    for path in directory.glob(old_stem + ".*"):
        target = directory / path.name.replace(old_stem, new_stem)
        if path.suffix == ".metadata":
            target.write_text(json.dumps({**source, **changes, "segment_id": segment_id}))
        else:
            target.write_bytes(path.read_bytes())
    return segment_id


def stored(store_dir) -> list[dict]:
    found = [json.loads(p.read_text()) for p in next(store_dir.iterdir()).glob("*.metadata")]
    return sorted(found, key=lambda m: (m["start_offset"], m["end_offset"]))


def test_a_deposed_leader_expires_nothing_and_the_new_one_drops_the_foreign_copy(tmp_path):
    async def scenario():
        clock = ManualClock(NOW)
        partition, log = leader_log(tmp_path, clock)
        store_dir = tmp_path / "store"
        rlm = RemoteLogManager(rsm=RemoteStorageManager.from_config("local", {"dir": str(store_dir)}),
                               broker_id=1, clock=clock, partitions={TP: partition}, task_interval_ms=100,
                               fetch_max_wait_ms=500)
        lead(rlm, partition, 1)
        append_segments(partition, log, 4, epoch=1)
        await rlm.run_once()
        copied = stored(store_dir)
        assert [(m["start_offset"], m["end_offset"]) for m in copied] == [(0, 9), (10, 19), (20, 29), (30, 39)]
        # Local retention deleted the copied segments; the epochs of what is remote stay.
        assert log.log_start_offset >= 30
        assert [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries] == [(1, 0)]

        # A copy by a leader of epoch 3, which this broker (still at epoch 1) has not heard of.
        foreign = plant_copy(store_dir, copied[0], segment_leader_epochs={"3": 0})
        for _ in range(11):  # past the next reconciliation
            await rlm.run_once()
        assert foreign in {m["segment_id"] for m in stored(store_dir)}

        # Leading in epoch 3 itself, it sees the copy claims records of epoch 3 its log has not.
        lead(rlm, partition, 3)
        await rlm.run_once()
        assert [m["segment_id"] for m in stored(store_dir)] == [m["segment_id"] for m in copied]

        # DeleteRecords inside the remote range: the copies below go and the cache is trimmed
        # at the new log start offset.
        rlm.delete_records(TP, 25)
        await asyncio.sleep(0.2)
        await rlm.run_once()
        assert [m["start_offset"] for m in stored(store_dir)] == [20, 30]
        assert [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries] == [(1, 25), (3, 40)]
    asyncio.run(scenario())
