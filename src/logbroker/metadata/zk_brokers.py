"""Broker registration in ZooKeeper (Kafka's `/brokers/ids/<id>`, KafkaZkClient.registerBroker).

A live broker holds the ephemeral `/brokers/ids/<id>` in its session; the znode's czxid is the
broker epoch, which grows each time the broker registers again (a restart, a new session).
Registration is re-done after a session expiry (zookeeper_store.py). Another session holding the
id is DuplicateBrokerRegistrationError.

Every method blocks on ZooKeeper round trips: call them from a thread.
"""

from __future__ import annotations

from collections.abc import Callable

from kazoo.exceptions import NodeExistsError, NoNodeError

from logbroker.errors import DuplicateBrokerRegistrationError
from logbroker.metadata import zk_data as zk
from logbroker.metadata.model import BrokerInfo
from logbroker.metadata.zk_session import Watch, ZkSession


class ZkBrokers(ZkSession):
    """Broker registration and the live brokers; a part of ZooKeeperMetadataStore."""

    # Set by ZooKeeperMetadataStore.__init__: what to register again in a new session, and this
    # broker's epoch (the czxid of its registration in the current session; -1 before).
    _registration: tuple[BrokerInfo, dict] | None
    registered_broker_epoch: int

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
            while True:
                try:
                    self._client.create(path, data, ephemeral=True)
                except NodeExistsError:
                    pass
                # Like Kafka's checkedEphemeralCreate: after a connection loss the create may have
                # happened in our own session; someone else's znode is a conflict. A znode that
                # vanished in between (its old session just expired) is created again.
                try:
                    _, stat = self._client.get(path)
                    break
                except NoNodeError:
                    continue
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

    def watch_brokers(self, callback: Callable[[list[int]], None]) -> Watch:
        return self._children_watch(zk.BROKER_IDS, lambda c: callback(sorted(int(i) for i in c)))
