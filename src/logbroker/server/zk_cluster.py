"""A broker's membership of a ZooKeeper cluster: registration, watches, and the controller's work.

DESIGN.md §5. Brokers learn everything by watching ZooKeeper — there are no controller-to-broker
RPCs: the broker list and topic list feed the MetadataCache, and a watch on every partition's state
znode feeds it too and makes this broker lead or follow the partitions it hosts, acting only on a
leader epoch newer than the one it holds.

Threads. Watch callbacks run on kazoo's callback thread and must not block, so they only hand
work on: cache updates and leadership changes go to the event loop (`call_soon_threadsafe`), and
anything that reads or writes ZooKeeper goes to one worker thread (`self._worker`). That one
thread also serialises the controller's work, so two controller events never interleave — the
same reason Kafka's controller has a single event queue.

The controller (whichever broker won `/controller`) reacts to three events, each by one scan of
every partition (`_elect_partitions`): it became controller, the broker list changed, the topic
list changed. A partition without a state gets one (leader = first live replica, ISR = the live
replicas, epoch 0); a partition whose leader is not live gets a new leader from the live members
of its ISR (with unclean.leader.election.enable any live replica), its epoch bumped and the dead
brokers dropped from the ISR, or — with no candidate — leader -1 and the ISR kept, so the last
in-sync replica takes over when it comes back. Every write is fenced by the controller epoch and
conditional on the version the decision was based on; a stale read is re-read and retried.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor

from logbroker.errors import DuplicateBrokerRegistrationError, KafkaError
from logbroker.metadata.metadata_cache import MetadataCache
from logbroker.metadata.model import BrokerInfo, PartitionState
from logbroker.metadata.zookeeper_store import (
    ControllerMovedError,
    StaleStateError,
    VersionedPartitionState,
    Watch,
    ZooKeeperMetadataStore,
)
from logbroker.types import TopicPartition

log = logging.getLogger("kafka.controller.KafkaController")


class ZooKeeperCluster:
    def __init__(self, broker, zk: ZooKeeperMetadataStore, cache: MetadataCache) -> None:
        self.broker = broker
        self.broker_id = broker.broker_id
        self.zk = zk
        self.cache = cache
        self.unclean_leader_election = broker.config.unclean_leader_election_enable
        self.loop: asyncio.AbstractEventLoop | None = None
        self._worker = ThreadPoolExecutor(1, thread_name_prefix="zk-cluster")
        self._watches: list[Watch] = []
        self._state_watches: dict[TopicPartition, Watch] = {}
        self._known_topics: set[str] = set()  # worker thread only
        self._closed = False

    # -- lifecycle ----------------------------------------------------------------------------
    async def start(self, advertised: BrokerInfo, endpoints: list[str]) -> None:
        """Register this broker, fill the cache, and set the watches (controller election
        included). Runs after the listeners are bound: the registration carries their port."""
        self.loop = asyncio.get_running_loop()
        await self._register(advertised, endpoints)
        await self._run(self._initial_load)
        self._watches.append(await self._run(self.zk.watch_brokers, self._from_kazoo(self._on_brokers)))
        self._watches.append(await self._run(self.zk.watch_topics, self._from_kazoo(self._on_topics)))
        self._watches.append(await self._run(self.zk.watch_topic_deletions,
                                             self._from_kazoo(self._on_topic_deletions)))
        self._watches.append(await self._run(self.zk.watch_controller, self._from_kazoo(self._on_controller)))

    async def _register(self, advertised: BrokerInfo, endpoints: list[str]) -> None:
        # After a crash, our previous session's registration stays until ZooKeeper expires that
        # session (zookeeper.session.timeout.ms): wait it out instead of failing the start.
        deadline = self.loop.time() + self.broker.config.zookeeper_session_timeout_ms / 1000 + 2
        while True:
            try:
                await self._run(self.zk.register_broker, advertised, endpoints=endpoints)
                return
            except DuplicateBrokerRegistrationError as exc:
                if self.loop.time() > deadline:
                    raise
                log.info("%s; waiting for that session to expire", exc)
                await asyncio.sleep(0.5)

    async def close(self) -> None:
        """Stop the watches and end the ZooKeeper session (its ephemeral znodes go with it)."""
        self._closed = True
        for watch in [*self._watches, *self._state_watches.values()]:
            watch.cancel()
        try:
            await self._run(self.zk.resign_controller)
        except KafkaError as exc:
            log.warning("Could not resign as controller: %s", exc)
        await self._run(self.zk.close)
        self._worker.shutdown(wait=False, cancel_futures=True)

    async def _run(self, fn, *args, **kwargs):
        return await self.loop.run_in_executor(self._worker, lambda: fn(*args, **kwargs))

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
            self._on_loop(self.cache.put_topic, info)
            for partition in sorted(info.assignment):
                tp = TopicPartition(name, partition)
                # The watch reports the current state at once (on this thread), then each change.
                self._state_watches[tp] = self.zk.watch_partition_state(
                    tp, lambda versioned, tp=tp: self._on_loop(self._apply_state, tp, versioned))
        for name in self._known_topics - wanted:
            self._known_topics.discard(name)
            for tp in [tp for tp in self._state_watches if tp.topic == name]:
                self._state_watches.pop(tp).cancel()
        self._on_loop(self._forget_topics, wanted)
        if self.zk.is_controller:
            self._elect_partitions(set(self.zk.brokers()))

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
                self._elect_partitions(set(self.zk.brokers()))
                self._on_topic_deletions(self.zk.topics_to_delete())
                return
            controller_id = self.zk.controller_id()
        self._on_loop(setattr, self.cache, "controller_id", controller_id)

    # -- the controller's election ------------------------------------------------------------
    def _elect_partitions(self, live: set[int]) -> None:
        """One pass over every partition: give each a live leader from its ISR where it has none."""
        for name, info in self.zk.topics().items():
            for partition, replicas in sorted(info.assignment.items()):
                tp = TopicPartition(name, partition)
                for _attempt in range(5):
                    try:
                        self._elect_one(tp, replicas, live)
                        break
                    except StaleStateError:
                        continue  # the leader changed the ISR meanwhile: decide again on a fresh read

    def _elect_one(self, tp: TopicPartition, replicas: tuple[int, ...], live: set[int]) -> None:
        versioned = self.zk.partition_state_with_version(tp)
        if versioned is None:
            live_replicas = tuple(r for r in replicas if r in live)
            state = PartitionState(live_replicas[0] if live_replicas else -1, 0, live_replicas)
            self.zk.set_partition_states({tp: state})
            log.info("Elected %s for new partition %s", state, tp)
            return
        old = versioned.state
        if old.leader in live:
            return
        candidates = [r for r in replicas if r in old.isr and r in live]
        if not candidates and self.unclean_leader_election:
            candidates = [r for r in replicas if r in live]
            if candidates:
                log.warning("Unclean leader election for %s: broker %d was not in the ISR %s",
                            tp, candidates[0], list(old.isr))
        if candidates:
            isr = tuple(r for r in old.isr if r in live) or (candidates[0],)
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

    # -- the partition leader's ISR changes (DESIGN.md §5: conditional on the state's version) ---
    def alter_isr(self, partition, new_isr: tuple[int, ...]) -> None:
        """Write `new_isr` for a partition led here (event loop). The change is pending until
        written; a stale version drops it, and the state watch brings the fresh one to retry on."""
        tp = partition.tp
        cached = self.cache.partition_state(tp)
        version = self.cache.partition_state_version(tp)
        if cached is None or version is None:
            return
        partition.pending_isr = new_isr
        state = PartitionState(self.broker_id, partition.leader_epoch, new_isr, cached.controller_epoch)
        self._worker.submit(self._write_isr, partition, state, version)

    def _write_isr(self, partition, state: PartitionState, version: int) -> None:
        try:
            new_version = self.zk.update_isr(partition.tp, state, expected_version=version)
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
            for partition in info.assignment:
                tp = TopicPartition(name, partition)
                if tp in self.broker.replica_manager.partitions:
                    self.broker.replica_manager.stop_replica(tp, delete=True)
            log.info("Topic %s was deleted", name)

    def _apply_state(self, tp: TopicPartition, versioned: VersionedPartitionState | None) -> None:
        """A partition's state znode changed: cache it, and lead or follow on a newer epoch."""
        if versioned is None:
            self.cache.set_partition_state(tp, None)
            return
        state = versioned.state
        self.cache.set_partition_state(tp, state, versioned.zk_version)
        info = self.cache.topic(tp.topic)
        if info is None or tp.partition not in info.assignment:
            return
        replicas = info.assignment[tp.partition]
        if self.broker_id not in replicas:
            return
        self.broker.apply_partition_state(tp, state, info)
