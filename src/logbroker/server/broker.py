"""The broker: startup and shutdown order, and the periodic tasks of a running node.

Startup: log dirs and meta.properties → metadata store → LogManager (loads and recovers every
partition) → ReplicaManager → controller elects leaders → listeners. Shutdown is the reverse —
in a cluster after a controlled shutdown has moved leadership away (server/controlled_shutdown.py):
listeners close first so no request arrives at a closing log, then LogManager writes its
checkpoints and `.kafka_cleanshutdown`, so the next start skips recovery.
"""

from __future__ import annotations

import asyncio
import uuid
import logging
import signal
from collections.abc import Mapping
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from logbroker.client import PLAINTEXT
from logbroker.clock import Clock, SystemClock
from logbroker.coordinator.group_coordinator import GroupCoordinator
from logbroker.coordinator.internal_topics import SHARE_STATE_TOPIC
from logbroker.coordinator.producer_ids import ProducerIdManager
from logbroker.coordinator.transaction_coordinator import TransactionCoordinator
from logbroker.coordinator.transaction_marker_channel import TransactionMarkerChannel
from logbroker.coordinator.transaction_verification import TransactionVerifier
from logbroker.coordinator.transactional_offsets import complete_transactional_offsets
from logbroker.errors import KafkaStorageError
from logbroker.log_limits import RateLimitedLog, StateChangeLog
from logbroker.metadata.controller import Controller
from logbroker.metadata.local_store import LocalMetadataStore
from logbroker.metadata.metadata_cache import MetadataCache
from logbroker.metadata.model import BrokerInfo, PartitionState, TopicInfo, new_topic_id
from logbroker.replication.replica_manager import ReplicaManager
from logbroker.server.replica_log_dir_mover import ReplicaLogDirMover
from logbroker.replication.replica_selector import (
    RACK_AWARE_REPLICA_SELECTOR,
    ClientMetadata,
    preferred_read_replica,
)
from logbroker.server.authorization import create_authorizer
from logbroker.server.config import KafkaConfig
from logbroker.server.connection_quotas import ConnectionQuotas
from logbroker.server.dispatch import Dispatcher
from logbroker.server.dynamic_config import DEFAULT_ENTITY, DynamicBrokerConfig
from logbroker.server.network import KafkaServer
from logbroker.storage.log_config import LogConfig, check_remote_storage
from logbroker.storage.log_manager import LogManager
from logbroker.types import TopicPartition

log = logging.getLogger("kafka.server.KafkaServer")
_storage_log = RateLimitedLog(log, burst=5, interval_s=60.0)


@dataclass(frozen=True, slots=True)
class Listener:
    name: str
    host: str
    port: int


class Broker:
    def __init__(self, config: KafkaConfig, *, clock: Clock | None = None) -> None:
        self.config = config  # the effective config: static, then dynamic layers (server/dynamic_config.py)
        self.dynamic_config = DynamicBrokerConfig(config)
        self.clock = clock or SystemClock()
        self.broker_id = config.broker_id
        self.log_dirs = [Path(d) for d in config.log_dirs]
        # The file store on a single node; with zookeeper.connect, the MetadataCache the ZooKeeper
        # watches feed (self.zk is then the store behind it and self.cluster the membership).
        self.store: LocalMetadataStore | MetadataCache | None = None
        self.zk = None
        self.cluster = None
        self.log_manager: LogManager | None = None
        self.replica_manager: ReplicaManager | None = None
        self.replica_log_dir_mover: ReplicaLogDirMover | None = None
        self.controller: Controller | None = None
        self.producer_ids: ProducerIdManager | None = None
        self.group_coordinator: GroupCoordinator | None = None
        self._share_groups = None  # server.share_groups.ShareGroups, once share groups are used
        self.transaction_coordinator: TransactionCoordinator | None = None
        self.transaction_verifier: TransactionVerifier | None = None
        self.server: KafkaServer | None = None
        self.metrics = None  # server.metrics.MetricsServer when metrics.port is set
        self.schema_registry = None  # schema_registry.server.SchemaRegistryServer when configured
        self.authorizer = None  # security.authorizer.AclAuthorizer when authorizer.class.name is set
        self.user_store = None  # metadata.zk_users.ZkUserScramStore on a cluster
        self.token_store = None  # metadata.zk_delegation_tokens.ZkDelegationTokenStore on a cluster
        self.delegation_tokens = None  # server.delegation_tokens.DelegationTokenManager
        self.client_telemetry = None  # server.client_telemetry.ClientTelemetry (KIP-714)
        # Client quotas: the managers enforcing them, and where their configs live (the file
        # store on a single node, metadata.zk_quotas.ZkClientQuotaStore on a cluster).
        self.client_quotas = None
        self.quota_store = None
        self.inter_broker_security = None  # client.ClientSecurity to reach other brokers, on a cluster
        self.listeners: list[Listener] = []
        self.default_log_config: LogConfig = config.default_log_config()
        self._tasks: list[asyncio.Task] = []
        self._stopped = asyncio.Event()
        self._stop_requested = asyncio.Event()  # a signal, or every log dir failed

    # -- what the APIs read -----------------------------------------------------------------
    @property
    def cluster_id(self) -> str:
        return self.store.cluster_id

    def brokers(self, listener_name: str | None = None) -> list[BrokerInfo]:
        """Every live broker at its endpoint for `listener_name` (the listener the client came
        in on); as in Kafka, a broker without that listener is left out."""
        if self.cluster is not None:
            name = listener_name or self.advertised_listener().name
            return [b for b in (info.for_listener(name) for info in self.store.brokers().values()) if b]
        listener = self.advertised_listener(listener_name)
        return [BrokerInfo(self.broker_id, listener.host, listener.port, self.config.broker_rack)]

    @property
    def controller_id(self) -> int:
        """The controller's broker id (-1 while there is none); a single node is its own."""
        if self.cluster is None:
            return self.broker_id
        controller_id = self.store.controller_id
        return -1 if controller_id is None else controller_id

    def advertised_listener(self, listener_name: str | None = None) -> Listener:
        """The advertised endpoint of `listener_name` (clients get the address of the listener
        they connected to), or of the first listener."""
        advertised = list(self.config.advertised_listeners or [])
        if advertised:
            name, host, port = next((e for e in advertised if e[0] == listener_name), advertised[0])
            bound = next((l.port for l in self.listeners if l.name == name),
                         self.listeners[0].port if self.listeners else port)
            return Listener(name, host or "localhost", port or bound)
        return self.listeners[0]

    @property
    def credential_store(self):
        """Where SCRAM credentials live: /config/users on a cluster, the file store on a single node."""
        return self.user_store if self.user_store is not None else self.store

    def topic_log_config(self, topic: TopicInfo | str) -> LogConfig:
        info = self.store.topic(topic) if isinstance(topic, str) else topic
        return self.default_log_config.with_overrides(info.configs if info else {})

    def check_topic_configs(self, name: str, configs: Mapping[str, str]) -> LogConfig:
        """The effective config `configs` give topic `name` (new or existing), checked key by
        key and for tiered storage together with the broker's settings (InvalidConfigError)."""
        config = self.default_log_config.with_overrides(configs)
        info = self.store.topic(name) if self.store is not None else None
        previous = self.topic_log_config(info) if info is not None else None
        check_remote_storage(config, system_enabled=self.config.remote_log_storage_system_enable,
                             previous=previous)
        return config

    def _partition_exists(self, tp: TopicPartition) -> bool:
        info = self.store.topic(tp.topic)
        return info is not None and tp.partition in info.assignment

    # -- lifecycle --------------------------------------------------------------------------
    async def start(self) -> None:
        self.authorizer = create_authorizer(self.config)
        if self.config.zookeeper_connect:
            from logbroker.server.listener_security import inter_broker_security
            self.inter_broker_security = inter_broker_security(self.config)
        first_dir = self.log_dirs[0]
        first_dir.mkdir(parents=True, exist_ok=True)
        if self.config.zookeeper_connect:
            await self._connect_zookeeper()
            topics = await asyncio.get_running_loop().run_in_executor(None, self.zk.topics)
        else:
            self.store = LocalMetadataStore(first_dir)
            topics = self.store.topics()
        await self._load_dynamic_configs()
        from logbroker.server.delegation_tokens import DelegationTokenManager
        self.delegation_tokens = DelegationTokenManager(config=self.config, clock=self.clock,
                                                        store=self.token_store or self.store)
        from logbroker.server.client_telemetry import ClientTelemetry
        self.client_telemetry = ClientTelemetry(store=self.zk or self.store, clock=self.clock,
                                                max_bytes=self.config.telemetry_max_bytes)
        await asyncio.get_running_loop().run_in_executor(None, self.client_telemetry.reload)
        self.log_manager = LogManager(self.log_dirs, default_config=self.default_log_config,
                                      clock=self.clock, broker_id=self.broker_id,
                                      cluster_id=self.store.cluster_id,
                                      producer_id_expiration_ms=self.config.producer_id_expiration_ms)
        self.log_manager.startup({name: self.topic_log_config(info) for name, info in topics.items()})
        self.replica_manager = ReplicaManager(broker_id=self.broker_id, log_manager=self.log_manager,
                                              clock=self.clock)
        self.replica_manager.partition_exists = self._partition_exists
        if self.config.remote_log_storage_system_enable:
            self._start_remote_log_manager()
        self.replica_log_dir_mover = ReplicaLogDirMover(self)
        loop = asyncio.get_running_loop()
        self.log_manager.on_dir_failure = (
            lambda log_dir, tps: loop.call_soon_threadsafe(self._on_dir_failure, log_dir, tps))
        if self.config.replica_selector_class == RACK_AWARE_REPLICA_SELECTOR:
            self.replica_manager.preferred_read_replica = self._preferred_read_replica
        if self.zk is None:
            self.controller = Controller(self.store, live_brokers=[self.broker_id])
            self._adopt_orphan_logs()
            self.apply_partition_states(self.controller.elect_all())
        else:
            # Leaders come from the cluster's controller, through the state watches (after the
            # listeners are up); this Controller only validates and assigns new topics.
            self.controller = Controller(self.store, live_brokers=[])
        if self.authorizer is not None:
            await self._load_acls()
        await self._load_client_quotas()
        self.producer_ids = ProducerIdManager(self.store)
        self.group_coordinator = GroupCoordinator(broker_id=self.broker_id, config=self.config, replica_manager=self.replica_manager, store=self.store, create_topic=self.create_topic, clock=self.clock,
                                                  live_brokers=(lambda: len(self.store.brokers())) if self.zk is not None else None)
        self.group_coordinator.load()
        # Share groups start now if this broker leads a partition of their state topic, else on
        # first use (server/share_groups.py).
        self.replica_manager.leadership_listeners.append(self._follow_share_state)
        if any(tp.topic == SHARE_STATE_TOPIC and p.is_leader for tp, p in self.replica_manager.partitions.items()):
            self.share_groups()
        live_brokers = (lambda: len(self.store.brokers())) if self.zk is not None else None
        self.transaction_coordinator = TransactionCoordinator(
            broker_id=self.broker_id, config=self.config, replica_manager=self.replica_manager, store=self.store,
            producer_ids=self.producer_ids, create_topic=self.create_topic, clock=self.clock,
            live_brokers=live_brokers,
            marker_channel=TransactionMarkerChannel(
                broker_id=self.broker_id, replica_manager=self.replica_manager, store=self.store,
                endpoint=self._broker_address, security=self.inter_broker_security or PLAINTEXT,
                request_timeout_ms=self.config.request_timeout_ms))
        self.transaction_coordinator.start()
        self.transaction_verifier = TransactionVerifier(
            broker_id=self.broker_id, coordinator=self.transaction_coordinator, store=self.store,
            endpoint=self._broker_address, security=self.inter_broker_security or PLAINTEXT,
            request_timeout_ms=self.config.request_timeout_ms)
        gc = self.group_coordinator
        self.replica_manager.add_txn_marker_listener(
            lambda tp, producer_id, commit: complete_transactional_offsets(gc, tp, producer_id, commit))
        self.server = KafkaServer(Dispatcher(self), max_request_bytes=self.config.socket_request_max_bytes,
                                  connections_max_idle_ms=self.config.connections_max_idle_ms,
                                  clock_ms=self.clock.monotonic_ms,
                                  quotas=ConnectionQuotas.from_config(self.config))
        if self.config.metrics_port is not None:
            from logbroker.server.metrics import start_metrics
            self.metrics = await start_metrics(self)
        securities = [self.listener_security(name, self.config) for name, _, _ in self.config.listeners]
        # In a cluster the listeners are bound first (the registration carries their ports) but
        # accept nothing until this broker has registered and read the cluster's metadata: its
        # cache is empty before that, and a client must never hear that an existing topic is
        # unknown because a broker restarted (Kafka's brokers start serving once they have
        # caught up with the metadata). Connections made meanwhile wait in the listen backlog.
        for (name, host, port), security in zip(self.config.listeners, securities):
            bound = await self.server.listen(host, port, security, accepting=self.zk is None)
            self.listeners.append(Listener(name, host or "0.0.0.0", bound))
        if self.zk is not None:
            await self._join_cluster()
            self.server.start_accepting()
        if self.config.schema_registry_listeners:
            from logbroker.schema_registry.server import start_schema_registry
            self.schema_registry = await start_schema_registry(self)
            if self.metrics is not None:
                self.metrics.registry.register(self.schema_registry.metrics)
        self._start_periodic_tasks()

    def _start_remote_log_manager(self) -> None:
        """Tiered storage: the remote store the config names and the manager that copies to it,
        expires in it and reads from it for the partitions led here (remote/)."""
        from logbroker.remote.remote_log_manager import RemoteLogManager
        from logbroker.remote.storage_manager import RemoteStorageManager
        c = self.config
        rsm = RemoteStorageManager.from_config(c.remote_log_storage_manager_class_name,
                                               c.remote_storage_settings())
        rlm = RemoteLogManager(rsm=rsm, broker_id=self.broker_id, clock=self.clock,
                               partitions=self.replica_manager.partitions,
                               task_interval_ms=c.remote_log_manager_task_interval_ms,
                               fetch_max_wait_ms=c.remote_fetch_max_wait_ms)
        self.replica_manager.remote_log_manager = rlm
        self.replica_manager.leadership_listeners.append(rlm.on_leadership)
        self._tasks.append(asyncio.get_running_loop().create_task(rlm.run(), name="remote log manager"))
        log.info("Tiered storage on: remote store %s", rsm.description)

    def delete_remote_data(self, info: TopicInfo) -> None:
        """A deleted tiered topic's remote segments go too (in the background)."""
        rlm = self.replica_manager.remote_log_manager
        if rlm is None or not self.topic_log_config(info).remote_storage_enable:
            return
        asyncio.get_running_loop().create_task(
            rlm.delete_partitions([TopicPartition(info.name, p) for p in info.assignment], info.topic_id))

    async def _load_dynamic_configs(self) -> None:
        """The stored dynamic layers (cluster default, then this broker's), before anything reads
        the config they change; a layer that cannot apply is skipped with an error line."""
        source = self.zk if self.zk is not None else self.store
        for entity in (DEFAULT_ENTITY, str(self.broker_id)):
            configs = await asyncio.get_running_loop().run_in_executor(None, source.broker_configs, entity)
            loaded = self.dynamic_config.load(per_broker=entity != DEFAULT_ENTITY, configs=configs)
            if loaded is not None:
                self.dynamic_config.replace(per_broker=entity != DEFAULT_ENTITY, configs=loaded[0],
                                            config=loaded[1])
        self.config = self.dynamic_config.current
        self.default_log_config = self.config.default_log_config()

    # -- KIP-932 share groups, started on first use (server/share_groups.py says why) ----------
    def share_groups(self):  # -> server.share_groups.ShareGroups
        """The share coordinator (state in __share_group_state), persister, share-partition
        manager (ShareFetch/ShareAcknowledge on partition leaders) and share-group offsets;
        started, and their modules imported, on the first call. Event loop only."""
        if self._share_groups is None:
            from logbroker.server.share_groups import start_share_groups
            self._share_groups = start_share_groups(self)
        return self._share_groups

    @property
    def share_coordinator(self):
        return self.share_groups().coordinator

    @property
    def share_persister(self):
        return self.share_groups().persister

    @property
    def share_partition_manager(self):
        return self.share_groups().partition_manager

    @property
    def share_group_offsets(self):
        return self.share_groups().offsets

    def _follow_share_state(self, tp: TopicPartition, partition) -> None:
        """ReplicaManager's leadership listener for __share_group_state: leading a partition of
        it starts share groups (which loads every state partition led here, this one included);
        once started, each change goes to the share coordinator."""
        if tp.topic != SHARE_STATE_TOPIC:
            return
        if self._share_groups is not None:
            self._share_groups.coordinator.on_leadership_change(tp, partition)
        elif partition is not None and partition.is_leader:
            self.share_groups()

    def listener_security(self, name: str, config: KafkaConfig):
        """The ListenerSecurity `config` gives listener `name`. Raises ConfigError naming the key."""
        from logbroker.server.listener_security import listener_security

        def scram_credential(user: str, mechanism: str):
            return self.credential_store.scram_credential(user, mechanism)
        def delegation_token(token_id: str, mechanism: str):
            return self.delegation_tokens.scram_token(token_id, mechanism)
        return listener_security(config, name, scram_credential=scram_credential,
                                 clock_ms=self.clock.monotonic_ms, delegation_token=delegation_token,
                                 wall_clock_ms=self.clock.time_ms)

    async def _load_acls(self) -> None:
        """Load every ACL before the listeners open; on a cluster, then follow the change notices
        other brokers write (applied from kazoo's thread; see AclAuthorizer on why that is safe)."""
        if self.zk is None:
            self.authorizer.load(self.store)
            return
        from logbroker.metadata.zk_acls import ZkAclStore
        acl_store = ZkAclStore(self.zk.client)

        def load() -> None:
            acl_store.create_paths()
            self.authorizer.load(acl_store)
            acl_store.watch_changes(self.authorizer.apply)
        await asyncio.get_running_loop().run_in_executor(None, load)

    async def _load_client_quotas(self) -> None:
        """Every quota config, before the listeners open; on a cluster the change notices keep
        them current (server/zk_cluster.py)."""
        from logbroker.server.client_quotas import ClientQuotas
        self.client_quotas = ClientQuotas.from_config(self.config, clock_ms=self.clock.monotonic_ms)
        if self.zk is None:
            self.quota_store = self.store
            configs = self.store.read_all()  # in memory: no worker thread needed
        else:
            from logbroker.metadata.zk_quotas import ZkClientQuotaStore
            self.quota_store = ZkClientQuotaStore(self.zk.client)
            configs = await asyncio.get_running_loop().run_in_executor(None, self.quota_store.read_all)
        self.client_quotas.load(configs)

    async def _connect_zookeeper(self) -> None:
        from logbroker.metadata.zookeeper_store import ZooKeeperMetadataStore
        c = self.config
        zk = ZooKeeperMetadataStore(c.zookeeper_connect, broker_id=self.broker_id,
                                    session_timeout_ms=c.zookeeper_session_timeout_ms,
                                    connection_timeout_ms=c.zookeeper_connection_timeout_ms,
                                    clock=self.clock)
        await asyncio.get_running_loop().run_in_executor(None, zk.start)
        self.zk = zk
        self.store = MetadataCache(zk, cluster_id=zk.cluster_id)
        from logbroker.metadata.zk_users import ZkUserScramStore
        self.user_store = ZkUserScramStore(zk.client)
        await asyncio.get_running_loop().run_in_executor(None, self.user_store.watch)
        from logbroker.metadata.zk_delegation_tokens import ZkDelegationTokenStore
        self.token_store = ZkDelegationTokenStore(zk.client)
        await asyncio.get_running_loop().run_in_executor(None, self.token_store.watch)

    async def _join_cluster(self) -> None:
        from logbroker.server.zk_cluster import ZooKeeperCluster
        listener = self.advertised_listener()
        info = BrokerInfo(self.broker_id, listener.host, listener.port, self.config.broker_rack)
        endpoints = [f"{name}://{host or listener.host}:{port or self._bound_port(name)}"
                     for name, host, port in (self.config.advertised_listeners or [])] \
            or [f"{listener.name}://{listener.host}:{listener.port}"]
        from logbroker.replication.fetcher import ReplicaFetcherManager
        self.cluster = ZooKeeperCluster(self, self.zk, self.store)
        self.replica_manager.fetcher_manager = ReplicaFetcherManager(
            broker_id=self.broker_id, leader_address=self._broker_address,
            security=self.inter_broker_security,
            on_progress=self.replica_manager.fetch_purgatory.check_and_complete,
            on_appended=self.replica_manager.after_follower_append,
            remote_log_manager=lambda: self.replica_manager.remote_log_manager)
        self.replica_manager.alter_isr = self.cluster.alter_isr
        await self.cluster.start(info, endpoints, security_protocol_map=dict(
            self.config.listener_security_protocol_map))

    def _preferred_read_replica(self, partition, client: ClientMetadata, fetch_offset: int) -> int | None:
        """KIP-392 on a leader: the follower in the consumer's rack to fetch from, if any."""
        if not client.rack_id:
            return None
        racks = {b.broker_id: b.rack for b in self.brokers(client.listener_name)}
        return preferred_read_replica(partition, client, fetch_offset, racks)

    def inter_broker_endpoint(self, broker_id: int) -> BrokerInfo | None:
        """A live broker at its inter-broker listener's endpoint (None: not live, or no such listener)."""
        info = self.store.brokers().get(broker_id)
        return info.for_listener(self.config.inter_broker_listener_name) if info is not None else None

    def _broker_address(self, broker_id: int) -> tuple[str, int] | None:
        info = self.inter_broker_endpoint(broker_id)
        return (info.host, info.port) if info is not None else None

    def _on_dir_failure(self, log_dir: Path, tps: list[TopicPartition]) -> None:
        """A log dir went offline (LogManager.maybe_fail_dir): stop hosting its partitions and,
        on a cluster, tell the controller (Kafka's /log_dir_event_notification), which moves
        their leadership to other brokers. With no log dir left, stop the broker. Event loop."""
        self.replica_manager.stop_replicas(tps, delete=False)
        for tp in tps:
            self.replica_log_dir_mover.cancel(tp)
        if self.cluster is not None:
            self.cluster.notify_log_dir_failure()
        if self.log_manager.offline_dirs.keys() >= set(self.log_manager.log_dirs):
            log.error("Shutting down broker %d: every log dir has failed", self.broker_id)
            self._stop_requested.set()

    def _bound_port(self, name: str) -> int:
        return next((l.port for l in self.listeners if l.name == name), self.listeners[0].port)

    # -- topic admin (the controller writes, this broker applies) ---------------------------
    def create_topic(self, name: str, *, num_partitions: int, replication_factor: int,
                     configs: dict[str, str], assignment: dict[int, tuple[int, ...]] | None = None,
                     validate_only: bool = False) -> TopicInfo:
        self.check_topic_configs(name, configs)
        if num_partitions == -1:
            num_partitions = self.config.num_partitions
        if replication_factor == -1:
            replication_factor = self.config.default_replication_factor
        if self.zk is not None:
            return self._create_topic_in_cluster(name, num_partitions=num_partitions,
                                                 replication_factor=replication_factor,
                                                 configs=configs, assignment=assignment,
                                                 validate_only=validate_only)
        info = self.controller.create_topic(name, num_partitions=num_partitions,
                                            replication_factor=replication_factor, configs=configs,
                                            assignment=assignment, validate_only=validate_only)
        if not validate_only:
            self._apply_topic_states(name, info.assignment)
            log.info("Created topic %s with %d partition(s)", name, info.num_partitions)
        return info

    def _create_topic_in_cluster(self, name: str, *, num_partitions: int, replication_factor: int,
                                 configs: dict[str, str], assignment, validate_only: bool) -> TopicInfo:
        # Any broker may write a new topic (as Kafka's AdminZkClient does); the controller sees it
        # by its watch and elects the leaders. Blocks on ZooKeeper (a few ms; topic admin is rare).
        info = self.controller.create_topic(name, num_partitions=num_partitions,
                                            replication_factor=replication_factor, configs=configs,
                                            assignment=assignment, validate_only=True)
        if not validate_only:
            self.zk.create_topic(info)
            self.store.put_topic(info)
            log.info("Created topic %s with %d partition(s)", name, info.num_partitions)
        return info

    def delete_topic(self, name: str) -> None:
        """Single node (a cluster deletes through server/topic_admin.py)."""
        info = self.controller.delete_topic(name)
        self.replica_manager.stop_replicas([TopicPartition(name, p) for p in info.assignment], delete=True)
        self.topic_deleted(info)
        log.info("Deleted topic %s", name)

    def topic_deleted(self, info) -> None:
        """What follows a topic's deletion here, besides its replicas (stopped by the caller):
        the share-partition states of the topic kept here go too, and a tiered topic's remote data."""
        if self._share_groups is not None:
            self._share_groups.coordinator.on_topic_deleted(info.topic_id)
        self.delete_remote_data(info)

    def create_partitions(self, name: str, count: int, *, assignment=None, validate_only: bool = False) -> None:
        """Single node (a cluster adds partitions through server/topic_admin.py)."""
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
        """Act on new partition states: lead what this broker leads (followers come with the cluster).

        A log that cannot be created (a full or failing log dir: KafkaStorageError) leaves its
        partition unhosted — produce and fetch answer NOT_LEADER_OR_FOLLOWER, FindCoordinator
        COORDINATOR_NOT_AVAILABLE — and `host_unhosted_partitions` tries again every few seconds,
        so the broker serves it once there is room. One rate-limited line, no traceback."""
        for tp, state in states.items():
            info = self.store.topic(tp.topic)
            if info is None or state.leader != self.broker_id:
                continue
            try:
                self.replica_manager.become_leader(tp, state, info.assignment[tp.partition],
                                                   config=self.topic_log_config(info), topic_id=info.topic_id)
            except KafkaStorageError as exc:
                _storage_log.log(logging.WARNING, "unhosted", "Cannot host %s yet, retrying: %s", tp, exc)

    def host_unhosted_partitions(self) -> None:
        """Single node: lead every partition the store says this broker leads but that has no log
        here yet (its creation failed on a full disk). Runs on the event loop, periodically."""
        if self.zk is not None:
            return
        hosted = self.replica_manager.partitions
        missing = {}
        for name, info in self.store.topics().items():
            for partition in info.assignment:
                tp = TopicPartition(name, partition)
                if tp not in hosted:
                    state = self.store.partition_state(tp)
                    if state is not None and state.leader == self.broker_id:
                        missing[tp] = state
        if missing:
            self.apply_partition_states(missing)

    def apply_partition_state(self, tp: TopicPartition, state: PartitionState, info: TopicInfo) -> None:
        """Cluster mode: a newer leader epoch for a partition this broker hosts → lead or follow."""
        partition = self.replica_manager.partitions.get(tp)
        if partition is not None and state.leader_epoch <= partition.leader_epoch:
            return
        if self.log_manager.is_offline(tp):  # its log dir failed: not hosted until a restart
            return
        replicas = info.assignment[tp.partition]
        config = self.topic_log_config(info)
        if state.leader == self.broker_id:
            self.replica_manager.become_leader(tp, state, replicas, config=config, topic_id=info.topic_id)
        else:
            self.replica_manager.become_follower(tp, state, replicas, config=config, topic_id=info.topic_id)

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
        self._every(5000, self.host_unhosted_partitions, "unhosted partitions", in_thread=False)
        self._every(60_000, self.client_quotas.expire_sensors, "quota sensor expiration", in_thread=False)
        self._every(30_000, self.client_telemetry.expire_idle, "client telemetry expiration", in_thread=False)
        if self.delegation_tokens.enabled:
            self._every(c.delegation_token_expiry_check_interval_ms, self.delegation_tokens.purge_expired,
                        "delegation token expiry")
        if self.cluster is not None:
            rm = self.replica_manager
            self._every(max(c.replica_lag_time_max_ms // 2, 10), lambda: rm.maybe_shrink_isr(c.replica_lag_time_max_ms),
                        "isr-expiration", in_thread=False)
        if c.log_cleaner_enable:  # its keys are dynamic: read at each round
            self._every(lambda: self.config.log_cleaner_backoff_ms, lambda: lm.clean_logs(
                self.clock.time_ms(), dedupe_buffer_size=self.config.log_cleaner_dedupe_buffer_size), "log cleaner")

    def _every(self, interval_ms: int | Callable[[], int], work, name: str, *, in_thread: bool = True) -> None:
        """Run `work` every `interval_ms` (a function: read before each wait)."""
        # A failing round (a full disk under the checkpoints) is retried every interval but logged
        # once per change of error, and once when it works again — not a traceback per tick.
        state = StateChangeLog(log, f"Periodic task {name}")

        async def loop() -> None:
            while True:
                await asyncio.sleep((interval_ms() if callable(interval_ms) else interval_ms) / 1000)
                try:
                    if in_thread:
                        await asyncio.get_running_loop().run_in_executor(None, work)
                    else:
                        work()
                except Exception as exc:  # noqa: BLE001 - a failed round is retried next interval
                    state.failed(exc)
                else:
                    state.succeeded()
        self._tasks.append(asyncio.get_running_loop().create_task(loop(), name=name))

    async def shutdown(self) -> None:
        log.info("Shutting down broker %d", self.broker_id)
        if self.cluster is not None and self.config.controlled_shutdown_enable:
            from logbroker.server.controlled_shutdown import shut_down_in_a_controlled_way
            await shut_down_in_a_controlled_way(self)
        if self.schema_registry is not None:
            await self.schema_registry.close()
        if self.server is not None:
            await self.server.close()
        if self.metrics is not None:
            await self.metrics.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        # Stop following before leaving the cluster (Kafka's order): a fetch sent after the
        # session's end would reach leaders that already dropped this broker from their ISR.
        if self.replica_manager is not None and self.replica_manager.fetcher_manager is not None:
            await self.replica_manager.fetcher_manager.close()
        if self.cluster is not None:
            # The session's end drops the registration; the controller moves what is left.
            await self.cluster.close()
        elif self.zk is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.zk.close)
        if self.transaction_coordinator is not None:
            await self.transaction_coordinator.shutdown()
            await self.transaction_verifier.close()
        if self._share_groups is not None:
            self._share_groups.partition_manager.shutdown()
            await self._share_groups.persister.close()
            await self._share_groups.offsets.partition_metadata.close()
        if self.group_coordinator is not None:
            self.group_coordinator.shutdown()
        if self.replica_log_dir_mover is not None:
            await self.replica_log_dir_mover.close()
        if self.log_manager is not None:
            self.log_manager.shutdown()
        self._stopped.set()
        log.info("Broker %d shut down cleanly", self.broker_id)

    async def serve_until_signalled(self) -> int:
        """Serve until SIGTERM or SIGINT (then 0), or until every log dir has failed (then 1,
        as Kafka halts such a broker), and shut down."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._stop_requested.set)
        await self._stop_requested.wait()
        await self.shutdown()
        return 1 if self.log_manager.offline_dirs.keys() >= set(self.log_manager.log_dirs) else 0
