"""Kafka's ACL model: resource patterns, access control entries, bindings and their filters.

An `AclBinding` is a `ResourcePattern` (resource type, name, LITERAL or PREFIXED) with an
`AccessControlEntry` (principal, host, operation, ALLOW or DENY). The enums carry the codes of
the protocol (CreateAcls, DescribeAcls, DeleteAcls) and print as Kafka's tools and its ZooKeeper
JSON spell them (`Topic`, `TransactionalId`, `DescribeConfigs`, `Allow`). Filters (`ANY`, and the
`MATCH` pattern type) exist only in `AclBindingFilter`; a binding is always concrete.

Wildcards: the resource name `*` (LITERAL) is every resource of its type, the principal `User:*`
every principal and the host `*` every host. Pure values, no I/O.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

WILDCARD_RESOURCE = "*"
WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"
CLUSTER_NAME = "kafka-cluster"


class _KafkaEnum(enum.IntEnum):
    @property
    def kafka_name(self) -> str:
        """Kafka's camel-case spelling: TRANSACTIONAL_ID → TransactionalId."""
        return "".join(word.capitalize() for word in self.name.split("_"))

    @classmethod
    def parse(cls, text: str):
        """An enum member from its name in any case, with or without underscores
        (`Read`, `READ`, `describe-configs`, `DescribeConfigs`); ValueError otherwise."""
        key = text.replace("_", "").replace("-", "").upper()
        for member in cls:
            if member.name.replace("_", "") == key:
                return member
        raise ValueError(f"unknown {cls.__name__} {text!r}; expected one of "
                         f"{', '.join(m.kafka_name for m in cls if m > 1)}")

    @classmethod
    def from_code(cls, code: int):
        """The member of a protocol code; UNKNOWN for a code this version does not know."""
        try:
            return cls(code)
        except ValueError:
            return cls(0)


class ResourceType(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class AclOperation(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


class PatternType(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


# An allowed operation implies others (Kafka's AclOperation javadoc): each key is implied by any
# operation of its value.
IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE,
                                      AclOperation.DELETE, AclOperation.ALTER}),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.DESCRIBE_CONFIGS,
                                              AclOperation.ALTER_CONFIGS}),
}

# The operations Kafka defines per resource type (AclEntry.supportedOperations), for
# authorized-operations bit fields.
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE,
                         AclOperation.DESCRIBE, AclOperation.DELETE, AclOperation.ALTER,
                         AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE),
    ResourceType.CLUSTER: (AclOperation.CREATE, AclOperation.CLUSTER_ACTION,
                           AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
                           AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER, AclOperation.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE),
}


@dataclass(frozen=True, slots=True, order=True)
class ResourcePattern:
    """A concrete resource pattern: type TOPIC…USER, pattern LITERAL or PREFIXED."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def __str__(self) -> str:
        return (f"ResourcePattern(resourceType={self.resource_type.name}, name={self.name}, "
                f"patternType={self.pattern_type.name})")


@dataclass(frozen=True, slots=True, order=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __str__(self) -> str:
        return (f"(principal={self.principal}, host={self.host}, operation={self.operation.name}, "
                f"permissionType={self.permission_type.name})")


@dataclass(frozen=True, slots=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """What DescribeAcls and DeleteAcls select. None matches any name, principal or host; ANY any
    type, operation or permission; pattern type ANY matches both pattern types with the exact
    name, MATCH every pattern that would apply to a resource of that name (its literal, the
    wildcard `*`, and each prefix of it)."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def unknown_element(self) -> str | None:
        """The first element with an UNKNOWN value, named, or None."""
        for label, value in (("resource type", self.resource_type), ("pattern type", self.pattern_type),
                             ("operation", self.operation), ("permission type", self.permission_type)):
            if value == 0:
                return label
        return None

    def matches_pattern(self, pattern: ResourcePattern) -> bool:
        if self.resource_type not in (ResourceType.ANY, pattern.resource_type):
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, pattern.pattern_type):
            return False
        if self.name is None:
            return True
        if self.pattern_type != PatternType.MATCH:
            return self.name == pattern.name
        if pattern.pattern_type == PatternType.LITERAL:
            return pattern.name in (self.name, WILDCARD_RESOURCE)
        return self.name.startswith(pattern.name)

    def matches_entry(self, entry: AccessControlEntry) -> bool:
        return ((self.principal is None or self.principal == entry.principal)
                and (self.host is None or self.host == entry.host)
                and self.operation in (AclOperation.ANY, entry.operation)
                and self.permission_type in (AclPermissionType.ANY, entry.permission_type))


# Characters ZooKeeper's PathUtils.validatePath refuses in a node name.
_ZNODE_ILLEGAL = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\uf8ff\ufff0-\uffff]")


def binding_error(binding: AclBinding) -> str | None:
    """Why a binding cannot be stored (Kafka's checks in CreateAcls), or None when it is valid."""
    pattern, entry = binding.pattern, binding.entry
    if pattern.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY) \
            or pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED) \
            or entry.operation in (AclOperation.UNKNOWN, AclOperation.ANY) \
            or entry.permission_type in (AclPermissionType.UNKNOWN, AclPermissionType.ANY):
        return "ACL binding contains unknown or ANY elements; name a concrete resource type, " \
               "pattern type (LITERAL or PREFIXED), operation and permission type"
    if pattern.resource_type == ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not pattern.name:
        return "Invalid empty resource name specified"
    if "/" in pattern.name or pattern.name in (".", "..") or _ZNODE_ILLEGAL.search(pattern.name):
        # The name becomes a znode under /kafka-acl/<type>/ (in both stores' layout): Kafka
        # refuses '/'; ZooKeeper also refuses "." and ".." and control or non-character code
        # points (its PathUtils), which Kafka would meet as a ZooKeeper error at write time.
        return f"ACL binding contains invalid resource name: {pattern.name!r}"
    kind, sep, name = entry.principal.partition(":")
    if not sep or not kind or not name:
        return f"Invalid principal {entry.principal!r}: expected <type>:<name>, e.g. User:alice"
    if not entry.host:
        return "Invalid empty host; use * for every host"
    return None
