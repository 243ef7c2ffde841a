"""SCRAM credentials of a cluster, in ZooKeeper where Kafka's ZooKeeper-era brokers keep them:

    /config/users/<sanitized user>                {"version":1,"config":{"SCRAM-SHA-256":
                                                   "salt=…,stored_key=…,server_key=…,iterations=4096"}}
    /config/changes/config_change_<10 digits>     {"version":2,"entity_path":"users/<sanitized user>"}

The value of each mechanism is Kafka's ScramCredentialUtils text (ScramCredential.to_text); other
keys of a user's config (quotas written by Kafka's tools) are kept as they are. A user's znode name
is Kafka's Sanitizer form of the name (URL-encoding, '*' as %2A, ' ' as %20).

`ZkUserScramStore` has the SCRAM half of the metadata-store interface (`scram_users`,
`scram_credential`, `set_scram_credential`, `delete_scram_credential`). A write is a
read-modify-write of the user's znode conditional on its version, in one multi() with its change
notice, retried on conflict — so Kafka's brokers and tools see it, and two brokers never lose
each other's changes. Reads come from memory: `watch()` keeps a ChildrenWatch on /config/users and
a DataWatch on each user, so a change made through any broker (or by `kafka-configs`) is seen by
every broker within a ZooKeeper round trip. The notices are written for Kafka's brokers; ours read
the user znodes directly and never depend on a notice still being there.

Writes and `watch()` block on ZooKeeper: call them from a thread or accept a few ms. Watch callbacks
run on kazoo's thread and replace one user's entry with a new dict, never mutate one in place, so
the event loop may read the cache without a lock (a dict lookup is atomic under the GIL).
"""

from __future__ import annotations

import logging

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from logbroker.metadata import zk_data as zk
from logbroker.metadata.sanitizer import desanitize, sanitize  # noqa: F401 - user names as znode names
from logbroker.security.scram import MECHANISMS, ScramCredential

log = logging.getLogger("kafka.server.DynamicConfigManager")

USERS = f"{zk.CONFIG}/users"


def decode_scram_credentials(data: bytes | None) -> dict[str, ScramCredential]:
    """The SCRAM mechanisms in a user's config znode; malformed entries are left out."""
    credentials = {}
    for key, value in zk.decode_config(data).items():
        if key in MECHANISMS:
            try:
                credentials[key] = ScramCredential.from_text(value)
            except ValueError as exc:
                log.warning("Ignoring the %s credential in a user's config: %s", key, exc)
    return credentials


class ZkUserScramStore:
    def __init__(self, client: KazooClient) -> None:
        self._client = client
        self._users: dict[str, dict[str, ScramCredential]] = {}
        self._watched: set[str] = set()
        self._loaded = False  # after the first load, each change is logged

    # -- reads (memory) ---------------------------------------------------------------------------
    def scram_users(self) -> dict[str, dict[str, ScramCredential]]:
        """User → mechanism → credential, for users with at least one SCRAM credential."""
        return {user: dict(mechanisms) for user, mechanisms in self._users.items() if mechanisms}

    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)

    # -- writes (ZooKeeper) ---------------------------------------------------------------------
    def set_scram_credential(self, user: str, mechanism: str, credential: ScramCredential) -> None:
        self._update(user, lambda config: {**config, mechanism: credential.to_text()})

    def delete_scram_credential(self, user: str, mechanism: str) -> None:
        self._update(user, lambda config: {k: v for k, v in config.items() if k != mechanism})

    def _update(self, user: str, change) -> None:
        from logbroker.metadata.zk_quotas import change_entity_config
        new = change_entity_config(self._client, f"users/{sanitize(user)}", change)
        self._users[user] = decode_scram_credentials(zk.encode_config(new))

    # -- watches ----------------------------------------------------------------------------------
    def read_all(self) -> None:
        """Load every user once (for a one-off reader such as the CLI; brokers call `watch`)."""
        for child in self._client.get_children(USERS):
            try:
                self._users[desanitize(child)] = decode_scram_credentials(self._client.get(f"{USERS}/{child}")[0])
            except NoNodeError:
                pass

    def watch(self) -> None:
        """Load every user and keep the cache current; returns once the first load is done."""
        ChildrenWatch(self._client, USERS, self._on_users)
        self._loaded = True

    def _on_users(self, children: list[str]) -> None:
        for child in children:
            if child not in self._watched:
                self._watched.add(child)
                DataWatch(self._client, f"{USERS}/{child}", self._user_watcher(child))

    def _user_watcher(self, child: str):
        # Two parameters exactly: kazoo passes a third (the event) to a callback that takes one.
        return lambda data, stat: self._on_user(child, data, stat)

    def _on_user(self, child: str, data: bytes | None, stat) -> bool | None:
        user = desanitize(child)
        if stat is None:  # deleted: drop it; a new znode of that name gets a new watch
            self._users.pop(user, None)
            self._watched.discard(child)
            return False
        credentials = decode_scram_credentials(data)
        if self._loaded and credentials != self._users.get(user):
            log.info("SCRAM credentials of user %s changed: %s", user, ", ".join(sorted(credentials)) or "none")
        self._users[user] = credentials
        return None
