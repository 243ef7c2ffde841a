"""Client quota configs of a cluster, in ZooKeeper where Kafka's ZooKeeper-era brokers keep them:

    /config/users/<user>                        {"version":1,"config":{"producer_byte_rate":"1024"}}
    /config/clients/<client-id>                 (the same JSON)
    /config/users/<user>/clients/<client-id>    (the same JSON)
    /config/changes/config_change_<10 digits>   {"version":2,"entity_path":"users/<user>/clients/<c>"}

(`<default>` for a default name; names in Kafka's Sanitizer form, see metadata/quota_entities.py.)
A user's znode also holds its SCRAM credentials (metadata/zk_users.py): a write here changes only
the quota keys and keeps every other key, by a read-modify-write conditional on the znode's version,
in one multi() with its change notice, retried on conflict — as Kafka's AdminZkClient writes them,
so Kafka's brokers and tools read ours and ours read theirs.

Brokers learn of changes from the notices (server/zk_cluster.py hands "users" and "clients"
notices to `read_entity`). Every method blocks on ZooKeeper: call it off the event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from logbroker.metadata import zk_data as zk

log = logging.getLogger("kafka.server.DynamicConfigManager")


class ZkClientQuotaStore:
    def __init__(self, client: KazooClient) -> None:
        self._client = client

    def read_entity(self, path: str) -> dict[str, str]:
        """The whole config of the entity at `path` (relative to /config); {} when absent."""
        try:
            return zk.decode_config(self._client.get(f"{zk.CONFIG}/{path}")[0])
        except NoNodeError:
            return {}

    def read_all(self) -> dict[str, dict[str, str]]:
        """Every user, client and user/client entity's config, by path."""
        configs: dict[str, dict[str, str]] = {}
        for entity_type in ("users", "clients"):
            try:
                children = self._client.get_children(f"{zk.CONFIG}/{entity_type}")
            except NoNodeError:
                continue
            for child in children:
                path = f"{entity_type}/{child}"
                configs[path] = self.read_entity(path)
                if entity_type != "users":
                    continue
                try:
                    clients = self._client.get_children(f"{zk.CONFIG}/{path}/clients")
                except NoNodeError:
                    continue
                for client in clients:
                    configs[f"{path}/clients/{client}"] = self.read_entity(f"{path}/clients/{client}")
        return configs

    def alter_entity(self, path: str, change: Callable[[dict[str, str]], dict[str, str]]) -> dict[str, str]:
        """Replace the entity's config by `change(config)`, with its change notice; returns it."""
        parent = f"{zk.CONFIG}/{path}".rsplit("/", 1)[0]
        if path.count("/") == 3:  # users/<u>/clients/<c>: the user's znode and its clients/ first
            for node in (parent.rsplit("/", 1)[0], parent):
                try:
                    self._client.create(node, zk.encode_config({}) if node != parent else b"", makepath=True)
                except NodeExistsError:
                    pass
        return change_entity_config(self._client, path, change)


def change_entity_config(client: KazooClient, path: str,
                         change: Callable[[dict[str, str]], dict[str, str]]) -> dict[str, str]:
    """Write `change(config)` to the config znode /config/<path> and its change notice in one
    multi(), conditional on the version read, retried on conflict (Kafka's AdminZkClient.changeConfigs);
    returns the config written. Blocks on ZooKeeper."""
    full = f"{zk.CONFIG}/{path}"
    notice = zk.encode_config_change(*path.split("/", 1))
    while True:
        try:
            data, stat = client.get(full)
            config, version = zk.decode_config(data), stat.version
        except NoNodeError:
            config, version = {}, -1
        new = change(config)
        txn = client.transaction()
        if version < 0:
            txn.create(full, zk.encode_config(new))
        else:
            txn.set_data(full, zk.encode_config(new), version=version)
        txn.create(f"{zk.CONFIG_CHANGES}/{zk.CONFIG_CHANGE_PREFIX}", notice, sequence=True)
        results = txn.commit()
        if isinstance(results[0], (BadVersionError, NodeExistsError, NoNodeError)):
            log.debug("Concurrent change of %s; reading it again", path)
            continue
        failed = next((r for r in results if isinstance(r, Exception)), None)
        if failed is not None:
            raise failed
        return new
