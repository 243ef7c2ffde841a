"""DescribeAcls (api key 29), v1-v3: the stored bindings a filter selects, grouped by resource
pattern; needs DESCRIBE on the cluster. A filter with an UNKNOWN element is INVALID_REQUEST;
without an authorizer the answer is SECURITY_DISABLED."""

from __future__ import annotations

from itertools import groupby

from logbroker.errors import InvalidRequestError, KafkaError
from logbroker.security.acl import AclOperation
from logbroker.server.apis._acls import (
    binding_filter,
    checked_authorizer,
    error_fields,
    unknown_filter_message,
)

API_KEY = 29


def handle(broker, request) -> dict:
    try:
        authorizer = checked_authorizer(broker, request, AclOperation.DESCRIBE)
    except KafkaError as exc:
        return {**error_fields(exc), "resources": []}
    selector = binding_filter(request.body)
    unknown = selector.unknown_element()
    if unknown is not None:
        return {"error_code": InvalidRequestError.code, "resources": [],
                "error_message": unknown_filter_message(unknown)}
    resources = []
    for pattern, bindings in groupby(authorizer.acls(selector), key=lambda b: b.pattern):
        resources.append({
            "resource_type": int(pattern.resource_type), "resource_name": pattern.name,
            "pattern_type": int(pattern.pattern_type),
            "acls": [{"principal": b.entry.principal, "host": b.entry.host,
                      "operation": int(b.entry.operation),
                      "permission_type": int(b.entry.permission_type)} for b in bindings]})
    return {"error_code": 0, "error_message": None, "resources": resources}
