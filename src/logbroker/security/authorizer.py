"""AclAuthorizer: Kafka's ZooKeeper-era authorizer (kafka.security.authorizer.AclAuthorizer).

Rules, as in Kafka 3.9:
- a principal in `super.users` is allowed everything, with no ACL consulted;
- the ACLs that apply to a resource are those of its literal name, of the literal wildcard `*`
  of its type, and of every PREFIXED pattern its name starts with;
- when none apply, `allow.everyone.if.no.acl.found` decides (default false: denied);
- otherwise a matching DENY (principal or `User:*`, host or `*`, the operation or ALL) denies,
  whatever allows; else a matching ALLOW of the operation, of ALL, or of an operation that implies
  it (READ/WRITE/DELETE/ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS) allows;
  else denied.

The index keeps, per resource type, a dict of literal names and one of prefixes, plus the set of
prefix lengths in use, so a check costs a few dict lookups whatever the number of ACLs — never a
scan. Readers (`authorize`, on the event loop) take no lock: each update replaces one resource's
entry tuple, or one prefix-length tuple, by a single assignment, so a reader sees a resource's old
ACLs or its new ones, never a mix. Writers (`create_acls`, `delete_acls`, `apply`; threads or the
event loop) serialise on a lock.

The store (`AclStore`) is the file store on a single node or ZooKeeper on a cluster; its writes
block, so on a cluster call `create_acls`/`delete_acls` from a thread. Denials are logged on
`kafka.authorizer.logger` at INFO, one line each, in Kafka's words.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import Protocol

from logbroker.security.acl import (
    IMPLIED_BY,
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

AUTHORIZER_CLASS = "kafka.security.authorizer.AclAuthorizer"
# KRaft's authorizer (Kafka 3.x KRaft and 4.x): the same ACL semantics (super.users,
# allow.everyone.if.no.acl.found), so it names the same authorizer here, with the ACLs kept in
# the metadata store as AclAuthorizer's are.
STANDARD_AUTHORIZER_CLASS = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
AUTHORIZER_CLASSES = (AUTHORIZER_CLASS, STANDARD_AUTHORIZER_CLASS)

audit_log = logging.getLogger("kafka.authorizer.logger")

Entries = frozenset[AccessControlEntry]


class AclStore(Protocol):
    """Where ACLs are kept, one set of entries per resource pattern."""

    def load_acls(self) -> dict[ResourcePattern, Entries]:
        """Every stored resource pattern with its (non-empty) entries."""

    def update_acls(self, changes: dict[ResourcePattern, Callable[[Entries], Entries]]
                    ) -> dict[ResourcePattern, Entries]:
        """Replace the entries of each pattern by `change(current)`, each atomically (retrying on
        a concurrent write); return what was written. An empty result removes the pattern."""


def parse_super_users(text: str | None) -> frozenset[str]:
    """`super.users`: principals separated by semicolons (`User:admin;User:ops`)."""
    return frozenset(p.strip() for p in (text or "").split(";") if p.strip())


class AclAuthorizer:
    def __init__(self, *, super_users: Iterable[str] = (),
                 allow_everyone_if_no_acl_found: bool = False) -> None:
        self.store: AclStore | None = None
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._acls: dict[ResourcePattern, tuple[AccessControlEntry, ...]] = {}
        self._literal: dict[tuple[ResourceType, str], tuple[AccessControlEntry, ...]] = {}
        self._prefixed: dict[tuple[ResourceType, str], tuple[AccessControlEntry, ...]] = {}
        self._prefix_lengths: dict[ResourceType, tuple[int, ...]] = {}
        self._index_lock = threading.Lock()

    # -- loading and change notices ---------------------------------------------------------
    def load(self, store: AclStore) -> None:
        """Attach the store and read every ACL from it (blocks on it). Call once, before serving."""
        self.store = store
        for pattern, entries in store.load_acls().items():
            self.apply(pattern, entries)

    def apply(self, pattern: ResourcePattern, entries: Entries) -> None:
        """Make `entries` the ACLs of `pattern` in the index (empty: none)."""
        with self._index_lock:
            key = (pattern.resource_type, pattern.name)
            value = tuple(sorted(entries))
            index = self._literal if pattern.pattern_type == PatternType.LITERAL else self._prefixed
            if value:
                self._acls[pattern] = index[key] = value
            else:
                self._acls.pop(pattern, None)
                index.pop(key, None)
            if pattern.pattern_type == PatternType.PREFIXED:
                self._prefix_lengths[pattern.resource_type] = tuple(sorted(
                    {len(name) for rt, name in self._prefixed if rt == pattern.resource_type}))

    # -- checks ------------------------------------------------------------------------------
    def matching_entries(self, resource_type: ResourceType, name: str) -> list[AccessControlEntry]:
        """Every entry that applies to the resource: its literal, the wildcard, its prefixes."""
        found = list(self._literal.get((resource_type, WILDCARD_RESOURCE), ()))
        if name != WILDCARD_RESOURCE:
            found += self._literal.get((resource_type, name), ())
        for length in self._prefix_lengths.get(resource_type, ()):
            if length > len(name):
                break
            found += self._prefixed.get((resource_type, name[:length]), ())
        return found

    def authorize(self, principal: str, host: str, operation: AclOperation,
                  resource_type: ResourceType, name: str, *, request_name: str = "",
                  log_denied: bool = True) -> bool:
        if principal in self.super_users:
            return True
        entries = self.matching_entries(resource_type, name)
        if not entries:
            allowed = self.allow_everyone_if_no_acl_found
        else:
            allowed = False
            implied = IMPLIED_BY.get(operation, (operation,))
            for e in entries:
                if (e.principal != principal and e.principal != WILDCARD_PRINCIPAL) \
                        or (e.host != host and e.host != WILDCARD_HOST):
                    continue
                if e.permission_type == AclPermissionType.DENY:
                    if e.operation == operation or e.operation == AclOperation.ALL:
                        allowed = False
                        break
                elif e.operation in implied or e.operation == AclOperation.ALL:
                    allowed = True
        if not allowed and log_denied and audit_log.isEnabledFor(logging.INFO):
            audit_log.info("Principal = %s is Denied Operation = %s from host = %s on resource = "
                           "%s:LITERAL:%s for request = %s with resourceRefCount = 1", principal,
                           operation.kafka_name, host, resource_type.kafka_name, name, request_name)
        return allowed

    def authorize_by_resource_type(self, principal: str, host: str, operation: AclOperation,
                                   resource_type: ResourceType, *, request_name: str = "") -> bool:
        """Whether `operation` is allowed on at least one resource of the type (Kafka's
        authorizeByResourceType, used by InitProducerId: WRITE on any topic). A deny on the
        wildcard denies; an allowed literal counts unless denied by name or by a prefix of it; an
        allowed prefix counts unless a deny prefix covers it."""
        if principal in self.super_users:
            return True

        def names(permission: AclPermissionType, pattern_type: PatternType) -> set[str]:
            index = self._literal if pattern_type == PatternType.LITERAL else self._prefixed
            return {name for (rt, name), entries in list(index.items()) if rt == resource_type
                    and any(e.permission_type == permission
                            and e.principal in (principal, WILDCARD_PRINCIPAL)
                            and e.host in (host, WILDCARD_HOST)
                            and e.operation in (operation, AclOperation.ALL) for e in entries)}

        deny_literals = names(AclPermissionType.DENY, PatternType.LITERAL)
        if WILDCARD_RESOURCE in deny_literals:
            allowed = False
        elif self.allow_everyone_if_no_acl_found:
            allowed = True
        else:
            deny_prefixes = names(AclPermissionType.DENY, PatternType.PREFIXED)

            def denied_by_prefix(name: str) -> bool:
                return any(name[:n] in deny_prefixes for n in range(len(name) + 1))
            allowed = any(not denied_by_prefix(p)
                          for p in names(AclPermissionType.ALLOW, PatternType.PREFIXED)) \
                or any(n == WILDCARD_RESOURCE or (n not in deny_literals and not denied_by_prefix(n))
                       for n in names(AclPermissionType.ALLOW, PatternType.LITERAL))
        if not allowed:
            audit_log.info("Principal = %s is Denied Operation = %s from host = %s on resource = "
                           "%s:UNKNOWN:NONE for request = %s with resourceRefCount = 0", principal,
                           operation.kafka_name, host, resource_type.kafka_name, request_name)
        return allowed

    # -- administration ----------------------------------------------------------------------
    def acls(self, selector: AclBindingFilter) -> list[AclBinding]:
        """The stored bindings the filter selects, sorted by resource pattern."""
        return [AclBinding(pattern, e) for pattern, entries in sorted(list(self._acls.items()))
                if selector.matches_pattern(pattern) for e in entries if selector.matches_entry(e)]

    def create_acls(self, bindings: list[AclBinding]) -> None:
        """Add valid bindings (checked with `acl.binding_error` by the caller), grouped per
        resource so each resource is written once. Blocks on the store."""
        by_pattern: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for b in bindings:
            by_pattern.setdefault(b.pattern, set()).add(b.entry)
        self._write({pattern: lambda current, a=added: current | a for pattern, added in by_pattern.items()})

    def delete_acls(self, filters: list[AclBindingFilter]) -> list[list[AclBinding]]:
        """Remove what each filter selects; per filter, the bindings it removed. Blocks on the
        store."""
        matched = [self.acls(f) for f in filters]
        doomed: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for bindings in matched:
            for b in bindings:
                doomed.setdefault(b.pattern, set()).add(b.entry)
        self._write({pattern: lambda current, r=removed: current - r for pattern, removed in doomed.items()})
        return matched

    def _write(self, changes) -> None:
        for pattern, entries in self.store.update_acls(changes).items():
            self.apply(pattern, entries)
