"""A follower's state from tiered storage (remote/aux_state.py): which remote segment, and the log
started from its leader epochs and producer snapshot."""

from __future__ import annotations

import asyncio

import pytest

from logbroker.clock import ManualClock
from logbroker.errors import OutOfOrderSequenceNumberError
from logbroker.records.builder import build_batch
from logbroker.remote.aux_state import (
    RemoteLogAuxStateError,
    read_aux_state,
    read_last_segment_state,
    segment_for,
    target_epoch,
)
from logbroker.remote.metadata import LEADER_EPOCH, PRODUCER_SNAPSHOT, RemoteLogSegmentMetadata
from logbroker.remote.storage_manager import RemoteStorageManager
from logbroker.storage.leader_epoch_cache import EpochEntry, decode_leader_epoch_checkpoint
from logbroker.storage.log import Log
from logbroker.storage.log_config import LogConfig
from logbroker.storage.producer_snapshot import encode_snapshot
from logbroker.storage.producer_state_entry import BatchMetadata, ProducerStateEntry
from logbroker.types import TopicPartition

NOW = 1_700_000_000_000


def segment(start: int, end: int, epochs: dict[int, int], *, copied_at: int = 0) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata(
        topic="t", partition=0, topic_id="A" * 22, segment_id=f"s{start}-{copied_at}", start_offset=start,
        end_offset=end, max_timestamp_ms=NOW, broker_id=1, event_timestamp_ms=copied_at,
        segment_size_in_bytes=100, segment_leader_epochs=epochs, has_producer_snapshot=True)


PRODUCER = ProducerStateEntry(7, producer_epoch=0, last_timestamp=NOW, batch_metadata=[BatchMetadata(9, 4019, 4, NOW)])


def test_the_target_epoch_is_the_previous_one_when_it_ends_after_the_offset_before_the_local_start():
    # Epochs 0 at 20, 1 at 85, (2 wrote nothing), 3 at 90: the local start 90 is in epoch 3, and
    # offset 89 in epoch 1, which the leader's answer for epoch 2 tells.
    assert target_epoch(local_start=90, epoch_at_local_start=3, earlier=(1, 90)) == 1
    assert target_epoch(local_start=95, epoch_at_local_start=3, earlier=(1, 90)) == 3
    assert target_epoch(local_start=40, epoch_at_local_start=0, earlier=None) == 0


def test_the_segment_is_the_one_holding_the_offset_in_the_target_epoch():
    ours = segment(50, 99, {1: 50, 2: 80})
    divergent = segment(50, 99, {1: 50, 3: 70}, copied_at=5)  # a deposed leader's copy
    segments = [segment(0, 49, {0: 0, 1: 20}), divergent, ours]
    assert segment_for(segments, 89, 2, epoch_at_local_start=2) is ours
    assert segment_for(segments, 30, 1, epoch_at_local_start=2) is segments[0]
    assert segment_for(segments, 100, 2, epoch_at_local_start=2) is None


def test_a_leader_epoch_cache_trimmed_to_the_local_start_still_finds_the_lineage():
    # Such a leader answers OffsetForLeaderEpoch(2) with (2, local start): target epoch 2, which
    # offset 89 was not written in; the segment in the latest epoch not above 3 is taken.
    segments = [segment(0, 49, {0: 0}), segment(50, 89, {0: 50, 1: 60})]
    assert segment_for(segments, 89, 2, epoch_at_local_start=3) is segments[1]
    assert segment_for(segments, 89, 2, epoch_at_local_start=0) is None


def test_the_remote_leader_epoch_checkpoint_is_decoded_and_bad_text_refused():
    assert decode_leader_epoch_checkpoint("0\n2\n0 0\n3 1200\n", source="x") == [EpochEntry(0, 0), EpochEntry(3, 1200)]
    for bad in ("", "1\n0\n", "0\n2\n0 0\n", "0\n1\n0\n"):
        with pytest.raises(ValueError):
            decode_leader_epoch_checkpoint(bad, source="x")


def test_a_log_started_from_remote_state_has_its_epochs_and_producers(tmp_path):
    log = Log.open(tmp_path / "t-0", LogConfig.defaults(), clock=ManualClock(NOW))
    log.start_at_with_remote_state(4020, epochs=[EpochEntry(0, 0), EpochEntry(2, 3000), EpochEntry(5, 4020)],
                                   producers=[PRODUCER])

    assert (log.log_start_offset, log.log_end_offset) == (4020, 4020)
    assert log.leader_epoch_cache.entries == [EpochEntry(0, 0), EpochEntry(2, 3000)]
    assert log.end_offset_for_epoch(0) == (0, 3000)
    assert log.producer_state.snapshot_offsets() == [4020]
    batch = build_batch([(b"k", b"v")] * 5, producer_id=7, producer_epoch=0, base_sequence=5, now_ms=NOW)
    retry = log.append_as_leader(bytearray(batch), leader_epoch=6)
    assert (retry.duplicate, retry.first_offset, retry.last_offset) == (True, 4015, 4019)
    with pytest.raises(OutOfOrderSequenceNumberError):
        log.append_as_leader(bytearray(build_batch([(b"k", b"v")], producer_id=7, producer_epoch=0,
                                                   base_sequence=12, now_ms=NOW)), leader_epoch=6)
    following = log.append_as_leader(bytearray(build_batch([(b"k", b"v")], producer_id=7, producer_epoch=0,
                                                           base_sequence=10, now_ms=NOW)), leader_epoch=6)
    assert (following.duplicate, following.first_offset) == (False, 4020)
    log.close()


def test_the_aux_state_is_read_from_the_store_and_a_missing_or_torn_object_refused(tmp_path):
    rsm = RemoteStorageManager.from_config("local", {"dir": str(tmp_path / "store")})
    held = segment(3000, 4019, {2: 3000})

    async def read():
        return await read_aux_state(rsm, [held], tp=TopicPartition("t", 0), local_start=4020, epoch=2,
                                    epoch_at_local_start=2)

    asyncio.run(rsm.put(held.key(LEADER_EPOCH), b"0\n2\n0 0\n2 3000\n"))
    with pytest.raises(RemoteLogAuxStateError, match=r"\.snapshot not found"):
        asyncio.run(read())
    snapshot = encode_snapshot([PRODUCER])
    asyncio.run(rsm.put(held.key(PRODUCER_SNAPSHOT), snapshot[:-1]))
    with pytest.raises(RemoteLogAuxStateError, match="Unreadable producer snapshot"):
        asyncio.run(read())
    asyncio.run(rsm.put(held.key(PRODUCER_SNAPSHOT), snapshot))
    aux = asyncio.run(read())
    assert (aux.segment, aux.next_offset) == (held, 4020)
    assert aux.epochs == [EpochEntry(0, 0), EpochEntry(2, 3000)]
    assert [(p.producer_id, p.last_seq) for p in aux.producers] == [(7, 9)]


@pytest.mark.parametrize("clean", [True, False])
def test_the_producers_of_a_tiered_log_started_from_remote_state_survive_a_restart(tmp_path, clean):
    tiered = LogConfig.defaults().with_overrides({"remote.storage.enable": "true"})
    log = Log.open(tmp_path / "t-0", tiered, clock=ManualClock(NOW))
    log.start_at_with_remote_state(4020, epochs=[EpochEntry(0, 0)], producers=[PRODUCER])
    log.close()

    log = Log.open(tmp_path / "t-0", tiered, clock=ManualClock(NOW), log_start_offset=4020,
                   recovery_point=4020 if clean else 0, had_clean_shutdown=clean)
    assert (log.log_start_offset, log.log_end_offset) == (4020, 4020)
    assert [(p.producer_id, p.last_seq) for p in log.producer_state.active_producers.values()] == [(7, 9)]
    log.close()


def test_a_leader_starting_after_the_store_takes_the_last_offsets_latest_epoch_then_latest_copy(tmp_path):
    rsm = RemoteStorageManager.from_config("local", {"dir": str(tmp_path / "store")})
    older_epoch = segment(50, 99, {1: 50}, copied_at=9)  # a deposed leader's copy, copied last
    first_copy, second_copy = segment(60, 99, {1: 60, 2: 80}, copied_at=3), segment(60, 99, {1: 60, 2: 80}, copied_at=5)
    segments = [segment(0, 59, {0: 0, 1: 20}), older_epoch, first_copy, second_copy]
    for held in segments:
        asyncio.run(rsm.put(held.key(LEADER_EPOCH), b"0\n1\n%d 0\n" % held.event_timestamp_ms))
        asyncio.run(rsm.put(held.key(PRODUCER_SNAPSHOT), encode_snapshot([PRODUCER])))
    aux = asyncio.run(read_last_segment_state(rsm, segments, tp=TopicPartition("t", 0)))
    assert (aux.segment, aux.next_offset, aux.epochs) == (second_copy, 100, [EpochEntry(5, 0)])
    assert [(p.producer_id, p.last_seq) for p in aux.producers] == [(7, 9)]
