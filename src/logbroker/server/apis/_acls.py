"""What CreateAcls, DescribeAcls and DeleteAcls share: request fields → ACL model values, the
checks every ACL API makes first, and the authorizer call that may block on ZooKeeper."""

from __future__ import annotations

import asyncio

from logbroker.errors import KafkaError, SecurityDisabledError
from logbroker.security.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from logbroker.server.authorization import require_cluster

SECURITY_DISABLED_MESSAGE = ("No authorizer is configured on the broker; set authorizer.class.name="
                             "kafka.security.authorizer.AclAuthorizer to use ACLs.")


def checked_authorizer(broker, request, operation: AclOperation):
    """The broker's authorizer, once the principal may do `operation` on the cluster (ALTER to
    change ACLs, DESCRIBE to list them); raises SECURITY_DISABLED or
    CLUSTER_AUTHORIZATION_FAILED otherwise."""
    if broker.authorizer is None:
        raise SecurityDisabledError(SECURITY_DISABLED_MESSAGE)
    require_cluster(broker, request, operation)
    return broker.authorizer


def binding_filter(f) -> AclBindingFilter:
    """A DescribeAcls request or DeleteAcls filter → AclBindingFilter (its fields are named
    `resource_type_filter`, … in both)."""
    return AclBindingFilter(
        ResourceType.from_code(f.resource_type_filter), f.resource_name_filter,
        PatternType.from_code(f.pattern_type_filter), f.principal_filter, f.host_filter,
        AclOperation.from_code(f.operation), AclPermissionType.from_code(f.permission_type))


def error_fields(exc: KafkaError) -> dict:
    return {"error_code": exc.code, "error_message": str(exc)}


def unknown_filter_message(element: str) -> str:
    return f"The filter's {element} is UNKNOWN; use ANY to match every value."


def binding_fields(binding: AclBinding) -> dict:
    """A binding as the response fields DeleteAcls' matching ACLs use."""
    p, e = binding.pattern, binding.entry
    return {"resource_type": int(p.resource_type), "resource_name": p.name,
            "pattern_type": int(p.pattern_type), "principal": e.principal, "host": e.host,
            "operation": int(e.operation), "permission_type": int(e.permission_type)}


async def blocking(broker, work, *args):
    """Run a store-writing authorizer call: in a thread on a cluster (ZooKeeper round trips),
    inline on a single node (the file store is only ever touched from the event loop)."""
    if broker.zk is None:
        return work(*args)
    return await asyncio.get_running_loop().run_in_executor(None, work, *args)
