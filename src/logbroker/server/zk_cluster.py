"""A broker's membership of a ZooKeeper cluster: registration, watches, and the controller's work.

architecture.md §5. Brokers learn everything by watching ZooKeeper — there are no controller-to-broker
RPCs: the broker list and topic list feed the MetadataCache, and a watch on every partition's state
znode feeds it too and makes this broker lead or follow the partitions it hosts, acting only on a
leader epoch newer than the one it holds.

Threads. Watch callbacks run on kazoo's callback thread and must not block, so they only hand
work on: cache updates and leadership changes go to the event loop (`call_soon_threadsafe`), and
anything that reads or writes ZooKeeper goes to one worker thread (`self._worker`). That one
thread also serialises the controller's work, so two controller events never interleave — the
same reason Kafka's controller has a single event queue.

The controller (whichever broker won `/controller`) reacts to four events, each by one scan of
every partition (`_elect_partitions`): it became controller, the broker list changed, the topic
list changed, a broker's log dir failed. A partition without a state gets one (leader = first live replica, ISR = the live
replicas, epoch 0); a partition whose leader is live loses its dead followers from the ISR (Kafka's
OfflineReplica); a partition whose leader is not live gets a new leader from the live members
of its ISR (with unclean.leader.election.enable any live replica), its epoch bumped and the dead
brokers dropped from the ISR, or — with no candidate — leader -1 and the ISR kept, so the last
in-sync replica takes over when it comes back. Every write is fenced by the controller epoch and
conditional on the version the decision was based on; a stale read is re-read and retried.
A broker's failed log dir (server/log_dir_failures.py) makes it dead, in those scans, for the
partitions that dir held. On the same worker thread run ElectLeaders and the periodic preferred-leader rebalance
(replica_elections.py) and partition reassignments (partition_reassignment.py).
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor

from logbroker.errors import DuplicateBrokerRegistrationError, KafkaError
from logbroker.metadata.metadata_cache import MetadataCache
from logbroker.metadata.zk_config_changes import ConfigChangeListener
from logbroker.metadata.model import BrokerInfo, PartitionState
from logbroker.metadata.zookeeper_store import (
    ControllerMovedError,
    StaleStateError,
    VersionedPartitionState,
    Watch,
    ZooKeeperMetadataStore,
)
from logbroker.server.log_dir_failures import LogDirFailures
from logbroker.server.partition_reassignment import PartitionReassignments, apply_assignment
from logbroker.server.replica_elections import auto_rebalance_every
from logbroker.server.topic_admin import apply_topic_configs
from logbroker.types import TopicPartition

log = logging.getLogger("kafka.controller.KafkaController")


class ZooKeeperCluster:
    def __init__(self, broker, zk: ZooKeeperMetadataStore, cache: MetadataCache) -> None:
        self.broker = broker
        self.broker_id = broker.broker_id
        self.zk = zk
        self.cache = cache
        self.loop: asyncio.AbstractEventLoop | None = None
        self._worker = ThreadPoolExecutor(1, thread_name_prefix="zk-cluster")
        self._watches: list[Watch] = []
        self._state_watches: dict[TopicPartition, Watch] = {}
        self._topic_watches: dict[str, Watch] = {}
        self._config_changes = ConfigChangeListener(zk, {
            "topics": self._on_topic_config_change,
            "brokers": self._on_broker_config_change,
            "users": lambda name: self._on_quota_config_change(f"users/{name}"),
            "clients": lambda name: self._on_quota_config_change(f"clients/{name}"),
            "client-metrics": self._on_client_metrics_change,
        }, clock=broker.clock)
        self._known_topics: set[str] = set()  # worker thread only
        self._closed = False
        self._rebalance_task: asyncio.Task | None = None
        self.reassignments = PartitionReassignments(zk)
        self.log_dir_failures = LogDirFailures(self)

    # -- lifecycle ----------------------------------------------------------------------------
    async def start(self, advertised: BrokerInfo, endpoints: list[str], *,
                    security_protocol_map: dict[str, str] | None = None) -> None:
        """Register this broker, fill the cache, and set the watches (controller election
        included). Runs after the listeners are bound: the registration carries their port.
        Returns once the cache holds every broker, topic and partition state read from ZooKeeper
        at start, so the broker may then serve clients from it."""
        self.loop = asyncio.get_running_loop()
        await self._register(advertised, endpoints, security_protocol_map)
        await self._run(self._initial_load)
        self._watches.append(await self._run(self.zk.watch_brokers, self._from_kazoo(self._on_brokers)))
        self._watches.append(await self._run(self.zk.watch_topics, self._from_kazoo(self._on_topics)))
        self._watches.append(await self._run(self.zk.watch_topic_deletions,
                                             self._from_kazoo(self._on_topic_deletions)))
        self._watches.append(await self._run(self.zk.watch_controller, self._from_kazoo(self._on_controller)))
        self._watches.append(await self._run(self.zk.watch_config_changes,
                                             self._from_kazoo(self._config_changes.process)))
        self._watches.append(await self._run(self.zk.watch_log_dir_events,
                                             self._from_kazoo(self._on_log_dir_events)))
        # Each watch reports its current value at once, on the worker: the topic watch queues
        # `_on_topics` there, which reads every partition's state and queues it for the event
        # loop. Once the worker has run what was queued before this no-op, and the event loop the
        # cache updates queued before its answer, the cache is complete.
        await self._run(lambda: None)
        config = self.broker.config
        if config.auto_leader_rebalance_enable:
            self._rebalance_task = self.loop.create_task(auto_rebalance_every(
                self, interval_s=config.leader_imbalance_check_interval_seconds,
                imbalance_percentage=config.leader_imbalance_per_broker_percentage))

    async def _register(self, advertised: BrokerInfo, endpoints: list[str],
                        security_protocol_map: dict[str, str] | None) -> None:
        # After a crash, our previous session's registration stays until ZooKeeper expires that
        # session (zookeeper.session.timeout.ms): wait it out instead of failing the start.
        deadline = self.loop.time() + self.broker.config.zookeeper_session_timeout_ms / 1000 + 2
        while True:
            try:
                await self._run(self.zk.register_broker, advertised, endpoints=endpoints,
                                security_protocol_map=security_protocol_map)
                return
            except DuplicateBrokerRegistrationError as exc:
                if self.loop.time() > deadline:
                    raise
                log.info("%s; waiting for that session to expire", exc)
                await asyncio.sleep(0.5)

    async def close(self) -> None:
        """Stop the watches and end the ZooKeeper session (its ephemeral znodes go with it)."""
        self._closed = True
        if self._rebalance_task is not None:
            self._rebalance_task.cancel()
        for watch in [*self._watches, *self._state_watches.values(), *self._topic_watches.values()]:
            watch.cancel()
        timeout_ms = self.broker.config.request_timeout_ms
        try:
            await asyncio.wait_for(self._run(self.zk.resign_controller), timeout_ms / 1000)
        except KafkaError as exc:
            log.warning("Could not resign as controller: %s", exc)
        except asyncio.TimeoutError:
            log.warning("Could not resign as controller: ZooKeeper did not answer within "
                        "request.timeout.ms (%d ms)", timeout_ms)
        # Not on the worker, which may still wait on an unreachable ZooKeeper: ending the session
        # fails every request still waiting, which frees the worker and any other thread.
        closer = ThreadPoolExecutor(1, thread_name_prefix="zk-close")
        try:
            await self.loop.run_in_executor(closer, self.zk.close)
        finally:
            closer.shutdown(wait=False)
        self._worker.shutdown(wait=False, cancel_futures=True)

    async def _run(self, fn, *args, **kwargs):
        return await self.loop.run_in_executor(self._worker, lambda: fn(*args, **kwargs))

    async def run_on_worker(self, fn, *args, **kwargs):
        """Run `fn` on the worker thread, after the controller events queued before it and never
        interleaved with them (ElectLeaders, the leader rebalance, reassignments)."""
        return await self._run(fn, *args, **kwargs)

    def _from_kazoo(self, handler):
        """A kazoo watch callback that queues `handler(value)` on the worker thread."""
        def callback(value) -> None:
            if not self._closed:
                self._worker.submit(self._guarded, handler, value)
        return callback

    @staticmethod
    def _guarded(handler, value) -> None:
        try:
            handler(value)
        except ControllerMovedError as exc:
            log.info("%s", exc)
        except Exception:  # noqa: BLE001 - a failed event must not stop later ones
            log.exception("Cluster event %s failed", getattr(handler, "__name__", handler))

    def _on_loop(self, fn, *args) -> None:
        self.loop.call_soon_threadsafe(fn, *args)

    # -- worker-thread handlers (may block on ZooKeeper) ----------------------------------------
    def _on_client_metrics_change(self, sanitized_name: str) -> None:
        from logbroker.metadata.sanitizer import desanitize
        name = desanitize(sanitized_name)
        configs = self.zk.client_metrics_config(name)
        self._on_loop(self.broker.client_telemetry.apply_change, name, configs)

    def _initial_load(self) -> None:
        brokers = self.zk.brokers()
        topics = self.zk.topics()
        self._on_loop(self._set_brokers, brokers)
        for info in topics.values():
            self._on_loop(self.cache.put_topic, info)

    def _on_brokers(self, _ids: list[int]) -> None:
        brokers = self.zk.brokers()
        self._on_loop(self._set_brokers, brokers)
        if self.zk.is_controller:
            self._elect_partitions(set(brokers))

    def _on_topics(self, names: list[str]) -> None:
        wanted = set(names)
        for name in sorted(wanted - self._known_topics):
            info = self.zk.topic(name)
            if info is None:
                continue
            self._known_topics.add(name)
            self._watch_partitions(info)
            self._topic_watches[name] = self.zk.watch_topic(
                name, self._from_kazoo(lambda exists, name=name: self._on_topic_changed(name, exists)))
        for name in self._known_topics - wanted:
            self._known_topics.discard(name)
            self._topic_watches.pop(name).cancel()
            for tp in [tp for tp in self._state_watches if tp.topic == name]:
                self._state_watches.pop(tp).cancel()
        self._on_loop(self._forget_topics, wanted)
        if self.zk.is_controller:
            self._elect_partitions(set(self.zk.brokers()))

    def _watch_partitions(self, info) -> None:
        """Cache `info`, then watch the state of each of its partitions not watched yet."""
        self._on_loop(self.cache.put_topic, info)
        for partition in sorted(info.assignment):
            tp = TopicPartition(info.name, partition)
            if tp in self._state_watches:
                continue
            # The watch reports the current state at once (on this thread), then each change.
            self._state_watches[tp] = self.zk.watch_partition_state(
                tp, lambda versioned, tp=tp: self._on_loop(self._apply_state, tp, versioned))

    def _on_topic_changed(self, name: str, exists: bool) -> None:
        """A topic's assignment was rewritten (partitions added: Kafka's PartitionModifications):
        watch the new partitions, and as controller give them leaders."""
        if not exists or name not in self._known_topics:
            return
        info = self.zk.topic(name)
        if info is None:
            return
        if all(TopicPartition(name, p) in self._state_watches for p in info.assignment):
            self._on_loop(apply_assignment, self.broker, info)  # replicas moved (a reassignment)
            return
        log.info("Topic %s now has %d partition(s)", name, info.num_partitions)
        self._watch_partitions(info)
        if self.zk.is_controller:
            self._elect_partitions(set(self.zk.brokers()))

    def _on_topic_config_change(self, name: str) -> None:
        self._on_loop(apply_topic_configs, self.broker, name, self.zk.topic_configs(name))

    def _on_broker_config_change(self, entity: str) -> None:
        """The cluster default's or this broker's dynamic configs changed: re-read and apply them."""
        from logbroker.server.broker_configs import apply_stored
        from logbroker.server.dynamic_config import DEFAULT_ENTITY
        if entity in (DEFAULT_ENTITY, str(self.broker_id)):
            self._on_loop(apply_stored, self.broker, entity, self.zk.broker_configs(entity))

    def _on_quota_config_change(self, path: str) -> None:
        """A user's, client's or user/client's config changed: re-read it (client quotas)."""
        if self.broker.quota_store is None:
            return
        config = self.broker.quota_store.read_entity(path)
        self._on_loop(self.broker.client_quotas.update_entity, path, config)

    def _on_topic_deletions(self, names: list[str]) -> None:
        if not self.zk.is_controller:
            return
        for name in names:
            try:
                self.zk.delete_topic(name)
                log.info("Deleted topic %s", name)
            except StaleStateError:
                self._worker.submit(self._guarded, self._on_topic_deletions, [name])
            except KafkaError as exc:
                log.warning("Could not delete topic %s: %s", name, exc)

    def _on_controller(self, controller_id: int | None) -> None:
        if controller_id is None:
            if self.zk.elect_controller() is not None:
                controller_id = self.broker_id
                log.info("Broker %d became controller at epoch %s", self.broker_id, self.zk.controller_epoch)
                self._on_loop(setattr, self.cache, "controller_id", controller_id)
                self.log_dir_failures.handle(self.log_dir_failures.pending)
                self._elect_partitions(set(self.zk.brokers()))
                self._on_topic_deletions(self.zk.topics_to_delete())
                self.reassignments.resume()
                return
            controller_id = self.zk.controller_id()
        self._on_loop(setattr, self.cache, "controller_id", controller_id)

    def _on_log_dir_events(self, names: list[str]) -> None:
        """Log dir failure notices (server/log_dir_failures.py): the controller moves what the
        failed dirs held; the others remember them in case they become controller."""
        self.log_dir_failures.pending = names
        if self.zk.is_controller and self.log_dir_failures.handle(names):
            self._elect_partitions(set(self.zk.brokers()))

    def notify_log_dir_failure(self) -> None:
        """Leave this broker's log dir failure notice for the controller. Event loop."""
        self._worker.submit(self._guarded, lambda _: self.zk.notify_log_dir_failure(self.broker_id), None)

    # -- the controller's election ------------------------------------------------------------
    def _elect_partitions(self, live: set[int]) -> None:
        """One pass over every partition: give each a live leader from its ISR where it has none.
        A broker whose replica of a partition is in a failed log dir counts as dead for it."""
        broker_epochs = self.zk.broker_epochs()
        for name, info in self.zk.topics().items():
            for partition, replicas in sorted(info.assignment.items()):
                tp = TopicPartition(name, partition)
                available = live - self.log_dir_failures.offline_brokers(tp, broker_epochs)
                for _attempt in range(5):
                    try:
                        self._elect_one(tp, replicas, available, broker_epochs)
                        break
                    except StaleStateError:
                        continue  # the leader changed the ISR meanwhile: decide again on a fresh read

    def _elect_one(self, tp: TopicPartition, replicas: tuple[int, ...], live: set[int],
                   broker_epochs: dict[int, int]) -> None:
        versioned = self.zk.partition_state_with_version(tp)
        if versioned is None:
            live_replicas = tuple(r for r in replicas if r in live)
            state = PartitionState(live_replicas[0] if live_replicas else -1, 0, live_replicas)
            self.zk.set_partition_states({tp: state})
            log.info("Elected %s for new partition %s", state, tp)
            return
        old = versioned.state
        # Kafka's bounced brokers: an ISR member whose registration (broker epoch) is newer than
        # this state restarted after it was written — maybe with less than it had (a wiped disk)
        # — and before this controller saw it gone. It counts as dead: it leaves the ISR, and
        # leadership moves off it unless it is the only in-sync replica left.
        restarted = {r for r in old.isr if versioned.modified_zxid >= 0
                     and broker_epochs.get(r, -1) > versioned.modified_zxid}
        in_sync = live - restarted
        if old.leader in in_sync:
            self._drop_dead_followers(tp, versioned, in_sync)
            return
        candidates = ([r for r in replicas if r in old.isr and r in in_sync]
                      or [r for r in replicas if r in restarted])
        if not candidates and self.broker.config.unclean_leader_election_enable:  # dynamic: read each time
            candidates = [r for r in replicas if r in live]
            if candidates:
                log.warning("Unclean leader election for %s: broker %d was not in the ISR %s",
                            tp, candidates[0], list(old.isr))
        if candidates:
            isr = tuple(r for r in old.isr if r in in_sync) or (candidates[0],)
            state = PartitionState(candidates[0], old.leader_epoch + 1, isr)
        elif old.leader == -1:
            return
        else:
            # No live in-sync replica: no leader, and the ISR kept, so that its last member
            # takes over when it returns (Kafka's behaviour without unclean election).
            state = PartitionState(-1, old.leader_epoch + 1, old.isr)
        self.zk.set_partition_states({tp: state}, expected_versions={tp: versioned.zk_version})
        log.info("Elected leader %d for %s at leader epoch %d (ISR %s)", state.leader, tp,
                 state.leader_epoch, list(state.isr))

    def _drop_dead_followers(self, tp: TopicPartition, versioned: VersionedPartitionState, live: set[int]) -> None:
        """Kafka's OfflineReplica transition: a dead broker leaves the ISR of the partitions it
        follows as soon as the controller sees its registration go, with the leader epoch bumped
        so that every replica acts on it. Left to the leader, it would stay for
        replica.lag.time.max.ms: acks=-1 would stall that long, and a broker restarted with an
        empty log in that window could be elected leader from the ISR."""
        old = versioned.state
        isr = tuple(r for r in old.isr if r in live)
        if isr == old.isr or not isr:
            return
        state = PartitionState(old.leader, old.leader_epoch + 1, isr)
        self.zk.set_partition_states({tp: state}, expected_versions={tp: versioned.zk_version})
        log.info("Removed dead or restarted broker(s) %s from the ISR of %s at leader epoch %d (ISR %s)",
                 sorted(set(old.isr) - set(isr)), tp, state.leader_epoch, list(isr))

    # -- the partition leader's ISR changes (architecture.md §5: conditional on the state's version)
    def alter_isr(self, partition, new_isr: tuple[int, ...]) -> None:
        """Write `new_isr` for a partition led here (event loop). The change is pending until
        written; a stale version drops it, and the state watch brings the fresh one to retry on.
        Only registered brokers join (Kafka's isReplicaIsrEligible): here as the cache sees them,
        and again in the write itself, for a registration that went since the cache heard."""
        tp = partition.tp
        cached = self.cache.partition_state(tp)
        version = self.cache.partition_state_version(tp)
        registered = self.cache.brokers()
        new_isr = tuple(r for r in new_isr if r in partition.isr or r in registered)
        if cached is None or version is None or new_isr == partition.isr:
            return
        partition.pending_isr = new_isr
        state = PartitionState(self.broker_id, partition.leader_epoch, new_isr, cached.controller_epoch)
        joining = tuple(r for r in new_isr if r not in partition.isr)
        self._worker.submit(self._write_isr, partition, state, version, joining)

    def _write_isr(self, partition, state: PartitionState, version: int, joining: tuple[int, ...]) -> None:
        try:
            new_version = self.zk.update_isr(partition.tp, state, expected_version=version, joining=joining)
        except KafkaError as exc:
            log.info("ISR change of %s to %s not written: %s", partition.tp, list(state.isr), exc)
            new_version = None
        self._on_loop(self._isr_written, partition, state, new_version)

    def _isr_written(self, partition, state: PartitionState, version: int | None) -> None:
        if partition.pending_isr != state.isr or partition.leader_epoch != state.leader_epoch:
            return
        partition.pending_isr = None
        if version is not None:
            log.info("ISR of %s is now %s", partition.tp, list(state.isr))
            partition.isr = state.isr
            if (self.cache.partition_state_version(partition.tp) or -1) < version:
                self.cache.set_partition_state(partition.tp, state, version)
        self.broker.replica_manager.on_isr_changed(partition)

    # -- event-loop side ------------------------------------------------------------------------
    def _set_brokers(self, brokers: dict[int, BrokerInfo]) -> None:
        self.cache.set_brokers(brokers)
        self.broker.controller.live_brokers[:] = sorted(brokers)

    def _forget_topics(self, wanted: set[str]) -> None:
        for name in [n for n in self.cache.topics() if n not in wanted]:
            info = self.cache.remove_topic(name)
            hosted = [tp for tp in (TopicPartition(name, p) for p in info.assignment)
                      if tp in self.broker.replica_manager.partitions]
            self.broker.replica_manager.stop_replicas(hosted, delete=True)
            self.broker.topic_deleted(info)
            log.info("Topic %s was deleted", name)

    def _apply_state(self, tp: TopicPartition, versioned: VersionedPartitionState | None) -> None:
        """A partition's state znode changed: cache it, and lead or follow on a newer epoch."""
        if versioned is None:
            self.cache.set_partition_state(tp, None)
            return
        state = versioned.state
        self.cache.set_partition_state(tp, state, versioned.zk_version)
        if tp in self.reassignments.in_progress and self.zk.is_controller and not self._closed:
            self._worker.submit(self._guarded, self.reassignments.maybe_complete, tp)
        info = self.cache.topic(tp.topic)
        if info is None or tp.partition not in info.assignment:
            return
        replicas = info.assignment[tp.partition]
        if self.broker_id not in replicas:
            return
        if state.leader == self.broker_id and 0 <= versioned.modified_zxid < self.zk.registered_broker_epoch:
            # Leadership from before this broker (re)registered: its log may have lost what it had
            # (a wiped disk) and the controller has not decided since. Only the controller makes a
            # returning broker leader (Kafka's LeaderAndIsr after a restart): wait for its write.
            log.info("Not leading %s at leader epoch %d from before this broker registered; waiting "
                     "for the controller", tp, state.leader_epoch)
            return
        self.broker.apply_partition_state(tp, state, info)
