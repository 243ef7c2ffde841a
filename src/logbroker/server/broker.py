"""The broker: startup and shutdown order, and the periodic tasks of a running node.

Startup: log dirs and meta.properties → metadata store → LogManager (loads and recovers every
partition) → ReplicaManager → controller elects leaders → listeners. Shutdown is the reverse:
listeners close first so no request arrives at a closing log, then LogManager writes its
checkpoints and `.kafka_cleanshutdown`, so the next start skips recovery.
"""

from __future__ import annotations

import asyncio
import uuid
import logging
import signal
from dataclasses import dataclass
from pathlib import Path

from logbroker.clock import Clock, SystemClock
from logbroker.coordinator.group_coordinator import GroupCoordinator
from logbroker.coordinator.producer_ids import ProducerIdManager
from logbroker.metadata.controller import Controller
from logbroker.metadata.local_store import LocalMetadataStore
from logbroker.metadata.model import BrokerInfo, PartitionState, TopicInfo, new_topic_id
from logbroker.replication.replica_manager import ReplicaManager
from logbroker.server.config import KafkaConfig
from logbroker.server.dispatch import Dispatcher
from logbroker.server.network import KafkaServer
from logbroker.storage.log_config import LogConfig
from logbroker.storage.log_manager import LogManager
from logbroker.types import TopicPartition

log = logging.getLogger("kafka.server.KafkaServer")


@dataclass(frozen=True, slots=True)
class Listener:
    name: str
    host: str
    port: int


class Broker:
    def __init__(self, config: KafkaConfig, *, clock: Clock | None = None) -> None:
        self.config = config
        self.clock = clock or SystemClock()
        self.broker_id = config.broker_id
        self.log_dirs = [Path(d) for d in config.log_dirs]
        self.store: LocalMetadataStore | None = None
        self.log_manager: LogManager | None = None
        self.replica_manager: ReplicaManager | None = None
        self.controller: Controller | None = None
        self.producer_ids: ProducerIdManager | None = None
        self.group_coordinator: GroupCoordinator | None = None
        self.server: KafkaServer | None = None
        self.metrics = None  # server.metrics.MetricsServer when metrics.port is set
        self.listeners: list[Listener] = []
        self.default_log_config: LogConfig = config.default_log_config()
        self._tasks: list[asyncio.Task] = []
        self._stopped = asyncio.Event()

    # -- what the APIs read -----------------------------------------------------------------
    @property
    def cluster_id(self) -> str:
        return self.store.cluster_id

    def brokers(self) -> list[BrokerInfo]:
        listener = self.advertised_listener()
        return [BrokerInfo(self.broker_id, listener.host, listener.port, self.config.broker_rack)]

    def advertised_listener(self) -> Listener:
        advertised = self.config.advertised_listeners or []
        if advertised:
            name, host, port = advertised[0]
            bound = self.listeners[0].port if self.listeners else port
            return Listener(name, host or "localhost", port or bound)
        return self.listeners[0]

    def topic_log_config(self, topic: TopicInfo | str) -> LogConfig:
        info = self.store.topic(topic) if isinstance(topic, str) else topic
        return self.default_log_config.with_overrides(info.configs if info else {})

    # -- lifecycle --------------------------------------------------------------------------
    async def start(self) -> None:
        first_dir = self.log_dirs[0]
        first_dir.mkdir(parents=True, exist_ok=True)
        self.store = LocalMetadataStore(first_dir)
        self.log_manager = LogManager(self.log_dirs, default_config=self.default_log_config,
                                      clock=self.clock, broker_id=self.broker_id,
                                      cluster_id=self.store.cluster_id)
        self.log_manager.startup({name: self.topic_log_config(info) for name, info in self.store.topics().items()})
        self.replica_manager = ReplicaManager(broker_id=self.broker_id, log_manager=self.log_manager,
                                              clock=self.clock)
        self.controller = Controller(self.store, live_brokers=[self.broker_id])
        self._adopt_orphan_logs()
        self.apply_partition_states(self.controller.elect_all())
        self.producer_ids = ProducerIdManager(self.store)
        self.group_coordinator = GroupCoordinator(broker_id=self.broker_id, config=self.config, replica_manager=self.replica_manager, store=self.store, create_topic=self.create_topic, clock=self.clock)
        self.group_coordinator.load()
        self.server = KafkaServer(Dispatcher(self), max_request_bytes=self.config.socket_request_max_bytes,
                                  connections_max_idle_ms=self.config.connections_max_idle_ms,
                                  clock_ms=self.clock.monotonic_ms)
        if self.config.metrics_port is not None:
            from logbroker.server.metrics import start_metrics
            self.metrics = await start_metrics(self)
        for name, host, port in self.config.listeners:
            bound = await self.server.listen(host, port)
            self.listeners.append(Listener(name, host or "0.0.0.0", bound))
        self._start_periodic_tasks()

    # -- topic admin (the controller writes, this broker applies) ---------------------------
    def create_topic(self, name: str, *, num_partitions: int, replication_factor: int,
                     configs: dict[str, str], assignment: dict[int, tuple[int, ...]] | None = None,
                     validate_only: bool = False) -> TopicInfo:
        if num_partitions == -1:
            num_partitions = self.config.num_partitions
        if replication_factor == -1:
            replication_factor = self.config.default_replication_factor
        info = self.controller.create_topic(name, num_partitions=num_partitions,
                                            replication_factor=replication_factor, configs=configs,
                                            assignment=assignment, validate_only=validate_only)
        if not validate_only:
            self._apply_topic_states(name, info.assignment)
            log.info("Created topic %s with %d partition(s)", name, info.num_partitions)
        return info

    def delete_topic(self, name: str) -> None:
        info = self.controller.delete_topic(name)
        for partition in info.assignment:
            self.replica_manager.stop_replica(TopicPartition(name, partition), delete=True)
        log.info("Deleted topic %s", name)

    def create_partitions(self, name: str, count: int, *, assignment=None, validate_only: bool = False) -> None:
        added = self.controller.create_partitions(name, count, assignment=assignment, validate_only=validate_only)
        if not validate_only:
            self._apply_topic_states(name, added)

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        """Replace a topic's config overrides (validated first) and apply them to its logs."""
        config = self.default_log_config.with_overrides(configs)
        self.store.set_topic_configs(name, configs)
        self.log_manager.update_topic_config(name, config)

    def _apply_topic_states(self, name: str, assignment: dict[int, tuple[int, ...]]) -> None:
        states = {}
        for partition in assignment:
            tp = TopicPartition(name, partition)
            state = self.store.partition_state(tp)
            if state is not None:
                states[tp] = state
        self.apply_partition_states(states)

    def apply_partition_states(self, states: dict[TopicPartition, PartitionState]) -> None:
        """Act on new partition states: lead what this broker leads (followers come with the cluster)."""
        for tp, state in states.items():
            info = self.store.topic(tp.topic)
            if info is None or state.leader != self.broker_id:
                continue
            self.replica_manager.become_leader(tp, state, info.assignment[tp.partition],
                                               config=self.topic_log_config(info), topic_id=info.topic_id)

    def _adopt_orphan_logs(self) -> None:
        """Partition directories with no topic in the store (a Kafka data dir, or a store file
        lost) become topics hosted here, keeping their topic id from partition.metadata."""
        by_topic: dict[str, dict[int, uuid.UUID | None]] = {}
        for log_ in self.log_manager.all_logs():
            tp = log_.topic_partition
            if self.store.topic(tp.topic) is None:
                by_topic.setdefault(tp.topic, {})[tp.partition] = log_.topic_id
        for name, partitions in by_topic.items():
            topic_id = next((t for t in partitions.values() if t), None)
            self.store.create_topic(TopicInfo(name, topic_id or new_topic_id(),
                                              {p: (self.broker_id,) for p in sorted(partitions)}, {}))
            log.info("Adopted topic %s with %d partition(s) found in the log dirs", name, len(partitions))

    def _start_periodic_tasks(self) -> None:
        c = self.config
        lm = self.log_manager
        self._every(c.log_retention_check_interval_ms, lambda: lm.cleanup_logs(self.clock.time_ms()), "retention")
        self._every(c.log_flush_scheduler_interval_ms, lambda: lm.flush_dirty_logs(self.clock.time_ms()), "flush")
        self._every(c.log_flush_offset_checkpoint_interval_ms, lm.checkpoint_recovery_points, "recovery-point checkpoint")
        self._every(c.log_flush_start_offset_checkpoint_interval_ms, lm.checkpoint_log_start_offsets, "log-start-offset checkpoint")
        self._every(c.replica_high_watermark_checkpoint_interval_ms, lm.checkpoint_high_watermarks, "high-watermark checkpoint")
        self._every(min(c.connections_max_idle_ms, 30_000), self.server.close_idle_connections, "idle connections", in_thread=False)
        if c.log_cleaner_enable: self._every(c.log_cleaner_backoff_ms, lambda: lm.clean_logs(self.clock.time_ms(), dedupe_buffer_size=c.log_cleaner_dedupe_buffer_size), "log cleaner")

    def _every(self, interval_ms: int, work, name: str, *, in_thread: bool = True) -> None:
        async def loop() -> None:
            while True:
                await asyncio.sleep(interval_ms / 1000)
                try:
                    if in_thread:
                        await asyncio.get_running_loop().run_in_executor(None, work)
                    else:
                        work()
                except Exception:  # noqa: BLE001 - a failed round is retried next interval
                    log.exception("Periodic task %s failed", name)
        self._tasks.append(asyncio.get_running_loop().create_task(loop(), name=name))

    async def shutdown(self) -> None:
        log.info("Shutting down broker %d", self.broker_id)
        if self.server is not None:
            await self.server.close()
        if self.metrics is not None:
            await self.metrics.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.group_coordinator is not None:
            self.group_coordinator.shutdown()
        if self.log_manager is not None:
            self.log_manager.shutdown()
        self._stopped.set()
        log.info("Broker %d shut down cleanly", self.broker_id)

    async def serve_until_signalled(self) -> None:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        await self.shutdown()
