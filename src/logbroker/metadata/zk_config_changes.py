"""Config change notifications: how every broker learns that an entity's config changed.

Kafka's ZkNodeChangeNotificationListener over `/config/changes`. Whoever changes a config (any
broker answering AlterConfigs, or Kafka's own tools) writes `/config/<type>/<name>` and then a
sequential znode `/config/changes/config_change_<seq>` holding
`{"version":2,"entity_path":"<type>/<name>"}` (version 1, from old tools, holds
`entity_type` and `entity_name`). Every broker watches the children of `/config/changes` and
hands each notification newer than the last one it executed to the handler of its entity type
("topics", "users", …); a type with no handler is skipped without error.

Invariants: notifications are executed in sequence order, each at most once per process (all
of them once at startup, which is harmless: a handler re-reads the entity's whole config). A
notification older than `CHANGE_EXPIRATION_MS` that this broker has executed is deleted, as
Kafka's brokers do, so the directory does not grow forever.

`process` blocks on ZooKeeper: call it from the cluster's worker thread, never the event loop.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping

from logbroker.clock import Clock
from logbroker.errors import KafkaError
from logbroker.metadata import zk_data as zk

log = logging.getLogger("kafka.common.ZkNodeChangeNotificationListener")

# Kafka's ZkNodeChangeNotificationListener.changeExpirationMs: 15 minutes.
CHANGE_EXPIRATION_MS = 15 * 60 * 1000


def sequence_number(name: str) -> int | None:
    """The sequence number of a `config_change_<seq>` znode name; None for any other name."""
    if not name.startswith(zk.CONFIG_CHANGE_PREFIX):
        return None
    digits = name[len(zk.CONFIG_CHANGE_PREFIX):]
    return int(digits) if digits.isdigit() else None


def decode_config_change(data: bytes | None) -> tuple[str, str]:
    """(entity type, entity name) of a notification, version 1 or 2. Raises ValueError."""
    value = json.loads(data or b"null")
    if not isinstance(value, dict):
        raise ValueError(f"not a JSON object: {data!r}")
    if value.get("version") == 2:
        entity_type, slash, name = str(value.get("entity_path", "")).partition("/")
    elif value.get("version") == 1:
        entity_type, slash, name = str(value.get("entity_type", "")), "/", str(value.get("entity_name", ""))
    else:
        raise ValueError(f"unknown version {value.get('version')!r}")
    if not slash or not entity_type or not name:
        raise ValueError(f"no entity named in {data!r}")
    return entity_type, name


class ConfigChangeListener:
    def __init__(self, store, handlers: Mapping[str, Callable[[str], None]], *, clock: Clock,
                 expiration_ms: int = CHANGE_EXPIRATION_MS) -> None:
        """`store` is the ZooKeeperMetadataStore; `handlers` maps an entity type to a function of
        the entity's name (run on the calling thread, so it may read ZooKeeper)."""
        self.store = store
        self.handlers = dict(handlers)
        self.clock = clock
        self.expiration_ms = expiration_ms
        self.last_executed = -1

    def process(self, names: list[str]) -> None:
        """Execute the notifications among `names` (the children of /config/changes) newer than
        the last executed, oldest first, then purge the expired ones."""
        numbered = sorted((seq, name) for name in names if (seq := sequence_number(name)) is not None)
        for seq, name in numbered:
            if seq <= self.last_executed:
                continue
            change = self.store.config_change(name)
            if change is not None:
                self._execute(name, change[0])
            self.last_executed = seq
        self._purge(name for seq, name in numbered if seq <= self.last_executed)

    def _execute(self, name: str, data: bytes) -> None:
        try:
            entity_type, entity_name = decode_config_change(data)
        except ValueError as exc:
            log.warning("Ignoring config change notification %s: %s", name, exc)
            return
        handler = self.handlers.get(entity_type)
        if handler is None:
            return
        try:
            handler(entity_name)
        except KafkaError as exc:
            log.error("Could not apply config change %s of %s/%s: %s", name, entity_type, entity_name, exc)

    def _purge(self, names) -> None:
        now_ms = self.clock.time_ms()
        for name in names:
            change = self.store.config_change(name)
            if change is not None and change[1] + self.expiration_ms < now_ms:
                self.store.delete_config_change(name)
