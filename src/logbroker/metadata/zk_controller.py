"""Controller election and the controller's fenced writes, in ZooKeeper (Kafka's KafkaZkClient
registerControllerAndIncrementControllerEpoch and its checkedControllerEpoch multi()s).

The controller is whoever created the ephemeral `/controller`; in the same multi() it bumped
`/controller_epoch` from the version it read, and it remembers that znode's new version. Every
controller write is one multi() that starts with a check of that version (`_controller_txn`,
committed with `_commit(txn, fenced=True)`): once another broker has become controller the
version has moved, the whole multi fails, and the deposed controller gets ControllerMovedError
and stops acting as controller.

Invariant: `controller_epoch` is not None only from a won election until this broker learns it
lost the role: at session loss, resignation, close, or the first fenced write that fails. In
between it may already be stale; the fencing check is what makes a stale controller's writes fail.

Every method blocks on ZooKeeper round trips: call them from a thread.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from logbroker.errors import NotControllerError
from logbroker.metadata import zk_data as zk
from logbroker.metadata.zk_session import Watch, ZkSession, multi_failed

log = logging.getLogger("logbroker.metadata.zookeeper_store")  # one logger for the store's parts


class ControllerMovedError(NotControllerError):
    """A controller write failed because another broker became controller (Kafka's
    ControllerMovedException, NOT_CONTROLLER). This store no longer acts as controller."""


class ZkController(ZkSession):
    """Controller election and fencing; a part of ZooKeeperMetadataStore."""

    # Set by ZooKeeperMetadataStore.__init__: the controller epoch we won and /controller_epoch's
    # version after our bump; None unless this broker is the controller.
    _controller_epoch: int | None
    _controller_epoch_zk_version: int

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
                if not multi_failed(results):
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

    def watch_controller(self, callback: Callable[[int | None], None]) -> Watch:
        """`callback(broker_id)`, or `callback(None)` when there is no controller: then call
        `elect_controller()` (from a thread that may block)."""
        return self._data_watch(zk.CONTROLLER, lambda data, stat: None if stat is None
                                else zk.decode_controller(data), callback)
