"""ACLs as Kafka 3.9 writes them in ZooKeeper (ZkData's ResourceZNode and the change notices),
used by both stores: the file store keeps the same JSON per resource.

    /kafka-acl/<ResourceType>/<name>                      literal patterns
    /kafka-acl-extended/prefixed/<ResourceType>/<name>    prefixed patterns
    data: {"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",
                                "operation":"Read","host":"*"}]}
    /kafka-acl-changes/acl_changes_<seq>           literal change notice: b"Topic:orders"
    /kafka-acl-extended-changes/acl_changes_<seq>  {"version":1,"resourceType":"Topic",
                                                    "name":"orders","patternType":"Prefixed"}

Resource types, operations and permission types are spelt as Kafka spells them (`Topic`,
`TransactionalId`, `DescribeConfigs`, `Allow`). Pure functions, no I/O.
"""

from __future__ import annotations

import json

from logbroker.security.acl import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

LITERAL_ROOT = "/kafka-acl"
PREFIXED_ROOT = "/kafka-acl-extended/prefixed"
LITERAL_CHANGES = "/kafka-acl-changes"
EXTENDED_CHANGES = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"
RESOURCE_TYPES = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER,
                  ResourceType.TRANSACTIONAL_ID, ResourceType.DELEGATION_TOKEN, ResourceType.USER)


def encode_acls(entries) -> dict:
    """A resource's entries → the JSON object of its znode (sorted, so equal sets encode equal)."""
    return {"version": 1, "acls": [
        {"principal": e.principal, "permissionType": e.permission_type.kafka_name,
         "operation": e.operation.kafka_name, "host": e.host} for e in sorted(entries)]}


def decode_acls(data: dict) -> frozenset[AccessControlEntry]:
    return frozenset(
        AccessControlEntry(a["principal"], a["host"], AclOperation.parse(a["operation"]),
                           AclPermissionType.parse(a["permissionType"])) for a in data["acls"])


def acls_to_bytes(entries) -> bytes:
    return json.dumps(encode_acls(entries), separators=(",", ":")).encode()


def acls_from_bytes(data: bytes) -> frozenset[AccessControlEntry]:
    return decode_acls(json.loads(data)) if data else frozenset()


def pattern_key(pattern: ResourcePattern) -> str:
    """`Topic:LITERAL:orders`, the form of Kafka's audit log; names may hold ':'."""
    return f"{pattern.resource_type.kafka_name}:{pattern.pattern_type.name}:{pattern.name}"


def pattern_from_key(key: str) -> ResourcePattern:
    resource_type, pattern_type, name = key.split(":", 2)
    return ResourcePattern(ResourceType.parse(resource_type), name, PatternType.parse(pattern_type))


def resource_path(pattern: ResourcePattern) -> str:
    root = LITERAL_ROOT if pattern.pattern_type == PatternType.LITERAL else PREFIXED_ROOT
    return f"{root}/{pattern.resource_type.kafka_name}/{pattern.name}"


def change_notice(pattern: ResourcePattern) -> tuple[str, bytes]:
    """(the sequential znode path prefix, its payload) announcing a change of `pattern`."""
    if pattern.pattern_type == PatternType.LITERAL:
        return (f"{LITERAL_CHANGES}/{CHANGE_PREFIX}",
                f"{pattern.resource_type.kafka_name}:{pattern.name}".encode())
    payload = {"version": 1, "resourceType": pattern.resource_type.kafka_name, "name": pattern.name,
               "patternType": pattern.pattern_type.kafka_name}
    return f"{EXTENDED_CHANGES}/{CHANGE_PREFIX}", json.dumps(payload, separators=(",", ":")).encode()


def pattern_from_notice(root: str, data: bytes) -> ResourcePattern:
    """The pattern a change notice under `root` names; ValueError/KeyError when malformed."""
    if root == LITERAL_CHANGES:
        resource_type, _, name = data.decode().partition(":")
        return ResourcePattern(ResourceType.parse(resource_type), name, PatternType.LITERAL)
    notice = json.loads(data)
    return ResourcePattern(ResourceType.parse(notice["resourceType"]), notice["name"],
                           PatternType.parse(notice["patternType"]))
