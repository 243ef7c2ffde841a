"""Log dir failure notices: how the controller learns that a broker's log dir went offline.

Kafka's ZooKeeper-mode LogDirUtils: the broker whose dir failed creates a sequential znode
`/log_dir_event_notification/log_dir_event_<seq>` holding
`{"version":1,"broker":<id>,"event":1}` (1: LogDirFailure). The controller watches the children
of `/log_dir_event_notification`, handles each notice (it finds out which replicas of that broker
are offline and moves their leadership away) and deletes it; notices left while there was no
controller are handled by the next one.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable

from kazoo.exceptions import NoNodeError

from logbroker.metadata import zk_data as zk
from logbroker.metadata.zk_session import Watch, ZkSession


class ZkLogDirEvents(ZkSession):
    """The `/log_dir_event_notification` part of the ZooKeeper store."""

    def notify_log_dir_failure(self, broker_id: int) -> str:
        """Create this broker's failure notice; returns its znode name."""
        data = json.dumps({"version": 1, "broker": broker_id, "event": zk.LOG_DIR_FAILURE_EVENT},
                          separators=(",", ":")).encode()
        with self._errors():
            path = self._client.create(f"{zk.LOG_DIR_EVENT_NOTIFICATION}/{zk.LOG_DIR_EVENT_PREFIX}",
                                       data, sequence=True, makepath=True)
        return path.rsplit("/", 1)[1]

    def take_log_dir_event(self, name: str) -> int | None:
        """The broker id of the notice `name`, deleted once read; None if it is gone or is not
        a failure notice Kafka would act on (it is deleted all the same)."""
        path = f"{zk.LOG_DIR_EVENT_NOTIFICATION}/{name}"
        with self._errors():
            try:
                data, _ = self._client.get(path)
            except NoNodeError:
                return None
            with contextlib.suppress(NoNodeError):
                self._client.delete(path)
        try:
            value = json.loads(data)
            broker_id, event = int(value["broker"]), int(value.get("event", zk.LOG_DIR_FAILURE_EVENT))
        except (ValueError, TypeError, KeyError):
            return None
        return broker_id if event == zk.LOG_DIR_FAILURE_EVENT else None

    def watch_log_dir_events(self, callback: Callable[[list[str]], None]) -> Watch:
        """`callback(names)` with every notice under `/log_dir_event_notification`, oldest first."""
        return self._children_watch(zk.LOG_DIR_EVENT_NOTIFICATION,
                                    lambda c: callback(sorted(n for n in c if n.startswith(zk.LOG_DIR_EVENT_PREFIX))))
