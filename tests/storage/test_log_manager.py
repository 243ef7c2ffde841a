"""LogManager: log dirs, meta.properties, loading, placement, checkpoints, deletion, shutdown."""

from __future__ import annotations

import errno
import os
import uuid

import pytest

from logbroker.clock import ManualClock
from logbroker.errors import InconsistentClusterIdError, InconsistentTopicIdError, KafkaStorageError
from logbroker.records.builder import build_batch
from logbroker.storage.checkpoints import CLEAN_SHUTDOWN_FILE, BrokerMetadata, OffsetCheckpointFile
from logbroker.storage.log_config import LogConfig
from logbroker.storage.log_manager import LogManager, is_dir_failure
from logbroker.types import TopicPartition

NOW = 1_700_000_000_000
HOUR = 3_600_000


def batch(n: int = 1, ts: int = NOW) -> bytearray:
    return bytearray(build_batch([(b"k", b"value")] * n, now_ms=ts))


@pytest.fixture
def clock():
    return ManualClock(NOW)


@pytest.fixture
def dirs(tmp_path):
    return [tmp_path / "d1", tmp_path / "d2"]


def manager(dirs, clock, **kwargs) -> LogManager:
    kwargs.setdefault("default_config", LogConfig.defaults())
    lm = LogManager(dirs, clock=clock, **kwargs)
    lm.startup()
    return lm


def fill(lm: LogManager, partitions: int, topic: str = "orders") -> dict[TopicPartition, int]:
    ends = {}
    for p in range(partitions):
        tp = TopicPartition(topic, p)
        log = lm.get_or_create_log(tp, topic_id=uuid.UUID(int=7))
        for _ in range(p % 4 + 1):
            log.append_as_leader(batch(2), leader_epoch=0)
        log.update_high_watermark(log.log_end_offset - 1)
        ends[tp] = log.log_end_offset
    return ends


def test_many_partitions_over_two_dirs_load_back(dirs, clock):
    lm = manager(dirs, clock, cluster_id="c1")
    ends = fill(lm, 20)
    per_dir = {d: len(logs) for d, logs in lm.logs_by_dir().items()}
    assert sorted(per_dir.values()) == [10, 10]
    lm.shutdown()
    for d in dirs:
        assert (d / CLEAN_SHUTDOWN_FILE).exists()

    lm = manager(dirs, clock, cluster_id="c1")
    assert all(lm.had_clean_shutdown(d) for d in dirs)
    assert not any((d / CLEAN_SHUTDOWN_FILE).exists() for d in dirs)
    assert {log.topic_partition: log.log_end_offset for log in lm.all_logs()} == ends
    for tp, end in ends.items():
        log = lm.get_log(tp)
        assert log.recovery_point == end
        assert log.high_watermark == end - 1
        assert log.topic_id == uuid.UUID(int=7)
    lm.shutdown()


def test_checkpoint_files_are_kafka_format(dirs, clock):
    lm = manager(dirs[:1], clock)
    a = lm.get_or_create_log(TopicPartition("a", 0))
    b = lm.get_or_create_log(TopicPartition("b", 1))
    a.append_as_leader(batch(3), leader_epoch=0)
    b.append_as_leader(batch(2), leader_epoch=0)
    b.update_high_watermark(2)
    b.maybe_increment_log_start_offset(1)
    lm.checkpoint_recovery_points()
    lm.checkpoint_high_watermarks()
    lm.checkpoint_log_start_offsets()
    d = dirs[0]
    assert (d / "recovery-point-offset-checkpoint").read_bytes() == b"0\n2\na 0 0\nb 1 1\n"
    assert (d / "replication-offset-checkpoint").read_bytes() == b"0\n2\na 0 0\nb 1 2\n"
    assert (d / "log-start-offset-checkpoint").read_bytes() == b"0\n1\nb 1 1\n"
    lm.shutdown()
    assert (d / "recovery-point-offset-checkpoint").read_bytes() == b"0\n2\na 0 3\nb 1 2\n"


def test_new_partitions_go_to_the_dir_with_fewest(dirs, clock):
    lm = manager(dirs, clock)
    first = lm.get_or_create_log(TopicPartition("t", 0))
    second = lm.get_or_create_log(TopicPartition("t", 1))
    assert {first.dir.parent, second.dir.parent} == {d.absolute() for d in dirs}
    assert lm.get_or_create_log(TopicPartition("t", 0)) is first
    lm.shutdown()


def test_partition_metadata_topic_id_checked(dirs, clock):
    lm = manager(dirs, clock)
    lm.get_or_create_log(TopicPartition("t", 0), topic_id=uuid.UUID(int=1))
    with pytest.raises(InconsistentTopicIdError):
        lm.get_or_create_log(TopicPartition("t", 0), topic_id=uuid.UUID(int=2))
    log = lm.get_or_create_log(TopicPartition("u", 0))
    assert log.topic_id is None
    lm.get_or_create_log(TopicPartition("u", 0), topic_id=uuid.UUID(int=3))
    assert (log.dir / "partition.metadata").exists()
    lm.shutdown()


def test_unclean_start_recovers_from_the_recovery_point(dirs, clock):
    lm = manager(dirs[:1], clock)
    log = lm.get_or_create_log(TopicPartition("t", 0))
    for _ in range(3):
        log.append_as_leader(batch(2), leader_epoch=0)
    path = log.active_segment.log.path
    size = log.active_segment.size
    # a crash: nothing flushed, closed or checkpointed
    for lg in lm.all_logs():
        lg.close_handles()
    lm._unlock_dirs()
    os.truncate(path, size - 5)
    lm = manager(dirs[:1], clock)
    assert not lm.had_clean_shutdown(dirs[0])
    assert lm.get_log(TopicPartition("t", 0)).log_end_offset == 4
    lm.shutdown()


def test_corrupt_recovery_checkpoint_means_full_recovery_not_failure(dirs, clock):
    lm = manager(dirs[:1], clock)
    lm.get_or_create_log(TopicPartition("t", 0)).append_as_leader(batch(2), leader_epoch=0)
    lm.shutdown()
    (dirs[0] / "recovery-point-offset-checkpoint").write_text("garbage")
    (dirs[0] / CLEAN_SHUTDOWN_FILE).unlink()
    lm = manager(dirs[:1], clock)
    assert lm.get_log(TopicPartition("t", 0)).log_end_offset == 2
    lm.shutdown()


def test_meta_properties_written_and_checked(dirs, clock):
    lm = manager(dirs, clock, broker_id=5, cluster_id="cluster-A")
    lm.shutdown()
    for d in dirs:
        assert BrokerMetadata.read(d / "meta.properties") == BrokerMetadata(5, "cluster-A")
    with pytest.raises(KafkaStorageError, match="broker.id") as info:
        manager(dirs, clock, broker_id=6, cluster_id="cluster-A")
    assert "meta.properties" in str(info.value)
    with pytest.raises(InconsistentClusterIdError):
        manager(dirs, clock, broker_id=5, cluster_id="cluster-B")
    lm = manager(dirs, clock, broker_id=5)
    assert lm.cluster_id == "cluster-A"
    lm.shutdown()


def test_cluster_id_generated_when_unknown(dirs, clock):
    lm = manager(dirs, clock)
    assert lm.cluster_id and len(lm.cluster_id) == 22
    lm.shutdown()
    lm2 = manager(dirs, clock)
    assert lm2.cluster_id == lm.cluster_id
    lm2.shutdown()


def test_missing_log_dir_is_created(tmp_path, clock):
    lm = manager([tmp_path / "a" / "b" / "c"], clock)
    assert (tmp_path / "a" / "b" / "c" / "meta.properties").exists()
    lm.shutdown()


def test_uncreatable_log_dir_is_a_clear_error(tmp_path, clock):
    (tmp_path / "file").write_text("not a dir")
    bad = tmp_path / "file" / "logs"
    with pytest.raises(KafkaStorageError) as info:
        manager([bad], clock)
    assert str(bad) in str(info.value) and "log.dirs" in str(info.value)


def test_log_dir_that_is_a_file_is_a_clear_error(tmp_path, clock):
    (tmp_path / "logs").write_text("")
    with pytest.raises(KafkaStorageError, match="logs"):
        manager([tmp_path / "logs"], clock)


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere")
def test_read_only_log_dir_is_a_clear_error(tmp_path, clock):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        with pytest.raises(KafkaStorageError, match="not writable"):
            manager([ro], clock)
    finally:
        ro.chmod(0o700)


def test_second_broker_on_the_same_dir_is_refused(dirs, clock):
    lm = manager(dirs, clock)
    with pytest.raises(KafkaStorageError, match="lock"):
        manager(dirs[1:], clock)
    lm.shutdown()
    manager(dirs[1:], clock).shutdown()


def test_duplicate_log_dir_is_refused(tmp_path, clock):
    with pytest.raises(KafkaStorageError, match="Duplicate"):
        manager([tmp_path / "x", tmp_path / "y" / ".." / "x"], clock)


def test_partition_in_two_dirs_is_refused(dirs, clock):
    for d in dirs:
        (d / "t-0").mkdir(parents=True)
    with pytest.raises(KafkaStorageError, match="Duplicate log directories for t-0"):
        manager(dirs, clock)


def test_startup_skips_non_partitions_and_removes_deleted_partitions(dirs, clock):
    d = dirs[0]
    (d / "t-0.0123456789abcdef0123456789abcdef-delete").mkdir(parents=True)
    (d / "not_a_partition").mkdir()
    (d / "t-0.abc-future").mkdir()
    (d / "some-file-3").write_text("")
    (d / "real-7").mkdir()
    lm = manager(dirs, clock)
    assert [log.topic_partition for log in lm.all_logs()] == [TopicPartition("real", 7)]
    assert not (d / "t-0.0123456789abcdef0123456789abcdef-delete").exists()
    assert not (d / "t-0.abc-future").exists()  # a move cut short by the shutdown is dropped
    assert (d / "not_a_partition").exists()
    lm.shutdown()


def test_delete_log_renames_then_removes_after_delay(dirs, clock):
    config = LogConfig.defaults().with_overrides({"file.delete.delay.ms": 60_000})
    lm = manager(dirs[:1], clock, default_config=config)
    tp = TopicPartition("gone", 3)
    log = lm.get_or_create_log(tp)
    log.append_as_leader(batch(), leader_epoch=0)
    lm.get_or_create_log(TopicPartition("kept", 0))
    lm.checkpoint_recovery_points()
    assert lm.delete_log(tp) is log
    assert lm.get_log(tp) is None
    renamed = [p.name for p in dirs[0].iterdir() if p.name.endswith("-delete")]
    assert len(renamed) == 1 and renamed[0].startswith("gone-3.")
    assert len(renamed[0].split(".")[1]) == len(uuid.uuid4().hex) + len("-delete")
    assert tp not in OffsetCheckpointFile(dirs[0] / "recovery-point-offset-checkpoint").read()
    clock.advance(60_000)
    lm.cleanup_logs()
    assert not any(p.name.endswith("-delete") for p in dirs[0].iterdir())
    assert lm.delete_log(tp) is None
    lm.shutdown()


def test_cleanup_logs_applies_retention(dirs, clock):
    one = len(batch())
    config = LogConfig.defaults().with_overrides(
        {"segment.bytes": one, "retention.ms": HOUR, "file.delete.delay.ms": 0})
    lm = manager(dirs, clock, default_config=config)
    for p in range(3):
        log = lm.get_or_create_log(TopicPartition("t", p))
        for _ in range(3):
            log.append_as_leader(batch(), leader_epoch=0)
        log.update_high_watermark(3)
    clock.advance(HOUR + 1)
    assert lm.cleanup_logs() == 9
    assert all(log.log_start_offset == 3 for log in lm.all_logs())
    lm.shutdown()


def test_flush_dirty_logs_follows_the_flush_policy(dirs, clock):
    config = LogConfig.defaults().with_overrides({"flush.ms": 1000})
    lm = manager(dirs, clock, default_config=config)
    log = lm.get_or_create_log(TopicPartition("t", 0))
    log.append_as_leader(batch(2), leader_epoch=0)
    assert lm.flush_dirty_logs() == 0
    clock.advance(1000)
    assert lm.flush_dirty_logs() == 1
    assert log.recovery_point == 2
    lm.shutdown()


def test_update_topic_config_reaches_every_partition(dirs, clock):
    lm = manager(dirs, clock)
    logs = [lm.get_or_create_log(TopicPartition("t", p)) for p in range(3)]
    other = lm.get_or_create_log(TopicPartition("u", 0))
    new = LogConfig.defaults().with_overrides({"retention.ms": 5})
    lm.update_topic_config("t", new)
    assert all(log.config.retention_ms == 5 for log in logs)
    assert other.config.retention_ms != 5
    assert lm.get_or_create_log(TopicPartition("t", 9)).config.retention_ms == 5
    lm.shutdown()


def test_topic_configs_given_at_startup_apply_to_loaded_logs(dirs, clock):
    lm = manager(dirs, clock)
    lm.get_or_create_log(TopicPartition("t", 0))
    lm.shutdown()
    lm = LogManager(dirs, default_config=LogConfig.defaults(), clock=clock)
    lm.startup({"t": LogConfig.defaults().with_overrides({"segment.bytes": 12345})})
    assert lm.get_log(TopicPartition("t", 0)).config.segment_bytes == 12345
    lm.shutdown()


def test_loading_shows_progress_on_a_terminal(dirs, clock, monkeypatch):
    import sys

    import logbroker.storage.log_manager as log_manager

    lm = manager(dirs, clock)
    fill(lm, 5)
    lm.shutdown()
    monkeypatch.setattr(log_manager, "_PROGRESS_MIN_PARTITIONS", 1)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    lm = manager(dirs, clock)
    assert len(lm.all_logs()) == 5
    lm.shutdown()


def test_malformed_recovery_checkpoint_recovers_the_dir_even_after_a_clean_shutdown(dirs, clock, caplog):
    lm = manager(dirs[:1], clock)
    lm.get_or_create_log(TopicPartition("t", 0)).append_as_leader(batch(2), leader_epoch=0)
    lm.shutdown()
    assert (dirs[0] / CLEAN_SHUTDOWN_FILE).exists()
    (dirs[0] / "recovery-point-offset-checkpoint").write_text("0\n2\nevil\n 0 5\nt 0 2\n")
    with caplog.at_level("WARNING"):
        lm = manager(dirs[:1], clock)
    assert not lm.had_clean_shutdown(dirs[0])
    warnings = [r.getMessage() for r in caplog.records if "recovery-point-offset-checkpoint" in r.getMessage()]
    assert len(warnings) == 1 and "recovering every log" in warnings[0] and "'evil'" in warnings[0]
    assert lm.get_log(TopicPartition("t", 0)).log_end_offset == 2
    lm.shutdown()


def test_deleting_many_logs_rewrites_each_checkpoint_once(dirs, clock, monkeypatch):
    lm = manager(dirs[:1], clock)
    tps = [TopicPartition("many", p) for p in range(50)]
    for tp in tps:
        lm.get_or_create_log(tp).append_as_leader(batch(1), leader_epoch=0)
    writes = []
    original = OffsetCheckpointFile.write
    monkeypatch.setattr(OffsetCheckpointFile, "write", lambda self, *a, **k: (writes.append(self.path.name), original(self, *a, **k)))
    removed = lm.delete_logs(tps)
    assert set(removed) == set(tps) and lm.get_log(tps[0]) is None
    assert sorted(writes) == sorted(["recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
                                     "replication-offset-checkpoint"])
    assert OffsetCheckpointFile(dirs[0] / "recovery-point-offset-checkpoint").read() == {}
    lm.shutdown()


def test_a_future_log_copied_from_the_current_one_replaces_it(dirs, clock):
    lm = manager(dirs, clock)
    tp = TopicPartition("moving", 0)
    current = lm.get_or_create_log(tp, topic_id=uuid.UUID(int=9))
    for _ in range(5):
        current.append_as_leader(batch(3), leader_epoch=2)
    current.update_high_watermark(12)
    current.maybe_assign_epoch_start_offset(3, 15)  # a new leader that has not written yet
    target = next(d for d in lm.log_dirs if d != current.dir.parent)
    future = lm.create_future_log(tp, target)
    assert future.dir.parent == target and future.dir.name.startswith("moving-0.")
    assert future.dir.name.endswith("-future") and len(future.dir.name) == len("moving-0.") + 32 + len("-future")
    assert lm.future_logs_by_dir() == {target: [future]} and lm.all_logs() == [current]
    region = current.read(0, max_bytes=1 << 20).region
    future.append_as_follower(os.pread(region.fd, region.size, region.position))
    moved = lm.replace_current_with_future(tp)
    assert lm.get_log(tp) is moved and lm.get_future_log(tp) is None
    assert moved.dir == target / "moving-0" and moved.topic_id == uuid.UUID(int=9)
    assert (moved.log_start_offset, moved.log_end_offset, moved.high_watermark) == (0, 15, 12)
    assert moved.end_offset_for_epoch(2) == (2, 15) and moved.latest_epoch == 3
    assert [p.name.endswith("-delete") for p in current.dir.parent.iterdir() if p.name.startswith("moving")] == [True]
    assert tp in OffsetCheckpointFile(target / "replication-offset-checkpoint").read()
    lm.shutdown()
    again = manager(dirs, clock)
    assert again.get_log(tp).dir == target / "moving-0" and again.get_log(tp).log_end_offset == 15
    again.shutdown()


def test_a_log_asked_for_in_a_dir_before_it_exists_is_created_there(dirs, clock):
    lm = manager(dirs, clock)
    lm.get_or_create_log(TopicPartition("other", 0))  # so the least-used dir is dirs[1]
    wanted = lm.log_dir_of(dirs[0])
    assert wanted == dirs[0].absolute() and lm.log_dir_of("/elsewhere") is None
    lm.prefer_log_dir(TopicPartition("placed", 0), wanted)
    assert lm.get_or_create_log(TopicPartition("placed", 0)).dir.parent == wanted
    lm.shutdown()


def test_an_io_error_in_a_checkpoint_takes_only_that_dir_offline(dirs, clock):
    lm = manager(dirs, clock)
    failed_calls = []
    lm.on_dir_failure = lambda d, tps: failed_calls.append((d, sorted(tps)))
    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    la, lb = lm.get_or_create_log(a), lm.get_or_create_log(b)
    assert la.dir.parent != lb.dir.parent
    broken = la.dir.parent
    os.rename(broken, f"{broken}.gone")
    broken.write_text("")  # the dir is a file now: the next write in it fails with ENOTDIR
    lm.checkpoint_high_watermarks()  # the other dir's checkpoint is still written
    assert failed_calls == [(broken, [a])]
    assert lm.offline_dirs.keys() == {broken} and lm.is_offline(a) and not lm.is_offline(b)
    assert lm.get_log(a) is None and lm.all_logs() == [lb]
    assert b in OffsetCheckpointFile(lb.dir.parent / "replication-offset-checkpoint").read()
    with pytest.raises(KafkaStorageError):
        lm.get_or_create_log(a)
    assert lm.get_or_create_log(TopicPartition("t", 2)).dir.parent == lb.dir.parent
    lm.checkpoint_recovery_points()
    assert len(failed_calls) == 1  # told once
    lm.shutdown()


def test_a_full_disk_is_not_a_failed_dir():
    full = KafkaStorageError("no room")
    full.__cause__ = OSError(errno.ENOSPC, "No space left on device")
    broken = KafkaStorageError("broken")
    broken.__cause__ = OSError(errno.EIO, "Input/output error")
    assert not is_dir_failure(full) and is_dir_failure(broken)
    assert not is_dir_failure(KafkaStorageError("no OSError at all"))
