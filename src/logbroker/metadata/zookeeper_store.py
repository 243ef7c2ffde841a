"""The metadata store of a cluster: Apache ZooKeeper, through kazoo, in Kafka's znode layout.

`ZooKeeperMetadataStore` has the interface of `LocalMetadataStore` (topics, assignments, configs,
partition states, producer-id blocks, the cluster id) plus what only a cluster needs: broker
registration, controller election, the partition leader's conditional ISR write, and watches.
The znodes and their JSON are Kafka 3.9's (see `zk_data.py`), so Kafka's tools read our cluster.

Who may write what (DESIGN.md §5), and how a stale writer is stopped — ZooKeeper refuses nothing by
itself, so every fenced write is conditional:

- The controller is whoever created the ephemeral `/controller`; in the same multi() it bumped
  `/controller_epoch` from the version it read. It remembers that znode's new version, and every
  controller write (`set_partition_states`, `set_assignment`, `delete_topic`, and `create_topic`
  when called on the controller) is one multi() that starts with a check of that version. Once
  another broker has become controller the version has moved, the whole multi fails, and the
  deposed controller gets `ControllerMovedError` and stops acting as controller.
- The partition leader alone changes the ISR, by `update_isr`: a setData conditional on the state
  znode's version it last read. `StaleStateError` means the leader (or controller) wrote since:
  re-read the state, and act only if still leader in a newer epoch. The same multi checks that
  each broker joining the ISR is registered (`IneligibleReplicaError` if not).
- Producer-id blocks are claimed by a setData conditional on `/latest_producer_id_block`'s version,
  retried on conflict, so no two brokers ever hold overlapping blocks.
- Any broker may create a topic or change its configs (Kafka's AdminZkClient does the same): the
  controller learns of new topics by its watch on `/brokers/topics` and elects their leaders.
  Deletion is requested with `/admin/delete_topics/<topic>` and carried out by the controller.

Every method blocks on ZooKeeper round trips (about 0.1-1 ms each on loopback): call them from a
thread (`loop.run_in_executor`), not on the event loop. Watch callbacks run on kazoo's callback
thread; they must not block for long, and the broker hops to its event loop with
`loop.call_soon_threadsafe`. Connection failures raise `ZooKeeperUnavailableError`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    BadVersionError,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    OperationTimeoutError,
    RolledBackError,
    RuntimeInconsistency,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.recipe.watchers import ChildrenWatch, DataWatch
from kazoo.retry import KazooRetry

from logbroker.clock import Clock, SystemClock
from logbroker.errors import (
    DuplicateBrokerRegistrationError,
    IneligibleReplicaError,
    KafkaError,
    NotControllerError,
    NotLeaderOrFollowerError,
    ReassignmentInProgressError,
    RequestTimedOutError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from logbroker.metadata import zk_data as zk
from logbroker.metadata.model import BrokerInfo, PartitionState, TopicInfo, new_topic_id, topic_id_to_str
from logbroker.types import TopicPartition

log = logging.getLogger(__name__)


class ControllerMovedError(NotControllerError):
    """A controller write failed because another broker became controller (Kafka's
    ControllerMovedException, NOT_CONTROLLER). This store no longer acts as controller."""


class StaleStateError(NotLeaderOrFollowerError):
    """A partition state znode changed since it was read: re-read it before writing again."""


class ZooKeeperUnavailableError(RequestTimedOutError):
    """ZooKeeper did not answer (connection lost, session expired, timeout)."""


@dataclass(frozen=True, slots=True)
class VersionedPartitionState:
    """A partition state with its znode version, the version a conditional write must name, and
    the zxid of its last write (mzxid): compared with a broker's epoch (its registration's czxid),
    it tells whether the state was decided before or after that broker last (re)started."""

    state: PartitionState
    zk_version: int
    modified_zxid: int = -1


class Watch:
    """Returned by the `watch_*` methods; `cancel()` stops the callbacks (kazoo drops the watch at
    its next event)."""

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ZooKeeperMetadataStore:
    def __init__(self, connect: str, *, broker_id: int, session_timeout_ms: int = 18_000,
                 connection_timeout_ms: int = 18_000, clock: Clock | None = None) -> None:
        """`connect` is `zookeeper.connect`: `host:port[,host:port…][/chroot]`."""
        self.connect = connect
        self.broker_id = broker_id
        self.cluster_id = ""
        self.clock = clock or SystemClock()
        self.connection_timeout_ms = connection_timeout_ms
        self._client = KazooClient(hosts=connect, timeout=session_timeout_ms / 1000,
                                   connection_retry=KazooRetry(max_tries=-1, max_delay=1.0))
        # The controller epoch we won and /controller_epoch's version after our bump; None unless
        # this broker is the controller.
        self._controller_epoch: int | None = None
        self._controller_epoch_zk_version = -1
        self._registration: tuple[BrokerInfo, dict] | None = None
        # This broker's epoch: the czxid of its registration in the current session (-1 before).
        self.registered_broker_epoch = -1
        self._session_lost = False
        self._client.add_listener(self._on_connection_state)

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> ZooKeeperMetadataStore:
        """Connect, create Kafka's persistent paths, and read (or create) the cluster id."""
        with self._errors():
            ensure_chroot(self.connect, timeout_s=self.connection_timeout_ms / 1000)
            self._client.start(timeout=self.connection_timeout_ms / 1000)
            for path in zk.PERSISTENT_PATHS:
                self._client.ensure_path(path)
            self.cluster_id = self._get_or_create_cluster_id()
        return self

    def close(self) -> None:
        """End the session: ZooKeeper removes this broker's ephemeral znodes (its registration and,
        if it is controller, /controller) at once."""
        self._controller_epoch = None
        self._client.stop()
        self._client.close()

    def __enter__(self) -> ZooKeeperMetadataStore:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.close()

    @property
    def client(self) -> KazooClient:
        """The kazoo session, for modules that keep their own znodes (zk_acls)."""
        return self._client

    @property
    def session_id(self) -> int:
        return self._client.client_id[0] if self._client.client_id else 0

    def _get_or_create_cluster_id(self) -> str:
        try:
            return zk.decode_cluster_id(self._client.get(zk.CLUSTER_ID)[0])
        except NoNodeError:
            cluster_id = topic_id_to_str(uuid.uuid4())
            try:
                self._client.create(zk.CLUSTER_ID, zk.encode_cluster_id(cluster_id), makepath=True)
                return cluster_id
            except NodeExistsError:
                return zk.decode_cluster_id(self._client.get(zk.CLUSTER_ID)[0])

    def _on_connection_state(self, state: str) -> None:
        # Runs on kazoo's connection thread: no blocking calls here.
        if state == KazooState.LOST:
            self._session_lost = True
            if self._controller_epoch is not None:
                log.warning("ZooKeeper session lost: broker %d is no longer controller", self.broker_id)
            self._controller_epoch = None
        elif state == KazooState.CONNECTED and self._session_lost:
            self._session_lost = False
            if self._registration is not None:
                self._client.handler.spawn(self._reregister)

    def _reregister(self) -> None:
        info, options = self._registration
        try:
            self.register_broker(info, **options)
            log.info("re-registered broker %d in a new ZooKeeper session", info.broker_id)
        except KafkaError as exc:
            log.error("could not re-register broker %d: %s", info.broker_id, exc)

    # -- brokers ------------------------------------------------------------------------------
    def register_broker(self, info: BrokerInfo, *, endpoints: list[str] | None = None,
                        security_protocol_map: dict[str, str] | None = None) -> int:
        """Create the ephemeral `/brokers/ids/<id>`; returns the broker epoch (the znode's czxid,
        as Kafka). Raises DuplicateBrokerRegistrationError if another session holds the id.
        Re-registered automatically after a session expiry."""
        path = zk.broker_path(info.broker_id)
        data = zk.encode_broker(info, timestamp_ms=self.clock.time_ms(), endpoints=endpoints,
                                security_protocol_map=security_protocol_map)
        self._registration = (info, {"endpoints": endpoints,
                                     "security_protocol_map": security_protocol_map})
        with self._errors():
            try:
                self._client.create(path, data, ephemeral=True)
            except NodeExistsError:
                pass
            # Like Kafka's checkedEphemeralCreate: after a connection loss the create may have
            # happened in our own session; someone else's znode is a conflict.
            _, stat = self._client.get(path)
            if stat.ephemeralOwner != self.session_id:
                raise DuplicateBrokerRegistrationError(
                    f"Broker id {info.broker_id} is already registered by another ZooKeeper session "
                    f"(0x{stat.ephemeralOwner:x}); is another broker running with broker.id={info.broker_id}?")
            self.registered_broker_epoch = stat.czxid
            return stat.czxid

    def brokers(self) -> dict[int, BrokerInfo]:
        """Every registered (live) broker."""
        with self._errors():
            ids = sorted(int(c) for c in self._client.get_children(zk.BROKER_IDS))
            pending = {i: self._client.get_async(zk.broker_path(i)) for i in ids}
            brokers = {}
            for broker_id, result in pending.items():
                try:
                    brokers[broker_id] = zk.decode_broker(broker_id, result.get()[0])
                except NoNodeError:
                    pass  # went away between the listing and the read
            return brokers

    def broker_epoch(self, broker_id: int) -> int | None:
        """A live broker's epoch (its registration znode's czxid, as Kafka); None if not registered."""
        with self._errors():
            stat = self._client.exists(zk.broker_path(broker_id))
            return stat.czxid if stat is not None else None

    def broker_epochs(self) -> dict[int, int]:
        """Every registered broker's epoch: the czxid of its /brokers/ids/<id>, which grows each
        time the broker registers again (a restart, a new session)."""
        with self._errors():
            ids = sorted(int(c) for c in self._client.get_children(zk.BROKER_IDS))
            pending = {i: self._client.exists_async(zk.broker_path(i)) for i in ids}
            stats = {broker_id: result.get() for broker_id, result in pending.items()}
            return {broker_id: stat.czxid for broker_id, stat in stats.items() if stat is not None}

    # -- controller ---------------------------------------------------------------------------
    @property
    def controller_epoch(self) -> int | None:
        """The epoch this broker won as controller, or None when it is not controller."""
        return self._controller_epoch

    @property
    def is_controller(self) -> bool:
        return self._controller_epoch is not None

    def controller_id(self) -> int | None:
        with self._errors():
            try:
                return zk.decode_controller(self._client.get(zk.CONTROLLER)[0])
            except NoNodeError:
                return None

    def elect_controller(self) -> int | None:
        """Try to become controller: in one multi(), create the ephemeral /controller and bump
        /controller_epoch from the version read. Returns the new controller epoch, or None when
        another broker is controller."""
        with self._errors():
            while True:
                try:
                    data, stat = self._client.get(zk.CONTROLLER_EPOCH)
                    epoch, version = zk.decode_controller_epoch(data), stat.version
                except NoNodeError:
                    try:
                        self._client.create(zk.CONTROLLER_EPOCH,
                                            zk.encode_controller_epoch(zk.INITIAL_CONTROLLER_EPOCH))
                    except NodeExistsError:
                        pass
                    continue
                txn = self._client.transaction()
                txn.create(zk.CONTROLLER, zk.encode_controller(self.broker_id, self.clock.time_ms()),
                           ephemeral=True)
                txn.set_data(zk.CONTROLLER_EPOCH, zk.encode_controller_epoch(epoch + 1), version=version)
                results = txn.commit()
                if not _failed(results):
                    self._controller_epoch_zk_version = results[1].version
                    self._controller_epoch = epoch + 1
                    log.info("broker %d is controller with epoch %d", self.broker_id, epoch + 1)
                    return epoch + 1
                if isinstance(results[0], NodeExistsError):
                    return None
                # /controller_epoch moved between our read and the multi: read again.

    def resign_controller(self) -> None:
        """Give up the controller role (controlled shutdown): delete /controller if it is ours."""
        with self._errors():
            epoch, self._controller_epoch = self._controller_epoch, None
            if epoch is None:
                return
            try:
                _, stat = self._client.get(zk.CONTROLLER)
                if stat.ephemeralOwner == self.session_id:
                    self._client.delete(zk.CONTROLLER, version=stat.version)
            except (NoNodeError, BadVersionError):
                pass

    def _controller_txn(self):
        """A multi() that first checks /controller_epoch is still at our bump's version."""
        if self._controller_epoch is None:
            raise NotControllerError(f"Broker {self.broker_id} is not the controller.")
        txn = self._client.transaction()
        txn.check(zk.CONTROLLER_EPOCH, self._controller_epoch_zk_version)
        return txn

    def _commit(self, txn, *, fenced: bool) -> list:
        """Commit a multi(); returns its results. Raises ControllerMovedError when the controller
        epoch check (the first op of a fenced multi) failed."""
        results = txn.commit()
        if fenced and isinstance(results[0], (BadVersionError, NoNodeError)):
            epoch, self._controller_epoch = self._controller_epoch, None
            raise ControllerMovedError(
                f"Broker {self.broker_id} is no longer controller: /controller_epoch moved past "
                f"epoch {epoch}.")
        return results

    # -- topics -------------------------------------------------------------------------------
    def topics(self) -> dict[str, TopicInfo]:
        with self._errors():
            names = sorted(self._client.get_children(zk.TOPICS))
            pending = {n: (self._client.get_async(zk.topic_path(n)),
                           self._client.get_async(zk.config_path("topics", n))) for n in names}
            topics = {}
            for name, (topic_result, config_result) in pending.items():
                info = self._topic_from_results(name, topic_result, config_result)
                if info is not None:
                    topics[name] = info
            return topics

    def topic(self, name: str) -> TopicInfo | None:
        with self._errors():
            return self._topic_from_results(name, self._client.get_async(zk.topic_path(name)),
                                            self._client.get_async(zk.config_path("topics", name)))

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return next((t for t in self.topics().values() if t.topic_id == topic_id), None)

    def _topic_from_results(self, name: str, topic_result, config_result) -> TopicInfo | None:
        try:
            data, stat = topic_result.get()
        except NoNodeError:
            return None
        if not data:  # not a topic Kafka wrote (a bare path someone created)
            return None
        try:
            configs = zk.decode_config(config_result.get()[0])
        except NoNodeError:
            configs = {}
        topic_id, assignment = zk.decode_topic(data)
        if topic_id is None:
            topic_id = self._assign_topic_id(name, assignment, stat.version)
        return TopicInfo(name, topic_id, assignment, configs)

    def _assign_topic_id(self, name: str, assignment: dict[int, tuple[int, ...]], version: int) -> uuid.UUID:
        # A topic created by a pre-2.8 tool has no id; Kafka's controller gives it one. Whoever
        # reads it first writes one, conditionally, so all brokers agree on it.
        topic_id = new_topic_id()
        try:
            self._client.set(zk.topic_path(name), zk.encode_topic(topic_id, assignment), version=version)
            return topic_id
        except BadVersionError:
            written, _ = zk.decode_topic(self._client.get(zk.topic_path(name))[0])
            return written or self._assign_topic_id(name, assignment, self._client.exists(zk.topic_path(name)).version)

    def create_topic(self, info: TopicInfo) -> None:
        """Write the topic's config and assignment in one multi (fenced when this broker is
        controller). Raises TopicAlreadyExistsError."""
        with self._errors():
            fenced = self.is_controller
            txn = self._controller_txn() if fenced else self._client.transaction()
            config = zk.config_path("topics", info.name)
            if self._client.exists(config) is None:
                txn.create(config, zk.encode_config(info.configs))
            else:  # left over from a deleted topic, or set ahead of the topic
                txn.set_data(config, zk.encode_config(info.configs))
            txn.create(zk.topic_path(info.name), zk.encode_topic(info.topic_id, info.assignment))
            results = self._commit(txn, fenced=fenced)
            if any(isinstance(r, NodeExistsError) for r in results):
                raise TopicAlreadyExistsError(f"Topic '{info.name}' already exists.")
            _raise_first(results)

    def _topic_znode(self, name: str):
        """(data, stat) of `/brokers/topics/<topic>`; UnknownTopicOrPartitionError if absent."""
        try:
            return self._client.get(zk.topic_path(name))
        except NoNodeError:
            raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist.") from None

    def set_assignment(self, name: str, assignment: dict[int, tuple[int, ...]]) -> None:
        """Replace a topic's replica assignment (partition addition, reassignment); controller only."""
        with self._errors():
            data, stat = self._topic_znode(name)
            topic_id, _ = zk.decode_topic(data)
            txn = self._controller_txn()
            txn.set_data(zk.topic_path(name), zk.encode_topic(topic_id or new_topic_id(), assignment),
                         version=stat.version)
            results = self._commit(txn, fenced=True)
            if isinstance(results[1], BadVersionError):
                raise StaleStateError(f"Topic '{name}' changed while its assignment was being set.")
            _raise_first(results)

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        """Replace a topic's config overrides and write a config-change notification
        (`/config/changes/config_change_<seq>`), in one multi. Any broker may call it."""
        with self._errors():
            txn = self._client.transaction()
            txn.check(zk.topic_path(name), -1)  # -1: any version, but it must exist
            txn.set_data(zk.config_path("topics", name), zk.encode_config(configs))
            txn.create(f"{zk.CONFIG_CHANGES}/{zk.CONFIG_CHANGE_PREFIX}",
                       zk.encode_config_change("topics", name), sequence=True)
            results = txn.commit()
            if isinstance(results[0], NoNodeError):
                raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist.")
            if isinstance(results[1], NoNodeError):  # a topic created without a config znode
                self._client.create(zk.config_path("topics", name), zk.encode_config({}))
                return self.set_topic_configs(name, configs)
            _raise_first(results)

    def add_partitions(self, name: str, added: dict[int, tuple[int, ...]], *, current_count: int) -> None:
        """Any broker's write of new partitions into `/brokers/topics/<topic>` (Kafka's
        AdminZkClient.addPartitions): a setData conditional on the version read, made only while
        the topic still has `current_count` partitions. The controller's watch on the topic gives
        them states. Raises StaleStateError when the topic changed meanwhile."""
        with self._errors():
            data, stat = self._topic_znode(name)
            topic = zk.decode_topic_reassignment(name, data, stat.version)
            topic_id, assignment = topic.topic_id, topic.assignment
            if topic.adding or topic.removing:
                raise ReassignmentInProgressError(
                    f"Topic '{name}' has a partition reassignment in progress; add partitions once "
                    f"it completes (logbroker reassign-partitions --verify).")
            if len(assignment) != current_count:
                raise StaleStateError(f"Topic '{name}' has {len(assignment)} partitions now, not "
                                      f"{current_count}; describe it again and retry.")
            try:
                self._client.set(zk.topic_path(name),
                                 zk.encode_topic(topic_id or new_topic_id(), {**assignment, **added}),
                                 version=stat.version)
            except BadVersionError:
                raise StaleStateError(f"Topic '{name}' changed while partitions were being added; "
                                      "retry.") from None

    def group_configs(self, group_id: str) -> dict[str, str]:
        """A group's config overrides (`/config/groups/<group>`, where a ZooKeeper-era Kafka
        would keep them beside topics and users; {} if it has none)."""
        with self._errors():
            try:
                return zk.decode_config(self._client.get(zk.config_path("groups", group_id))[0])
            except NoNodeError:
                return {}

    def set_group_configs(self, group_id: str, configs: dict[str, str]) -> None:
        with self._errors():
            path = zk.config_path("groups", group_id)
            try:
                self._client.set(path, zk.encode_config(configs))
            except NoNodeError:
                self._client.create(path, zk.encode_config(configs), makepath=True)

    def topic_configs(self, name: str) -> dict[str, str]:
        """A topic's config overrides (`/config/topics/<topic>`; {} if it has none)."""
        with self._errors():
            try:
                return zk.decode_config(self._client.get(zk.config_path("topics", name))[0])
            except NoNodeError:
                return {}

    def config_change(self, name: str) -> tuple[bytes, int] | None:
        """The data and creation time (ms) of `/config/changes/<name>`; None once it is purged."""
        with self._errors():
            try:
                data, stat = self._client.get(f"{zk.CONFIG_CHANGES}/{name}")
            except NoNodeError:
                return None
            return data, stat.ctime

    def delete_config_change(self, name: str) -> None:
        """Purge an expired config change notification (any broker may; Kafka's brokers do)."""
        with self._errors(), contextlib.suppress(NoNodeError):
            self._client.delete(f"{zk.CONFIG_CHANGES}/{name}")

    def request_topic_deletion(self, name: str) -> None:
        """Mark a topic for deletion (`/admin/delete_topics/<topic>`); the controller deletes it."""
        with self._errors():
            if self._client.exists(zk.topic_path(name)) is None:
                raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist.")
            with contextlib.suppress(NodeExistsError):
                self._client.create(zk.delete_topic_path(name))

    def topics_to_delete(self) -> list[str]:
        with self._errors():
            return sorted(self._client.get_children(zk.DELETE_TOPICS))

    def delete_topic(self, name: str) -> TopicInfo:
        """Remove the topic's znodes (partition states, assignment, config, deletion mark) in one
        fenced multi; controller only. Returns what was deleted."""
        with self._errors():
            info = self.topic(name)
            if info is None:
                raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist.")
            txn = self._controller_txn()
            for path in reversed(self._subtree(zk.partitions_path(name))):
                txn.delete(path)
            txn.delete(zk.topic_path(name))
            if self._client.exists(zk.config_path("topics", name)) is not None:
                txn.delete(zk.config_path("topics", name))
            if self._client.exists(zk.delete_topic_path(name)) is not None:
                txn.delete(zk.delete_topic_path(name))
            results = self._commit(txn, fenced=True)
            if any(isinstance(r, NotEmptyError) for r in results):
                raise StaleStateError(f"Topic '{name}' changed while being deleted; retry.")
            _raise_first(results)
            return info

    def _subtree(self, path: str) -> list[str]:
        """`path` and everything under it, parents first ([] if it does not exist)."""
        try:
            children = self._client.get_children(path)
        except NoNodeError:
            return []
        paths = [path]
        for child in children:
            paths += self._subtree(f"{path}/{child}")
        return paths

    # -- partition states ---------------------------------------------------------------------
    def partition_state(self, tp: TopicPartition) -> PartitionState | None:
        versioned = self.partition_state_with_version(tp)
        return versioned.state if versioned else None

    def partition_state_with_version(self, tp: TopicPartition) -> VersionedPartitionState | None:
        with self._errors():
            try:
                data, stat = self._client.get(zk.partition_state_path(tp))
            except NoNodeError:
                return None
            return VersionedPartitionState(zk.decode_partition_state(data), stat.version, stat.mzxid)

    def set_partition_states(self, states: dict[TopicPartition, PartitionState], *,
                             expected_versions: dict[TopicPartition, int] | None = None
                             ) -> dict[TopicPartition, int]:
        """The controller's write of leaders and ISRs, in one fenced multi, stamped with this
        controller's epoch. A state znode that exists is overwritten only if its version is the
        expected one (when given: pass the version the election was based on, so an ISR change
        the leader made since is never lost); StaleStateError otherwise. Returns the new versions."""
        expected_versions = expected_versions or {}
        with self._errors():
            epoch = self._controller_epoch
            txn = self._controller_txn()
            # A new partition's parents (`partitions`, `partitions/<p>`) are created in the same
            # multi, so a write racing a topic deletion fails instead of resurrecting the topic.
            parents_created: set[str] = set()
            ops: list[TopicPartition | None] = []  # the partition of each op after the check
            for tp, state in sorted(states.items()):
                path = zk.partition_state_path(tp)
                data = zk.encode_partition_state(dataclasses.replace(state, controller_epoch=epoch))
                if self._client.exists(path) is None:
                    for parent in (zk.partitions_path(tp.topic), zk.partition_path(tp)):
                        if parent not in parents_created and self._client.exists(parent) is None:
                            txn.create(parent)
                            parents_created.add(parent)
                            ops.append(None)
                    txn.create(path, data)
                else:
                    txn.set_data(path, data, version=expected_versions.get(tp, -1))
                ops.append(tp)
            results = self._commit(txn, fenced=True)
            for tp, result in zip(ops, results[1:]):
                if isinstance(result, (BadVersionError, NodeExistsError)):
                    raise StaleStateError(f"The state of {tp} changed since it was read.")
            _raise_first(results)
            return {tp: 0 if isinstance(result, str) else result.version
                    for tp, result in zip(ops, results[1:]) if tp is not None}

    def update_isr(self, tp: TopicPartition, state: PartitionState, *, expected_version: int,
                   joining: tuple[int, ...] = ()) -> int:
        """The partition leader's ISR change: a setData conditional on the state znode's version,
        in one multi with a check that each broker in `joining` is registered — only a live
        broker joins the ISR (Kafka's INELIGIBLE_REPLICA): a dead one added after the controller
        dropped it would hold the high watermark until replica.lag.time.max.ms. Returns the new
        version; raises StaleStateError when the znode moved on (re-read it)."""
        with self._errors():
            txn = self._client.transaction()
            for broker_id in joining:
                txn.check(zk.broker_path(broker_id), -1)  # -1: any version, but it must exist
            txn.set_data(zk.partition_state_path(tp), zk.encode_partition_state(state),
                         version=expected_version)
            results = txn.commit()
            gone = [b for b, result in zip(joining, results) if isinstance(result, NoNodeError)]
            if gone:
                raise IneligibleReplicaError(
                    f"Broker(s) {gone} are not registered, so they cannot join the ISR of {tp}.")
            if isinstance(results[-1], BadVersionError):
                raise StaleStateError(f"The state of {tp} is no longer at version {expected_version}.")
            if isinstance(results[-1], NoNodeError):
                raise UnknownTopicOrPartitionError(f"Partition {tp} does not exist.")
            _raise_first(results)
            return results[-1].version

    # -- partition reassignment (server/partition_reassignment.py drives it) --------------------
    def topic_reassignment(self, name: str) -> zk.TopicReassignment | None:
        """A topic's assignment with its ongoing reassignments (None if the topic is gone)."""
        with self._errors():
            try:
                data, stat = self._client.get(zk.topic_path(name))
            except NoNodeError:
                return None
            return zk.decode_topic_reassignment(name, data, stat.version)

    def write_reassignment(self, reassignment: zk.TopicReassignment,
                           states: dict[TopicPartition, PartitionState], *,
                           expected_versions: dict[TopicPartition, int]) -> None:
        """A reassignment step of the controller: the topic znode (assignment, adding and removing
        replicas) and the partitions' new states, in one fenced multi conditional on the topic
        version and the state versions they were decided on; StaleStateError when one moved."""
        with self._errors():
            epoch = self._controller_epoch
            txn = self._controller_txn()
            txn.set_data(zk.topic_path(reassignment.name),
                         zk.encode_topic(reassignment.topic_id or new_topic_id(), reassignment.assignment,
                                         adding=reassignment.adding, removing=reassignment.removing),
                         version=reassignment.zk_version)
            for tp, state in sorted(states.items()):
                txn.set_data(zk.partition_state_path(tp),
                             zk.encode_partition_state(dataclasses.replace(state, controller_epoch=epoch)),
                             version=expected_versions[tp])
            results = self._commit(txn, fenced=True)
            if any(isinstance(r, (BadVersionError, NoNodeError)) for r in results[1:]):
                raise StaleStateError(f"Topic '{reassignment.name}' or a partition state changed "
                                      "while its reassignment was being written.")
            _raise_first(results)

    # -- producer ids -------------------------------------------------------------------------
    def claim_producer_id_block(self, size: int) -> int:
        """Claim the next `size` producer ids; returns the first. A setData conditional on the
        block znode's version, retried on conflict: two brokers never get overlapping blocks."""
        with self._errors():
            while True:
                data, stat = self._client.get(zk.PRODUCER_ID_BLOCK)
                latest = zk.decode_producer_id_block(data)
                first = latest.last_producer_id + 1 if latest else 0
                if first > (1 << 63) - 1 - size:
                    raise KafkaError("Producer ids are exhausted.")
                block = zk.ProducerIdBlock(self.broker_id, first, first + size - 1)
                try:
                    self._client.set(zk.PRODUCER_ID_BLOCK, zk.encode_producer_id_block(block),
                                     version=stat.version)
                    return first
                except BadVersionError:
                    continue

    # -- watches ------------------------------------------------------------------------------
    # Each callback runs on kazoo's callback thread: once at once with the current value, then at
    # every change, until the Watch is cancelled. Hop to the event loop before touching broker state.
    def watch_brokers(self, callback: Callable[[list[int]], None]) -> Watch:
        return self._children_watch(zk.BROKER_IDS, lambda c: callback(sorted(int(i) for i in c)))

    def watch_topics(self, callback: Callable[[list[str]], None]) -> Watch:
        return self._children_watch(zk.TOPICS, lambda c: callback(sorted(c)))

    def watch_topic_deletions(self, callback: Callable[[list[str]], None]) -> Watch:
        return self._children_watch(zk.DELETE_TOPICS, lambda c: callback(sorted(c)))

    def watch_topic(self, name: str, callback: Callable[[bool], None]) -> Watch:
        """`callback(exists)` whenever `/brokers/topics/<topic>` is written (partitions added)."""
        return self._data_watch(zk.topic_path(name), lambda data, stat: stat is not None, callback)

    def watch_config_changes(self, callback: Callable[[list[str]], None]) -> Watch:
        """`callback(names)` with every notification under `/config/changes`, oldest first."""
        return self._children_watch(zk.CONFIG_CHANGES, lambda c: callback(sorted(c)))

    def watch_partition_state(self, tp: TopicPartition,
                              callback: Callable[[VersionedPartitionState | None], None]) -> Watch:
        """`callback(None)` while the state znode does not exist (not yet created, or deleted)."""
        def decode(data, stat):
            return None if stat is None else VersionedPartitionState(zk.decode_partition_state(data),
                                                                     stat.version, stat.mzxid)
        return self._data_watch(zk.partition_state_path(tp), decode, callback)

    def watch_controller(self, callback: Callable[[int | None], None]) -> Watch:
        """`callback(broker_id)`, or `callback(None)` when there is no controller: then call
        `elect_controller()` (from a thread that may block)."""
        return self._data_watch(zk.CONTROLLER, lambda data, stat: None if stat is None
                                else zk.decode_controller(data), callback)

    def _children_watch(self, path: str, callback: Callable[[list[str]], None]) -> Watch:
        watch = Watch()

        def on_children(children):
            if watch.cancelled:
                return False
            _run_callback(callback, children)
        with self._errors():
            ChildrenWatch(self._client, path, on_children)
        return watch

    def _data_watch(self, path: str, decode, callback) -> Watch:
        watch = Watch()

        def on_data(data, stat):
            if watch.cancelled:
                return False
            _run_callback(callback, decode(data, stat))
        with self._errors():
            DataWatch(self._client, path, on_data)
        return watch

    # -- errors -------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        """The one place kazoo's connection errors become ours."""
        try:
            yield
        except (ConnectionLoss, SessionExpiredError, OperationTimeoutError, KazooTimeoutError) as exc:
            raise ZooKeeperUnavailableError(
                f"ZooKeeper is unavailable ({type(exc).__name__}); the request can be retried.") from exc


def ensure_chroot(connect: str, *, timeout_s: float = 18.0) -> None:
    """Create the chroot of a connect string (`host:port/kafka`) if missing, as Kafka's broker
    does at startup; kazoo cannot work in a chroot that does not exist."""
    hosts, slash, chroot = connect.partition("/")
    if not slash or not chroot.strip("/"):
        return
    client = KazooClient(hosts=hosts)
    try:
        client.start(timeout=timeout_s)
        client.ensure_path("/" + chroot.strip("/"))
    finally:
        client.stop()
        client.close()


def _failed(results: list) -> bool:
    return any(isinstance(r, Exception) for r in results)


def _raise_first(results: list) -> None:
    """Raise, as one of ours, the error of the op that failed a multi() (the ops before it say
    RolledBackError, those after it RuntimeInconsistency)."""
    for result in results:
        if isinstance(result, (RolledBackError, RuntimeInconsistency)) or not isinstance(result, Exception):
            continue
        if isinstance(result, NoNodeError):
            raise UnknownTopicOrPartitionError(
                "A topic or partition was deleted while it was being written.") from result
        if isinstance(result, (BadVersionError, NodeExistsError, NotEmptyError)):
            raise StaleStateError("Cluster metadata changed while it was being written; re-read it.") from result
        raise KafkaError(f"ZooKeeper refused a metadata write: {result!r}") from result


def _run_callback(callback: Callable, value) -> None:
    try:
        callback(value)
    except Exception:  # a failing callback must not kill kazoo's watch
        log.exception("ZooKeeper watch callback failed")
