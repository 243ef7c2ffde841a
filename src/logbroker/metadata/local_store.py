"""The metadata store of a single node: one JSON file in the first log dir.

The embedded default keeps what a cluster keeps in ZooKeeper — the cluster id, topics with their
ids, assignments and config overrides, partition states, the producer-id block, SCRAM credentials
(under "users", each user's map as Kafka keeps it in /config/users/<name>:
`{"SCRAM-SHA-256": "salt=…,stored_key=…,server_key=…,iterations=4096"}`), client quota configs
(under "client_quotas", by the entity's config path as in ZooKeeper: `users/alice`,
`clients/<default>`, `users/alice/clients/app` → `{"producer_byte_rate": "1024"}`), ACLs (under "acls",
one entry per resource pattern with its entries in the JSON of Kafka's /kafka-acl znodes), group
config overrides (under "groups"), dynamic broker configs (under "brokers", by "<default>" or
the broker id, as /config/brokers names them), client-metrics subscriptions (under
"client_metrics", by name, as /config/client-metrics names them) and delegation tokens (under
"delegation_tokens", each the JSON of Kafka's /delegation_token/tokens/<id>) — in
`<log.dir>/logbroker-metadata.json`. Every change rewrites the file atomically (write a temp file,
fsync, rename), so after a crash the file is either the old or the new version, never a mix.
Blocking file I/O; changes are rare (topic admin), so callers may run it on the event loop.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from logbroker.errors import KafkaStorageError, TopicAlreadyExistsError, UnknownTopicOrPartitionError
from logbroker.metadata.acl_json import decode_acls, encode_acls, pattern_from_key, pattern_key
from logbroker.security.acl import ResourcePattern
from logbroker.metadata.model import PartitionState, TopicInfo, topic_id_from_str, topic_id_to_str
from logbroker.types import TopicPartition

if TYPE_CHECKING:
    from logbroker.security.scram import ScramCredential

FILE_NAME = "logbroker-metadata.json"


class LocalMetadataStore:
    """Invariant: the in-memory view always equals the file's content after each method returns."""

    def __init__(self, log_dir: Path) -> None:
        self.path = Path(log_dir) / FILE_NAME
        self._topics: dict[str, TopicInfo] = {}
        self._by_id: dict[uuid.UUID, TopicInfo] = {}
        self._states: dict[TopicPartition, PartitionState] = {}
        self._next_producer_id = 0
        self._users: dict[str, dict[str, str]] = {}
        self._acls: dict[ResourcePattern, frozenset] = {}
        self._client_quotas: dict[str, dict[str, str]] = {}
        self._group_configs: dict[str, dict[str, str]] = {}
        self._broker_configs: dict[str, dict[str, str]] = {}
        self._client_metrics: dict[str, dict[str, str]] = {}
        self._tokens: dict[str, dict] = {}
        self.cluster_id = ""
        if self.path.exists():
            self._load()
        else:
            self.cluster_id = _new_cluster_id()
            self._save()

    # -- topics -------------------------------------------------------------------------------
    def topics(self) -> dict[str, TopicInfo]:
        return dict(self._topics)

    def topic(self, name: str) -> TopicInfo | None:
        return self._topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self._by_id.get(topic_id)

    def create_topic(self, info: TopicInfo) -> None:
        if info.name in self._topics:
            raise TopicAlreadyExistsError(f"Topic '{info.name}' already exists.")
        self._topics[info.name] = info
        self._by_id[info.topic_id] = info
        try:
            self._save()
        except KafkaStorageError:  # a full disk: the topic was not created
            del self._topics[info.name], self._by_id[info.topic_id]
            raise

    def delete_topic(self, name: str) -> TopicInfo:
        info = self._topics.pop(name, None)
        if info is None:
            raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist.")
        del self._by_id[info.topic_id]
        for partition in info.assignment:
            self._states.pop(TopicPartition(name, partition), None)
        self._save()
        return info

    def set_assignment(self, name: str, assignment: dict[int, tuple[int, ...]]) -> None:
        info = self._require(name)
        self._topics[name] = self._by_id[info.topic_id] = TopicInfo(
            info.name, info.topic_id, dict(assignment), info.configs)
        self._save()

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        info = self._require(name)
        self._topics[name] = self._by_id[info.topic_id] = TopicInfo(
            info.name, info.topic_id, info.assignment, dict(configs))
        self._save()

    # -- partition states ---------------------------------------------------------------------
    def partition_state(self, tp: TopicPartition) -> PartitionState | None:
        return self._states.get(tp)

    def set_partition_states(self, states: dict[TopicPartition, PartitionState]) -> None:
        if not states:
            return  # nothing changes (a broker without topics starting): no rewrite, no fsync
        before = {tp: self._states.get(tp) for tp in states}
        self._states.update(states)
        try:
            self._save()
        except KafkaStorageError:  # not written: keep memory as the file is
            for tp, state in before.items():
                if state is None:
                    self._states.pop(tp, None)
                else:
                    self._states[tp] = state
            raise

    # -- producer ids -------------------------------------------------------------------------
    def claim_producer_id_block(self, size: int) -> int:
        """Claim `size` producer ids; returns the first. Ids are never handed out twice, even
        across restarts, because the claim is on disk before any id of it is used."""
        first = self._next_producer_id
        self._next_producer_id += size
        self._save()
        return first

    # -- SCRAM credentials ---------------------------------------------------------------------
    def scram_users(self) -> dict[str, dict[str, ScramCredential]]:
        """user → mechanism → credential."""
        return {user: {m: _credential(t) for m, t in mechanisms.items()}
                for user, mechanisms in self._users.items()}

    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        text = self._users.get(user, {}).get(mechanism)
        return _credential(text) if text else None

    def set_scram_credential(self, user: str, mechanism: str, credential: ScramCredential) -> None:
        self._users.setdefault(user, {})[mechanism] = credential.to_text()
        self._save()

    def delete_scram_credential(self, user: str, mechanism: str) -> None:
        mechanisms = self._users.get(user, {})
        if mechanisms.pop(mechanism, None) is not None:
            if not mechanisms:
                del self._users[user]
            self._save()

    # -- client quotas (the ZkClientQuotaStore interface) ---------------------------------------
    def read_entity(self, path: str) -> dict[str, str]:
        return dict(self._client_quotas.get(path, {}))

    def read_all(self) -> dict[str, dict[str, str]]:
        return {path: dict(config) for path, config in self._client_quotas.items()}

    def alter_entity(self, path: str, change) -> dict[str, str]:
        new = change(self.read_entity(path))
        if new:
            self._client_quotas[path] = dict(new)
        else:
            self._client_quotas.pop(path, None)
        self._save()
        return new

    # -- ACLs -----------------------------------------------------------------------------------
    def load_acls(self) -> dict[ResourcePattern, frozenset]:
        return dict(self._acls)

    def update_acls(self, changes) -> dict[ResourcePattern, frozenset]:
        """The AclStore write, one file rewrite for all `changes` (pattern → change of its
        entries); one process owns this file, so no version check is needed."""
        written = {}
        for pattern, change in changes.items():
            entries = written[pattern] = frozenset(change(self._acls.get(pattern, frozenset())))
            if entries:
                self._acls[pattern] = entries
            else:
                self._acls.pop(pattern, None)
        self._save()
        return written

    # -- group configs (Kafka 4's GROUP config resources) ---------------------------------------
    def group_configs(self, group_id: str) -> dict[str, str]:
        return dict(self._group_configs.get(group_id, {}))

    def set_group_configs(self, group_id: str, configs: dict[str, str]) -> None:
        """Replace a group's config overrides (none left: the entry goes)."""
        self._replace_configs(self._group_configs, group_id, configs)

    # -- dynamic broker configs ("<default>" or a broker id, as under /config/brokers) ------------
    def broker_configs(self, entity: str) -> dict[str, str]:
        return dict(self._broker_configs.get(entity, {}))

    def set_broker_configs(self, entity: str, configs: dict[str, str]) -> None:
        """Replace a broker's (or the default's) dynamic configs (none left: the entry goes)."""
        self._replace_configs(self._broker_configs, entity, configs)

    # -- client-metrics subscriptions (KIP-714 CLIENT_METRICS config resources) --------------------
    def client_metrics_configs(self) -> dict[str, dict[str, str]]:
        return {name: dict(c) for name, c in self._client_metrics.items()}

    def set_client_metrics_configs(self, name: str, configs: dict[str, str]) -> None:
        """Replace a subscription's configs (none left: the subscription goes)."""
        self._replace_configs(self._client_metrics, name, configs)

    # -- delegation tokens (the ZkDelegationTokenStore interface) ----------------------------------
    def delegation_tokens(self) -> dict:
        from logbroker.security.delegation_token import decode_token
        return {token_id: decode_token(json.dumps(d).encode()) for token_id, d in self._tokens.items()}

    def put_delegation_token(self, info) -> None:
        from logbroker.security.delegation_token import encode_token
        self._tokens[info.token_id] = json.loads(encode_token(info))
        self._save()

    def remove_delegation_token(self, token_id: str) -> None:
        if self._tokens.pop(token_id, None) is not None:
            self._save()

    def _replace_configs(self, by_name: dict[str, dict[str, str]], name: str, configs: dict[str, str]) -> None:
        if configs:
            by_name[name] = dict(configs)
        else:
            by_name.pop(name, None)
        self._save()

    # -- persistence --------------------------------------------------------------------------
    def _require(self, name: str) -> TopicInfo:
        info = self._topics.get(name)
        if info is None:
            raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist.")
        return info

    def _load(self) -> None:
        try:
            data = json.loads(self.path.read_text())
            self.cluster_id = data["cluster_id"]
            self._next_producer_id = data["next_producer_id"]
            self._users = {user: dict(m) for user, m in data.get("users", {}).items()}
            self._client_quotas = {path: dict(c) for path, c in data.get("client_quotas", {}).items()}
            self._acls = {pattern_from_key(key): decode_acls(acls)
                          for key, acls in data.get("acls", {}).items()}
            self._group_configs = {group: dict(c) for group, c in data.get("groups", {}).items()}
            self._broker_configs = {entity: dict(c) for entity, c in data.get("brokers", {}).items()}
            self._client_metrics = {name: dict(c) for name, c in data.get("client_metrics", {}).items()}
            self._tokens = dict(data.get("delegation_tokens", {}))
            for name, t in data["topics"].items():
                info = TopicInfo(name, topic_id_from_str(t["topic_id"]),
                                 {int(p): tuple(r) for p, r in t["partitions"].items()}, dict(t["configs"]))
                self._topics[name] = self._by_id[info.topic_id] = info
            for key, s in data["partition_states"].items():
                topic, _, partition = key.rpartition(":")
                self._states[TopicPartition(topic, int(partition))] = PartitionState(
                    s["leader"], s["leader_epoch"], tuple(s["isr"]), s.get("controller_epoch", 0))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise KafkaStorageError(
                f"Cannot read cluster metadata file {self.path} ({exc}); restore it from a backup "
                f"or move the data directory aside to start empty.") from exc

    def _save(self) -> None:
        data = {
            "version": 1,
            "cluster_id": self.cluster_id,
            "next_producer_id": self._next_producer_id,
            "topics": {
                name: {"topic_id": topic_id_to_str(t.topic_id),
                       "partitions": {str(p): list(r) for p, r in sorted(t.assignment.items())},
                       "configs": t.configs}
                for name, t in sorted(self._topics.items())},
            "partition_states": {
                f"{tp.topic}:{tp.partition}": {"leader": s.leader, "leader_epoch": s.leader_epoch,
                                               "isr": list(s.isr), "controller_epoch": s.controller_epoch}
                for tp, s in sorted(self._states.items())},
            "users": {user: dict(sorted(m.items())) for user, m in sorted(self._users.items())},
            "acls": {pattern_key(p): encode_acls(e) for p, e in sorted(self._acls.items())},
            "client_quotas": {path: dict(sorted(c.items())) for path, c in sorted(self._client_quotas.items())},
            "groups": {group: dict(sorted(c.items())) for group, c in sorted(self._group_configs.items())},
            "brokers": {entity: dict(sorted(c.items())) for entity, c in sorted(self._broker_configs.items())},
            "client_metrics": {name: dict(sorted(c.items())) for name, c in sorted(self._client_metrics.items())},
            "delegation_tokens": dict(sorted(self._tokens.items())),
        }
        tmp = self.path.with_suffix(".tmp")
        try:
            with open(tmp, "w") as f:
                json.dump(data, f, indent=1)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except OSError as e:  # a full disk: the old file stays as it was
            tmp.unlink(missing_ok=True)
            raise KafkaStorageError(f"Error while writing the metadata file {self.path}: {e}") from e


def _new_cluster_id() -> str:
    """A cluster id as Kafka makes them: 22 characters of URL-safe base64 of a random UUID."""
    return topic_id_to_str(uuid.uuid4())


def _credential(text: str) -> ScramCredential:
    """A stored SCRAM credential, parsed. The SCRAM module (hashlib, hmac, secrets) is imported
    here, on first use — by a SASL listener or the `users` tool — not by every broker."""
    from logbroker.security.scram import ScramCredential
    return ScramCredential.from_text(text)
