"""Topic, group and dynamic broker config overrides in ZooKeeper, and the config change notifications
(Kafka's `/config/topics/<topic>`, `/config/groups/<group>`, `/config/brokers/<id>` and
`/config/brokers/<default>`, `/config/changes/config_change_<seq>`).

A topic config write and its change notification are one multi(), conditional on the topic
existing; any broker may write them, and every broker watches `/config/changes`
(zk_config_changes.py) to apply them. Notifications are purged by whichever broker sees them
expire, as Kafka's brokers do.

Every method blocks on ZooKeeper round trips: call them from a thread.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from kazoo.exceptions import NoNodeError

from logbroker.errors import UnknownTopicOrPartitionError
from logbroker.metadata import zk_data as zk
from logbroker.metadata.zk_session import Watch, ZkSession, raise_first_error


class ZkConfigs(ZkSession):
    """Config overrides and change notifications; a part of ZooKeeperMetadataStore."""

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        """Replace a topic's config overrides and write a config-change notification
        (`/config/changes/config_change_<seq>`), in one multi. Any broker may call it."""
        with self._errors():
            txn = self._client.transaction()
            txn.check(zk.topic_path(name), -1)  # -1: any version, but it must exist
            txn.set_data(zk.config_path("topics", name), zk.encode_config(configs))
            txn.create(f"{zk.CONFIG_CHANGES}/{zk.CONFIG_CHANGE_PREFIX}",
                       zk.encode_config_change("topics", name), sequence=True)
            results = txn.commit()
            if isinstance(results[0], NoNodeError):
                raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist.")
            if isinstance(results[1], NoNodeError):  # a topic created without a config znode
                self._client.create(zk.config_path("topics", name), zk.encode_config({}))
                return self.set_topic_configs(name, configs)
            raise_first_error(results)

    def group_configs(self, group_id: str) -> dict[str, str]:
        """A group's config overrides (`/config/groups/<group>`, where a ZooKeeper-era Kafka
        would keep them beside topics and users; {} if it has none)."""
        return self._config("groups", group_id)

    def set_group_configs(self, group_id: str, configs: dict[str, str]) -> None:
        with self._errors():
            path = zk.config_path("groups", group_id)
            try:
                self._client.set(path, zk.encode_config(configs))
            except NoNodeError:
                self._client.create(path, zk.encode_config(configs), makepath=True)

    def broker_configs(self, entity: str) -> dict[str, str]:
        """A broker's dynamic configs, or the cluster default's (`entity` "<default>"); {} if none."""
        return self._config("brokers", entity)

    def set_broker_configs(self, entity: str, configs: dict[str, str]) -> None:
        """Replace a broker's (or the default's) dynamic configs with their change notice
        (`{"version":2,"entity_path":"brokers/<entity>"}`), in one multi, as Kafka's AdminZkClient."""
        from logbroker.metadata.zk_quotas import change_entity_config
        with self._errors():
            change_entity_config(self._client, f"brokers/{entity}", lambda _old: dict(configs))

    def client_metrics_configs(self) -> dict[str, dict[str, str]]:
        """Every client-metrics subscription (`/config/client-metrics/<name>`), by name."""
        from logbroker.metadata.sanitizer import desanitize
        with self._errors():
            try:
                children = self._client.get_children(f"{zk.CONFIG}/client-metrics")
            except NoNodeError:
                return {}
        return {desanitize(child): configs for child in children
                if (configs := self._config("client-metrics", child))}

    def client_metrics_config(self, name: str) -> dict[str, str]:
        from logbroker.metadata.sanitizer import sanitize
        return self._config("client-metrics", sanitize(name))

    def set_client_metrics_configs(self, name: str, configs: dict[str, str]) -> None:
        """Replace a subscription's configs with their change notice
        (`{"version":2,"entity_path":"client-metrics/<name>"}`), in one multi."""
        from logbroker.metadata.sanitizer import sanitize
        from logbroker.metadata.zk_quotas import change_entity_config
        with self._errors():
            self._client.ensure_path(f"{zk.CONFIG}/client-metrics")  # a cluster's first subscription
            change_entity_config(self._client, f"client-metrics/{sanitize(name)}", lambda _old: dict(configs))

    def topic_configs(self, name: str) -> dict[str, str]:
        """A topic's config overrides (`/config/topics/<topic>`; {} if it has none)."""
        return self._config("topics", name)

    def _config(self, entity_type: str, name: str) -> dict[str, str]:
        """The config of `/config/<entity_type>/<name>`; {} when the znode is absent."""
        with self._errors():
            try:
                return zk.decode_config(self._client.get(zk.config_path(entity_type, name))[0])
            except NoNodeError:
                return {}

    def config_change(self, name: str) -> tuple[bytes, int] | None:
        """The data and creation time (ms) of `/config/changes/<name>`; None once it is purged."""
        with self._errors():
            try:
                data, stat = self._client.get(f"{zk.CONFIG_CHANGES}/{name}")
            except NoNodeError:
                return None
            return data, stat.ctime

    def delete_config_change(self, name: str) -> None:
        """Purge an expired config change notification (any broker may; Kafka's brokers do)."""
        with self._errors(), contextlib.suppress(NoNodeError):
            self._client.delete(f"{zk.CONFIG_CHANGES}/{name}")

    def watch_config_changes(self, callback: Callable[[list[str]], None]) -> Watch:
        """`callback(names)` with every notification under `/config/changes`, oldest first."""
        return self._children_watch(zk.CONFIG_CHANGES, lambda c: callback(sorted(c)))
