"""What each log dir of this broker holds and how full it is: DescribeLogDirs' answer.

Sizes are the bytes of every segment's `.log` file (Kafka's `UnifiedLog.size`), total and usable
bytes the file system's (`os.statvfs`: all blocks, and the blocks an unprivileged writer may
still use). Cheap: no disk reads beyond one statvfs per dir, so it runs on the event loop.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from logbroker.errors import KafkaStorageError
from logbroker.types import TopicPartition


@dataclass(frozen=True, slots=True)
class ReplicaInfo:
    """One replica in a log dir. `offset_lag >= 0`; a future replica trails the current one."""

    topic_partition: TopicPartition
    size_bytes: int
    offset_lag: int
    is_future: bool


@dataclass(frozen=True, slots=True)
class LogDirInfo:
    """One log dir. With an error code, no replicas and -1 bytes."""

    path: Path
    error_code: int
    replicas: tuple[ReplicaInfo, ...]
    total_bytes: int
    usable_bytes: int


def online_dir_stat(manager, path: Path) -> os.statvfs_result:
    """The file system figures of a log dir; KafkaStorageError when it failed (an I/O error took
    it offline) or cannot be read now (unmounted, removed)."""
    why = manager.offline_dirs.get(path)
    if why is None:
        try:
            return os.statvfs(path)
        except OSError as e:
            why = str(e)
    raise KafkaStorageError(f"Log dir {path} is offline: {why}")


def describe_log_dirs(broker, wanted: Mapping[str, set[int]] | None) -> list[LogDirInfo]:
    """Every configured log dir of `broker`, with the replicas `wanted` names (topic → partition
    indexes; None: all of them). Must run on the event loop (reads the partition map)."""
    manager = broker.log_manager
    partitions = broker.replica_manager.partitions
    current = manager.logs_by_dir()
    future = manager.future_logs_by_dir()

    def asked(tp: TopicPartition) -> bool:
        return wanted is None or tp.partition in wanted.get(tp.topic, ())

    infos = []
    for path in manager.log_dirs:
        try:
            stat = online_dir_stat(manager, path)
        except KafkaStorageError:
            infos.append(LogDirInfo(path=path, error_code=KafkaStorageError.code, replicas=(),
                                    total_bytes=-1, usable_bytes=-1))
            continue
        replicas = []
        for lg in current.get(path, []):
            tp = lg.topic_partition
            if asked(tp):
                partition = partitions.get(tp)
                hw = partition.high_watermark if partition is not None else lg.high_watermark
                replicas.append(ReplicaInfo(tp, lg.size_in_bytes, max(hw - lg.log_end_offset, 0), False))
        for lg in future.get(path, []):
            tp = lg.topic_partition
            source = manager.get_log(tp)
            if asked(tp) and source is not None:
                replicas.append(ReplicaInfo(tp, lg.size_in_bytes,
                                            max(source.log_end_offset - lg.log_end_offset, 0), True))
        replicas.sort(key=lambda r: (r.topic_partition.topic, r.topic_partition.partition, r.is_future))
        infos.append(LogDirInfo(path=path, error_code=0, replicas=tuple(replicas),
                                total_bytes=stat.f_blocks * stat.f_frsize,
                                usable_bytes=stat.f_bavail * stat.f_frsize))
    return infos
