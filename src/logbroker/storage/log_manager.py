"""Every partition log of one broker, over its log directories (Kafka's LogManager).

Each log dir holds partition directories `<topic>-<n>/` plus, at its top level, `meta.properties`,
a `.lock` file (held while the broker runs), the checkpoints `recovery-point-offset-checkpoint`,
`log-start-offset-checkpoint` and `replication-offset-checkpoint` (high watermarks), and, after a
clean shutdown, `.kafka_cleanshutdown`.

Startup: check every dir (created if missing; a dir that cannot be created or written is a
KafkaStorageError naming it and what to do), lock it, check or write meta.properties, note and
delete the clean-shutdown marker (so that a crash during loading counts as unclean, KAFKA-10471),
then load every partition directory with the checkpointed recovery point, log start offset and
high watermark: with the marker, no recovery; without it, recovery from each recovery point.
Directories of deleted partitions (`…-delete`) are removed; other entries are skipped.

A failing log dir. As Kafka (LogDirFailureChannel), an I/O error in a log dir — a checkpoint,
an append or a roll failing for any reason but a full disk — takes the whole dir offline until
the broker restarts: its logs are dropped from the partition map (their partitions answer
KAFKA_STORAGE_ERROR here, `offline_partitions`), its checkpoints are no longer written, new logs
go to the other dirs, and `on_dir_failure(dir, partitions)` tells the server, which on a cluster
has the controller move those partitions' leadership to other brokers. The other dirs keep
serving.

A full log dir stays online instead and each write fails on its own, because a full disk goes
away when room is made (and a single node has nowhere to move leadership to):

- an append that does not fit fails whole with KAFKA_STORAGE_ERROR (nothing half-written is
  counted: index room is reserved before the batch is written, see abstract_index.py); reads go on;
- a partition whose log cannot be created is left unhosted and retried every few seconds by the
  broker (FindCoordinator answers COORDINATOR_NOT_AVAILABLE meanwhile);
- the checkpoints keep their previous content (they are replaced atomically) and are retried each
  interval, logged once when they start failing and once when they work again;
- once there is room, everything resumes without a restart; nothing acknowledged is lost.

Everything here is synchronous and blocks on disk. The server runs `startup`, `flush_dirty_logs`,
`cleanup_logs`, the checkpoints and `shutdown` in a worker thread; `get_log` is cheap and fine on
the event loop; `get_or_create_log` and `delete_log` touch the disk briefly. An internal lock
makes the partition map safe to use from both.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path

from logbroker.clock import Clock
from logbroker.errors import InconsistentClusterIdError, KafkaError, KafkaStorageError
from logbroker.log_limits import RateLimitedLog
from logbroker.storage.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT_FILE,
    META_PROPERTIES_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE,
    REPLICATION_OFFSET_CHECKPOINT_FILE,
    BrokerMetadata,
    OffsetCheckpointFile,
    delete_clean_shutdown_file,
    has_clean_shutdown_file,
    random_kafka_uuid,
    remove_tree,
    uuid_to_kafka_str,
    write_clean_shutdown_file,
)
from logbroker.storage.cleaner_manager import LogCleaner
from logbroker.storage.future_logs import FUTURE_DIR_SUFFIX, FutureLogs
from logbroker.storage.log import Log
from logbroker.storage.log_config import LogConfig
from logbroker.types import TopicPartition

log = logging.getLogger("kafka.log.LogManager")
_limited = RateLimitedLog(log, burst=5, interval_s=60.0)

LOCK_FILE = ".lock"
DELETE_DIR_SUFFIX = "-delete"
STRAY_DIR_SUFFIX = "-stray"
_PROGRESS_AFTER_S = 1.0
_PROGRESS_MIN_PARTITIONS = 200


def is_dir_failure(error: BaseException) -> bool:
    """Whether `error` (or what caused it) is an I/O error that takes a log dir offline: any
    OSError but a full disk or quota (ENOSPC, EDQUOT), which the dir outlives."""
    seen = error
    while seen is not None and not isinstance(seen, OSError):
        seen = seen.__cause__ or seen.__context__
    return isinstance(seen, OSError) and seen.errno not in (errno.ENOSPC, errno.EDQUOT)


def delete_dir_name(tp: TopicPartition) -> str:
    """`<topic>-<n>.<uuid hex>-delete`, the topic cut so the name fits 255 bytes (Kafka's)."""
    suffix = f"-{tp.partition}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
    return tp.topic[:max(0, 255 - len(suffix))] + suffix


class LogManager(FutureLogs):
    """The logs of this broker. Build it, call `startup`, and `shutdown` at the end.

    Invariant: a partition has at most one log, in exactly one log dir.
    """

    def __init__(self, log_dirs: list[Path], *, default_config: LogConfig, clock: Clock,
                 broker_id: int = 0, cluster_id: str | None = None,
                 topic_configs: Mapping[str, LogConfig] | None = None,
                 producer_id_expiration_ms: int = 86_400_000) -> None:
        if not log_dirs:
            raise KafkaStorageError("No log directory configured: set log.dirs (or log.dir)")
        self._log_dirs = [Path(d).absolute() for d in log_dirs]
        self._default_config = default_config
        self._clock = clock
        self._broker_id = broker_id
        self._cluster_id = cluster_id
        self._topic_configs: dict[str, LogConfig] = dict(topic_configs or {})
        self._producer_id_expiration_ms = producer_id_expiration_ms
        self._logs: dict[TopicPartition, Log] = {}
        self._logs_to_delete: list[tuple[int, Log]] = []
        self._future_logs: dict[TopicPartition, Log] = {}
        self._preferred_dirs: dict[TopicPartition, Path] = {}
        self._lock = threading.RLock()
        self._recovery_point_file_lock = threading.Lock()  # its writers run in several threads
        self._dir_locks: dict[Path, int] = {}
        self._had_clean_shutdown: dict[Path, bool] = {}
        self._started = False
        self._cleaner = None  # cleaner_manager.LogCleaner, made by the first clean_logs
        self._offline_dirs: dict[Path, str] = {}  # a failed dir → the error that took it offline
        self._offline_partitions: set[TopicPartition] = set()
        # Called as on_dir_failure(dir, partitions) once per failed dir, on the failing thread.
        self.on_dir_failure: Callable[[Path, list[TopicPartition]], None] | None = None

    # --- properties ------------------------------------------------------------------------

    @property
    def log_dirs(self) -> list[Path]:
        return list(self._log_dirs)

    @property
    def cluster_id(self) -> str | None:
        """The cluster id given, or found in meta.properties, or generated on first start."""
        return self._cluster_id

    @property
    def broker_id(self) -> int:
        return self._broker_id

    def had_clean_shutdown(self, log_dir: Path) -> bool:
        return self._had_clean_shutdown.get(Path(log_dir).absolute(), False)

    def config_for(self, topic: str) -> LogConfig:
        return self._topic_configs.get(topic, self._default_config)

    # --- startup ---------------------------------------------------------------------------

    def startup(self, topic_configs: Mapping[str, LogConfig] | None = None) -> None:
        """Check and lock the log dirs, check meta.properties and load every partition.

        `topic_configs` are the topics' effective configs (others get the default). Raises
        KafkaStorageError for an unusable log dir, a directory locked by another broker, a
        meta.properties of another broker, or a partition found in two log dirs. Blocks.
        """
        if topic_configs:
            self._topic_configs.update(topic_configs)
        try:
            self._startup()
        except BaseException:
            with self._lock:
                for lg in self._logs.values():
                    lg.close_handles()
                self._logs.clear()
            self._unlock_dirs()
            raise
        self._started = True

    def _startup(self) -> None:
        started = time.monotonic()
        self._check_log_dirs()
        for log_dir in self._log_dirs:
            self._lock_dir(log_dir)
        self._check_broker_metadata()
        work: list[tuple[Path, Path]] = []
        for log_dir in self._log_dirs:
            clean = has_clean_shutdown_file(log_dir)
            self._had_clean_shutdown[log_dir] = clean
            delete_clean_shutdown_file(log_dir)
            for entry in sorted(os.scandir(log_dir), key=lambda e: e.name):
                if not entry.is_dir():
                    continue
                path = Path(entry.path)
                if entry.name.endswith(DELETE_DIR_SUFFIX):
                    log.info("Removing %s, a partition deleted before the last shutdown", path)
                    remove_tree(path)
                elif entry.name.endswith(FUTURE_DIR_SUFFIX):
                    # A move cut short by the shutdown: the current replica is whole, the copy
                    # is dropped and AlterReplicaLogDirs starts it again.
                    log.warning("Removing %s, a replica move to this dir interrupted by the "
                                "last shutdown", path)
                    remove_tree(path)
                elif entry.name.endswith(STRAY_DIR_SUFFIX):
                    log.warning("Skipping %s: stray replicas are not supported", path)
                else:
                    try:
                        TopicPartition.from_dir_name(entry.name)
                    except ValueError:
                        log.debug("Skipping %s: not a partition directory", path)
                        continue
                    work.append((log_dir, path))
        self._load_logs(work, started)

    def _check_log_dirs(self) -> None:
        seen: dict[Path, Path] = {}
        for log_dir in self._log_dirs:
            try:
                log_dir.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise KafkaStorageError(
                    f"Log directory {log_dir} does not exist and could not be created ({e.strerror}). "
                    f"Create it with write access for this user, or fix log.dirs") from e
            if not log_dir.is_dir():
                raise KafkaStorageError(f"Log directory {log_dir} is not a directory; fix log.dirs")
            real = log_dir.resolve()
            if real in seen:
                raise KafkaStorageError(f"Duplicate log directory found: {seen[real]} and {log_dir} "
                                        f"are the same directory; list it once in log.dirs")
            seen[real] = log_dir
            probe = log_dir / f".logbroker-write-test-{os.getpid()}"
            try:
                probe.write_bytes(b"")
                probe.unlink()
            except OSError as e:
                raise KafkaStorageError(
                    f"Log directory {log_dir} is not writable ({e.strerror}). Give this user write "
                    f"access to it, or fix log.dirs") from e

    def _lock_dir(self, log_dir: Path) -> None:
        path = log_dir / LOCK_FILE
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EACCES):
                raise KafkaStorageError(
                    f"Failed to acquire lock on file {LOCK_FILE} in {log_dir}. A Kafka instance in "
                    f"another process or thread is using this directory") from e
            raise KafkaStorageError(f"Failed to lock {path}: {e}") from e
        self._dir_locks[log_dir] = fd

    def _unlock_dirs(self) -> None:
        for fd in self._dir_locks.values():
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)
        self._dir_locks.clear()

    def _check_broker_metadata(self) -> None:
        found: dict[Path, BrokerMetadata] = {}
        for log_dir in self._log_dirs:
            metadata = BrokerMetadata.read(log_dir / META_PROPERTIES_FILE)
            if metadata is not None:
                found[log_dir] = metadata
        for log_dir, metadata in found.items():
            if metadata.broker_id != self._broker_id:
                raise KafkaStorageError(
                    f"Configured broker.id {self._broker_id} doesn't match stored broker.id "
                    f"{metadata.broker_id} in {log_dir / META_PROPERTIES_FILE}. If you moved your "
                    f"data, make sure your configured broker.id matches. If you intend to create a "
                    f"new broker, you should remove all data in your data directories (log.dirs)")
        cluster_ids = {m.cluster_id for m in found.values() if m.cluster_id is not None}
        if len(cluster_ids) > 1:
            raise KafkaStorageError(
                "meta.properties is not consistent across log.dirs (cluster ids "
                f"{sorted(cluster_ids)} in {sorted(str(d) for d in found)}). This could happen if "
                "multiple brokers shared a log directory or data was copied from another broker")
        stored = next(iter(cluster_ids), None)
        if self._cluster_id is not None and stored is not None and stored != self._cluster_id:
            raise InconsistentClusterIdError(
                f"The Cluster ID {self._cluster_id} doesn't match stored clusterId {stored} in "
                f"meta.properties. The broker is trying to join the wrong cluster. Configured "
                f"zookeeper.connect may be wrong")
        if self._cluster_id is None:
            self._cluster_id = stored or uuid_to_kafka_str(random_kafka_uuid())
        wanted = BrokerMetadata(broker_id=self._broker_id, cluster_id=self._cluster_id)
        for log_dir in self._log_dirs:
            current = found.get(log_dir)
            if current is None or current.cluster_id != self._cluster_id:
                wanted.write(log_dir / META_PROPERTIES_FILE)

    def _read_checkpoint(self, log_dir: Path, name: str, consequence: str) -> dict[TopicPartition, int] | None:
        """The checkpoint's entries, or None (with one WARN naming the file, the bad line and
        `consequence`) if it is malformed. Like Kafka, a malformed file is not half-read: a line
        that does not parse may have split another partition's entry."""
        try:
            return OffsetCheckpointFile(log_dir / name).read()
        except KafkaStorageError as e:
            log.warning("Error reading %s: %s; %s", log_dir / name, e, consequence)
            return None

    def _load_logs(self, work: list[tuple[Path, Path]], started: float) -> None:
        # A malformed checkpoint is never half-trusted. Recovery points: recover every log of the
        # dir from its start, as after an unclean shutdown (slow but safe). Log start offsets:
        # the first segment's base offset (as Kafka). High watermarks: start again from the log
        # start and rise as the ISR catches up (a high watermark only ever moves up).
        checkpoints = {}
        for log_dir in self._log_dirs:
            recovery_points = self._read_checkpoint(
                log_dir, RECOVERY_POINT_CHECKPOINT_FILE,
                "recovering every log in this directory from its first segment")
            if recovery_points is None:
                self._had_clean_shutdown[log_dir] = False
            checkpoints[log_dir] = (
                recovery_points or {},
                self._read_checkpoint(log_dir, LOG_START_OFFSET_CHECKPOINT_FILE,
                                      "log start offsets reset to the first segments") or {},
                self._read_checkpoint(log_dir, REPLICATION_OFFSET_CHECKPOINT_FILE,
                                      "high watermarks restart from the log start offsets") or {})
        progress = task = None
        show_progress = sys.stderr is not None and sys.stderr.isatty()
        recovered = 0
        try:
            for done, (log_dir, path) in enumerate(work):
                if (show_progress and progress is None
                        and (len(work) >= _PROGRESS_MIN_PARTITIONS
                             or time.monotonic() - started > _PROGRESS_AFTER_S)):
                    progress, task = self._start_progress(len(work), done)
                tp = TopicPartition.from_dir_name(path.name)
                recovery_points, log_starts, high_watermarks = checkpoints[log_dir]
                clean = self._had_clean_shutdown[log_dir]
                try:
                    loaded = Log.open(path, self.config_for(tp.topic), clock=self._clock,
                                      recovery_point=recovery_points.get(tp, 0),
                                      log_start_offset=log_starts.get(tp, 0),
                                      high_watermark=high_watermarks.get(tp),
                                      had_clean_shutdown=clean,
                                      producer_id_expiration_ms=self._producer_id_expiration_ms)
                except (KafkaError, OSError, ValueError) as e:
                    raise KafkaStorageError(f"Failed to load the log in {path}: {e}") from e
                if not clean:
                    recovered += 1
                with self._lock:
                    if tp in self._logs:
                        other = self._logs[tp].dir
                        loaded.close_handles()
                        raise KafkaStorageError(
                            f"Duplicate log directories for {tp} are found in both {other} and "
                            f"{path}. Recover the broker by deleting one of the two directories")
                    self._logs[tp] = loaded
                if progress is not None:
                    progress.update(task, completed=done + 1)
        finally:
            if progress is not None:
                progress.stop()
        elapsed_ms = int((time.monotonic() - started) * 1000)
        log.info("Loaded %d partition(s) from %d log dir(s) in %d ms (%d after an unclean shutdown)",
                 len(work), len(self._log_dirs), elapsed_ms, recovered)

    @staticmethod
    def _start_progress(total: int, done: int):
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        progress = Progress(TextColumn("Loading logs"), BarColumn(), MofNCompleteColumn(),
                            TimeElapsedColumn(), console=Console(file=sys.stderr), transient=True)
        progress.start()
        task = progress.add_task("logs", total=total, completed=done)
        return progress, task

    # --- the partition map -----------------------------------------------------------------

    def get_log(self, tp: TopicPartition) -> Log | None:
        return self._logs.get(tp)

    def all_logs(self) -> list[Log]:
        with self._lock:
            return list(self._logs.values())

    def logs_by_dir(self) -> dict[Path, list[Log]]:
        """The logs of each online log dir (every one present, maybe with no logs)."""
        grouped: dict[Path, list[Log]] = {d: [] for d in self._log_dirs if d not in self._offline_dirs}
        for lg in self.all_logs():
            grouped.setdefault(lg.dir.parent, []).append(lg)
        return grouped

    def get_or_create_log(self, tp: TopicPartition, config: LogConfig | None = None,
                          topic_id: uuid.UUID | None = None) -> Log:
        """The partition's log, created (with partition.metadata when `topic_id` is given) in
        the log dir holding the fewest partitions if it has none. An existing log without a
        topic id takes `topic_id`; one with another raises InconsistentTopicIdError."""
        with self._lock:
            existing = self._logs.get(tp)
            if existing is not None:
                if topic_id is not None:
                    existing.assign_topic_id(topic_id)
                return existing
            if tp in self._offline_partitions:
                raise KafkaStorageError(f"The log of {tp} is in an offline log dir")
            if config is not None:
                self._topic_configs[tp.topic] = config
            online = [d for d in self._log_dirs if d not in self._offline_dirs]
            if not online:
                raise KafkaStorageError("Every log dir of this broker is offline")
            preferred = self._preferred_dirs.pop(tp, None)
            if preferred in online:
                log_dir = preferred
            elif len(online) == 1:  # (counting is O(partitions): skip it when there is no choice)
                log_dir = online[0]
            else:
                counts = {d: len(logs) for d, logs in self.logs_by_dir().items()}
                log_dir = min(online, key=lambda d: counts.get(d, 0))
            created = Log.open(log_dir / str(tp), config or self.config_for(tp.topic),
                               clock=self._clock, topic_id=topic_id, had_clean_shutdown=True,
                               producer_id_expiration_ms=self._producer_id_expiration_ms,
                               topic_partition=tp)
            self._logs[tp] = created
            log.info("Created log for partition %s in %s", tp, created.dir)
            return created

    def delete_log(self, tp: TopicPartition) -> Log | None:
        """Remove a partition: its directory is renamed `<topic>-<n>.<uuid>-delete` now and
        removed file.delete.delay.ms later (by `cleanup_logs`), so regions being sent stay
        readable; the checkpoints of its log dir are rewritten without it. Returns the log, or
        None if there was none."""
        return self.delete_logs([tp]).get(tp)

    def delete_logs(self, tps) -> dict[TopicPartition, Log]:  # noqa: ANN001 - any iterable
        """`delete_log` for many partitions (a deleted topic), with the checkpoints of each log
        dir rewritten once at the end, as Kafka's asyncDelete: per partition, their fsyncs made
        deleting a topic of a thousand partitions take over a minute on the event loop."""
        removed: dict[TopicPartition, Log] = {}
        try:
            for tp in tps:
                self.abort_future_log(tp)
                with self._lock:
                    lg = self._logs.pop(tp, None)
                if lg is None:
                    continue
                try:
                    lg.rename_dir_for_deletion(delete_dir_name(tp))
                except OSError as e:
                    raise KafkaStorageError(f"Failed to rename the log dir of {tp} for deletion: {e}") from e
                due_ms = self._clock.time_ms() + lg.config.file_delete_delay_ms
                with self._lock:
                    self._logs_to_delete.append((due_ms, lg))
                removed[tp] = lg
                log.info("Deleted log for partition %s (directory renamed to %s)", tp, lg.dir.name)
        finally:
            for log_dir in {lg.dir.parent for lg in removed.values()}:  # renamed in place
                self._write_checkpoints_for_dir(log_dir)
            if removed:
                self.delete_pending_logs(self._clock.time_ms())
        return removed

    def delete_pending_logs(self, now_ms: int) -> int:
        """Remove the `…-delete` directories whose delay has passed; returns how many."""
        with self._lock:
            due = [lg for t, lg in self._logs_to_delete if t <= now_ms]
            self._logs_to_delete = [(t, lg) for t, lg in self._logs_to_delete if t > now_ms]
        for lg in due:
            lg.delete()
        return len(due)

    def update_default_config(self, default: LogConfig, topic_configs: dict[str, LogConfig]) -> None:
        """New broker defaults (a dynamic broker config change): `default` for topics not in
        `topic_configs`, and every log the effective config of its topic, in one pass."""
        with self._lock:
            self._default_config = default
            self._topic_configs.update(topic_configs)
            logs = list(self._logs.items())
        for tp, lg in logs:
            lg.update_config(topic_configs.get(tp.topic, default))

    def set_producer_id_expiration_ms(self, expiration_ms: int) -> None:
        """producer.id.expiration.ms changed (a dynamic broker config): for every log, and new ones."""
        with self._lock:
            self._producer_id_expiration_ms = expiration_ms
            logs = list(self._logs.values())
        for lg in logs:
            lg.producer_state.max_producer_id_expiration_ms = expiration_ms

    def update_topic_config(self, topic: str, config: LogConfig) -> None:
        """Give every log of `topic` (and its future partitions) a new effective config."""
        with self._lock:
            self._topic_configs[topic] = config
            logs = [lg for tp, lg in self._logs.items() if tp.topic == topic]
        for lg in logs:
            lg.update_config(config)

    # --- checkpoints -----------------------------------------------------------------------

    def checkpoint_recovery_points(self, log_dir: Path | None = None) -> None:
        """Write recovery-point-offset-checkpoint in every online log dir (or in `log_dir` alone:
        after a recovery checkpoint of one of its logs, log_flush.py). Blocks on disk."""
        with self._recovery_point_file_lock:
            self._checkpoint(RECOVERY_POINT_CHECKPOINT_FILE,
                             lambda logs: {lg.topic_partition: lg.recovery_point for lg in logs},
                             only=log_dir)

    def checkpoint_log_start_offsets(self) -> None:
        """Write log-start-offset-checkpoint in every online log dir: the logs whose start
        offset is past their first segment's base offset (after DeleteRecords), as Kafka."""
        self._checkpoint(LOG_START_OFFSET_CHECKPOINT_FILE,
                         lambda logs: {lg.topic_partition: lg.log_start_offset for lg in logs
                                       if lg.log_start_offset > lg.segments[0].base_offset})

    def checkpoint_high_watermarks(self) -> None:
        """Write replication-offset-checkpoint (high watermarks) in every online log dir."""
        self._checkpoint(REPLICATION_OFFSET_CHECKPOINT_FILE,
                         lambda logs: {lg.topic_partition: lg.high_watermark for lg in logs})

    def _checkpoint(self, name: str, entries, *, only: Path | None = None) -> None:  # noqa: ANN001
        """Write one checkpoint file (`entries`: logs → offsets) in each online dir, or in `only`;
        a dir whose write fails with an I/O error goes offline, a full one raises (the round is
        retried) after the others."""
        full = None
        for log_dir, logs in self.logs_by_dir().items():
            if only is not None and log_dir != only:
                continue
            try:
                OffsetCheckpointFile(log_dir / name).write(entries(logs))
            except KafkaStorageError as e:
                if not self.maybe_fail_dir(log_dir, e):
                    full = e
        if full is not None:
            raise full

    # --- failed log dirs -------------------------------------------------------------------

    @property
    def offline_dirs(self) -> dict[Path, str]:
        """Each offline log dir and the error that took it offline."""
        return dict(self._offline_dirs)

    def is_offline(self, tp: TopicPartition) -> bool:
        return tp in self._offline_partitions

    def maybe_fail_dir(self, log_dir: Path, error: BaseException) -> bool:
        """Take `log_dir` offline if `error` is an I/O error other than a full disk (Kafka's
        LogDirFailureChannel): its logs leave the partition map, their files are closed and
        `on_dir_failure` is told. True if the dir is (now) offline. Any thread."""
        if log_dir in self._offline_dirs:
            return True
        if not is_dir_failure(error):
            return False
        with self._lock:
            if log_dir in self._offline_dirs:
                return True
            self._offline_dirs[log_dir] = str(error)
            failed = [tp for tp, lg in self._logs.items() if lg.dir.parent == log_dir]
            closed = [self._logs.pop(tp) for tp in failed]
            self._offline_partitions.update(failed)
            moving = [tp for tp, lg in self._future_logs.items()
                      if lg.dir.parent == log_dir or tp in self._offline_partitions]
        for lg in closed + [self._future_logs.pop(tp) for tp in moving]:
            try:
                lg.close_handles()
            except OSError:
                pass
        log.error("Stopped serving the %d replica(s) in log dir %s after an I/O error: %s",
                  len(failed), log_dir, error)
        if self.on_dir_failure is not None:
            self.on_dir_failure(log_dir, failed)
        return True

    def _write_checkpoints_for_dir(self, log_dir: Path) -> None:
        logs = self.logs_by_dir().get(log_dir, [])
        with self._recovery_point_file_lock:
            OffsetCheckpointFile(log_dir / RECOVERY_POINT_CHECKPOINT_FILE).write(
                {lg.topic_partition: lg.recovery_point for lg in logs})
        OffsetCheckpointFile(log_dir / LOG_START_OFFSET_CHECKPOINT_FILE).write(
            {lg.topic_partition: lg.log_start_offset for lg in logs
             if lg.log_start_offset > lg.segments[0].base_offset})
        OffsetCheckpointFile(log_dir / REPLICATION_OFFSET_CHECKPOINT_FILE).write(
            {lg.topic_partition: lg.high_watermark for lg in logs})

    # --- background work -------------------------------------------------------------------

    def flush_dirty_logs(self, now_ms: int | None = None) -> int:
        """Flush every log whose flush policy or a roll asks for it (Log.needs_flush); returns
        how many were flushed. Blocking fsyncs: run it in a worker thread."""
        now_ms = self._clock.time_ms() if now_ms is None else now_ms
        flushed = 0
        for lg in self.all_logs():
            try:
                if lg.flush_if_needed(now_ms):
                    flushed += 1
            except KafkaStorageError as e:  # a failing disk: every tick, so rate-limited, one line
                _limited.log(logging.ERROR, "flush", "Error flushing %s: %s", lg.topic_partition, e, exc=e)
        return flushed

    def cleanup_logs(self, now_ms: int | None = None) -> int:
        """Retention over every log (Log.delete_old_segments), expiry of idle producer ids, and
        removal of `.deleted` files and `…-delete` dirs that are due. Returns the number of
        segments deleted. Blocks on disk: run it in a worker thread."""
        now_ms = self._clock.time_ms() if now_ms is None else now_ms
        total = 0
        for lg in self.all_logs():
            try:
                total += lg.delete_old_segments(now_ms)
                lg.remove_expired_producers(now_ms)
            except KafkaStorageError as e:
                _limited.log(logging.ERROR, "retention", "Error applying retention to %s: %s",
                             lg.topic_partition, e, exc=e)
        self.delete_pending_logs(now_ms)
        return total

    def clean_logs(self, now_ms: int | None = None, *,
                   dedupe_buffer_size: int = 134_217_728) -> int:
        """One round of log compaction over the compacted logs (cleaner_manager.py); returns
        how many logs were cleaned. Reads and rewrites segments: run it in a worker thread."""
        now_ms = self._clock.time_ms() if now_ms is None else now_ms
        if self._cleaner is None:
            self._cleaner = LogCleaner(dedupe_buffer_size=dedupe_buffer_size)
        return len(self._cleaner.clean_logs(self.all_logs(), now_ms))

    # --- shutdown --------------------------------------------------------------------------

    def shutdown(self, *, broker_epoch: int = -1) -> None:
        """Flush and close every log, write the checkpoints, then leave `.kafka_cleanshutdown`
        in each log dir whose logs all closed cleanly, and release the dir locks. Blocks."""
        with self._lock:
            pending = [lg for _, lg in self._logs_to_delete]
            self._logs_to_delete = []
        for lg in pending:
            lg.delete()
        for tp in list(self._future_logs):
            self.abort_future_log(tp)
        for log_dir, logs in self.logs_by_dir().items():
            clean = True
            for lg in logs:
                try:
                    lg.flush()
                    lg.close()
                except Exception as e:  # noqa: BLE001 - close the others; no clean-shutdown marker
                    clean = False
                    log.error("Error while closing %s: %r", lg.topic_partition, e)
            try:
                self._write_checkpoints_for_dir(log_dir)
                if clean and self._started:
                    write_clean_shutdown_file(log_dir, broker_epoch=broker_epoch)
            except KafkaStorageError as e:
                log.error("Error writing the checkpoints of %s: %s", log_dir, e)
        with self._lock:
            self._logs.clear()
        self._unlock_dirs()
        self._started = False
