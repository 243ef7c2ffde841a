"""The metadata store of a cluster: Apache ZooKeeper, through kazoo, in Kafka's znode layout.

`ZooKeeperMetadataStore` has the interface of `LocalMetadataStore` (topics, assignments, configs,
partition states, producer-id blocks, the cluster id) plus what only a cluster needs: broker
registration, controller election, the partition leader's conditional ISR write, and watches.
The znodes and their JSON are Kafka 3.9's (see `zk_data.py`), so Kafka's tools read our cluster.

The class is made of one part per concept, each in its own module over the shared session
(zk_session.py: the kazoo client, watches, kazoo's errors mapped to ours): broker registration
(zk_brokers.py), controller election and fencing (zk_controller.py), topics and reassignment
(zk_topics.py), partition states and the ISR (zk_partition_states.py), config overrides and
their change notifications (zk_configs.py), log dir failure notices (zk_log_dir_events.py). This module keeps the session's lifecycle, the
cluster id and producer-id blocks, and is where the rest of logbroker imports all of it from.

Who may write what (architecture.md §5), and how a stale writer is stopped — ZooKeeper refuses nothing by
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

import logging
import uuid

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.retry import KazooRetry

from logbroker.clock import Clock, SystemClock
from logbroker.errors import KafkaError
from logbroker.metadata import zk_data as zk
from logbroker.metadata.model import BrokerInfo, topic_id_to_str
from logbroker.metadata.zk_brokers import ZkBrokers
from logbroker.metadata.zk_configs import ZkConfigs
from logbroker.metadata.zk_controller import ControllerMovedError
from logbroker.metadata.zk_log_dir_events import ZkLogDirEvents
from logbroker.metadata.zk_partition_states import VersionedPartitionState, ZkPartitionStates
from logbroker.metadata.zk_session import StaleStateError, Watch, ZooKeeperUnavailableError, ensure_chroot
from logbroker.metadata.zk_topics import ZkTopics

__all__ = [
    "ControllerMovedError",
    "StaleStateError",
    "VersionedPartitionState",
    "Watch",
    "ZooKeeperMetadataStore",
    "ZooKeeperUnavailableError",
    "ensure_chroot",
]

log = logging.getLogger(__name__)


class ZooKeeperMetadataStore(ZkBrokers, ZkTopics, ZkPartitionStates, ZkConfigs, ZkLogDirEvents):
    """The cluster metadata store: the session's lifecycle and cluster id, producer-id blocks, and
    the parts it is made of (brokers, controller, topics, partition states, configs; one module
    each). See the module docstring."""

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
