"""The ZooKeeper session under the cluster metadata store, and the one place kazoo's errors
become ours.

`ZkSession` is the base of every part of `ZooKeeperMetadataStore` (zookeeper_store.py): it holds
the kazoo client and gives the parts `_errors()` (connection failures become
ZooKeeperUnavailableError), the watch helpers, and `raise_first_error` for a multi() that failed.
It keeps no znodes of its own; the paths and their JSON are in zk_data.py.

Watches: each callback runs on kazoo's callback thread, once at once with the current value, then
at every change, until its `Watch` is cancelled; it must not block for long, and a failing one is
logged and does not kill the watch.

Every method blocks on ZooKeeper round trips: call them from a thread, not on the event loop.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator

from kazoo.client import KazooClient
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

from logbroker.clock import Clock
from logbroker.errors import (
    KafkaError,
    NotLeaderOrFollowerError,
    RequestTimedOutError,
    UnknownTopicOrPartitionError,
)

log = logging.getLogger("logbroker.metadata.zookeeper_store")  # one logger for the store's parts


class StaleStateError(NotLeaderOrFollowerError):
    """A partition state znode changed since it was read: re-read it before writing again."""


class ZooKeeperUnavailableError(RequestTimedOutError):
    """ZooKeeper did not answer (connection lost, session expired, timeout)."""


class Watch:
    """Returned by the `watch_*` methods; `cancel()` stops the callbacks (kazoo drops the watch at
    its next event)."""

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ZkSession:
    """The kazoo session and the helpers every part of the store shares. See the module docstring."""

    # Set by ZooKeeperMetadataStore.__init__.
    connect: str
    broker_id: int
    clock: Clock
    _client: KazooClient

    @property
    def client(self) -> KazooClient:
        """The kazoo session, for modules that keep their own znodes (zk_acls)."""
        return self._client

    @property
    def session_id(self) -> int:
        return self._client.client_id[0] if self._client.client_id else 0

    # -- watches ------------------------------------------------------------------------------
    # Each callback runs on kazoo's callback thread: once at once with the current value, then at
    # every change, until the Watch is cancelled. Hop to the event loop before touching broker state.
    def _children_watch(self, path: str, callback: Callable[[list[str]], None]) -> Watch:
        watch = Watch()

        def on_children(children):
            if watch.cancelled:
                return False
            run_callback(callback, children)
        with self._errors():
            ChildrenWatch(self._client, path, on_children)
        return watch

    def _data_watch(self, path: str, decode, callback) -> Watch:
        watch = Watch()

        def on_data(data, stat):
            if watch.cancelled:
                return False
            run_callback(callback, decode(data, stat))
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


def multi_failed(results: list) -> bool:
    """Whether an op of a committed multi() failed (then none of them took effect)."""
    return any(isinstance(r, Exception) for r in results)


def raise_first_error(results: list) -> None:
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


def run_callback(callback: Callable, value) -> None:
    try:
        callback(value)
    except Exception:  # a failing callback must not kill kazoo's watch
        log.exception("ZooKeeper watch callback failed")
