"""ACLs in ZooKeeper, in Kafka 3.9's layout (see `acl_json.py` for the znodes and their JSON).

`ZkAclStore` is the AclStore of a cluster. A write is Kafka's: read the resource znode and its
version, compute the new entries, then a setData (or delete) conditional on that version — or a
create when there was none — and on a conflict (another broker wrote in between) read again and
retry. After each write it creates a persistent sequential change notice; every broker watches both
change paths and reloads each resource a new notice names, so an ACL written through any broker
takes effect on all of them within a ZooKeeper round trip or two. Notices older than 15 minutes are
deleted by whichever broker sees them (Kafka's changeExpirationMs).

Methods block on ZooKeeper: call them from a thread. Watch callbacks run on kazoo's thread.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError
from kazoo.recipe.watchers import ChildrenWatch

from logbroker.metadata import acl_json
from logbroker.security.acl import PatternType, ResourcePattern, ResourceType

log = logging.getLogger("kafka.security.authorizer.AclAuthorizer")

CHANGE_EXPIRATION_MS = 15 * 60 * 1000


class ZkAclStore:
    def __init__(self, client: KazooClient) -> None:
        self._client = client
        self._last_seen: dict[str, int] = {}

    def create_paths(self) -> None:
        """The roots and per-type parents Kafka's AclAuthorizer creates at startup."""
        for root in (acl_json.LITERAL_ROOT, acl_json.PREFIXED_ROOT):
            for resource_type in acl_json.RESOURCE_TYPES:
                self._client.ensure_path(f"{root}/{resource_type.kafka_name}")
        for root in (acl_json.LITERAL_CHANGES, acl_json.EXTENDED_CHANGES):
            self._client.ensure_path(root)

    def load_acls(self) -> dict:
        acls = {}
        for root, pattern_type in ((acl_json.LITERAL_ROOT, PatternType.LITERAL),
                                   (acl_json.PREFIXED_ROOT, PatternType.PREFIXED)):
            for type_name in self._children(root):
                try:
                    resource_type = ResourceType.parse(type_name)
                except ValueError:
                    continue
                for name in self._children(f"{root}/{type_name}"):
                    pattern = ResourcePattern(resource_type, name, pattern_type)
                    entries = self.read_acls(pattern)
                    if entries:
                        acls[pattern] = entries
        return acls

    def read_acls(self, pattern: ResourcePattern) -> frozenset:
        return self._read(pattern)[0]

    def update_acls(self, changes: dict[ResourcePattern, Callable]) -> dict[ResourcePattern, frozenset]:
        return {pattern: self._update(pattern, change) for pattern, change in changes.items()}

    def _update(self, pattern: ResourcePattern, change: Callable) -> frozenset:
        path = acl_json.resource_path(pattern)
        while True:
            current, version = self._read(pattern)
            entries = frozenset(change(current))
            if entries == current:
                return entries
            try:
                if not entries:
                    self._client.delete(path, version=version)
                elif version < 0:
                    self._client.create(path, acl_json.acls_to_bytes(entries), makepath=True)
                else:
                    self._client.set(path, acl_json.acls_to_bytes(entries), version=version)
            except (BadVersionError, NodeExistsError, NoNodeError):
                log.debug("Concurrent ACL update of %s; reading it again", pattern)
                continue
            notice_path, payload = acl_json.change_notice(pattern)
            self._client.create(notice_path, payload, sequence=True, makepath=True)
            return entries

    def _read(self, pattern: ResourcePattern) -> tuple[frozenset, int]:
        """The entries of a resource znode with its version (-1 when there is no znode)."""
        try:
            data, stat = self._client.get(acl_json.resource_path(pattern))
        except NoNodeError:
            return frozenset(), -1
        return acl_json.acls_from_bytes(data), stat.version

    def _children(self, path: str) -> list[str]:
        try:
            return self._client.get_children(path)
        except NoNodeError:
            return []

    def watch_changes(self, on_change: Callable[[ResourcePattern, frozenset], None]) -> None:
        """Call `on_change(pattern, entries)` (on kazoo's thread) for each resource a change
        notice names: first for the notices already there, then for each new one."""
        for root in (acl_json.LITERAL_CHANGES, acl_json.EXTENDED_CHANGES):
            ChildrenWatch(self._client, root,
                          lambda children, root=root: self._on_notices(root, children, on_change))

    def _on_notices(self, root: str, children: list[str], on_change) -> None:
        # An exception would end kazoo's watch: log it; the next notice reprocesses from the last
        # one applied (reloading a resource twice is harmless).
        try:
            self._apply_notices(root, children, on_change)
        except KazooException as exc:
            log.warning("Could not read ACL change notices under %s (%r); will retry on the next "
                        "notice", root, exc)

    def _apply_notices(self, root: str, children: list[str], on_change) -> None:
        last = self._last_seen.get(root, -1)
        now_ms = time.time() * 1000
        for child in sorted(children):
            seq_text = child.removeprefix(acl_json.CHANGE_PREFIX)
            if not seq_text.isdigit() or int(seq_text) <= last:
                continue
            seq = int(seq_text)
            path = f"{root}/{child}"
            try:
                data, stat = self._client.get(path)
            except NoNodeError:
                continue
            try:
                pattern = acl_json.pattern_from_notice(root, data)
            except (ValueError, KeyError) as exc:
                log.warning("Ignoring malformed ACL change notice %s (%s)", path, exc)
            else:
                on_change(pattern, self.read_acls(pattern))
            last = self._last_seen[root] = seq
            if now_ms - stat.ctime > CHANGE_EXPIRATION_MS:
                try:
                    self._client.delete(path)
                except NoNodeError:
                    pass
