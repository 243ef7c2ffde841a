"""CreateAcls (api key 30), v1-v3: add ACL bindings; needs ALTER on the cluster.

Each creation is answered in order: INVALID_REQUEST for a binding that names an unknown or ANY
element, a CLUSTER resource not called kafka-cluster, an empty name or a malformed principal;
otherwise it is stored. Without an authorizer every creation gets SECURITY_DISABLED.
"""

from __future__ import annotations

from logbroker.errors import InvalidRequestError, KafkaError
from logbroker.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    binding_error,
)
from logbroker.server.apis._acls import blocking, checked_authorizer, error_fields

API_KEY = 30


async def handle(broker, request) -> dict:
    bindings = [AclBinding(
        ResourcePattern(ResourceType.from_code(c.resource_type), c.resource_name,
                        PatternType.from_code(c.resource_pattern_type)),
        AccessControlEntry(c.principal, c.host, AclOperation.from_code(c.operation),
                           AclPermissionType.from_code(c.permission_type)))
        for c in request.body.creations]
    problems = [binding_error(b) for b in bindings]
    try:
        authorizer = checked_authorizer(broker, request, AclOperation.ALTER)
        await blocking(broker, authorizer.create_acls,
                       [b for b, problem in zip(bindings, problems) if problem is None])
    except KafkaError as exc:
        return {"results": [error_fields(exc) for _ in bindings]}
    return {"results": [{"error_code": 0, "error_message": None} if problem is None
                        else {"error_code": InvalidRequestError.code, "error_message": problem}
                        for problem in problems]}
