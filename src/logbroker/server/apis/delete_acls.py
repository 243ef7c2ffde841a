"""DeleteAcls (api key 31), v1-v3: remove every binding each filter selects and return them per
filter; needs ALTER on the cluster. A filter with an UNKNOWN element gets INVALID_REQUEST (the
others still apply); without an authorizer every filter gets SECURITY_DISABLED."""

from __future__ import annotations

from logbroker.errors import InvalidRequestError, KafkaError
from logbroker.security.acl import AclOperation
from logbroker.server.apis._acls import (
    binding_fields,
    binding_filter,
    blocking,
    checked_authorizer,
    error_fields,
    unknown_filter_message,
)

API_KEY = 31


async def handle(broker, request) -> dict:
    filters = request.body.filters
    selectors = [binding_filter(f) for f in filters]
    unknown = [s.unknown_element() for s in selectors]
    try:
        authorizer = checked_authorizer(broker, request, AclOperation.ALTER)
        removed = iter(await blocking(broker, authorizer.delete_acls,
                                      [s for s, u in zip(selectors, unknown) if u is None]))
    except KafkaError as exc:
        return {"filter_results": [{**error_fields(exc), "matching_acls": []} for _ in filters]}
    results = []
    for problem in unknown:
        if problem is not None:
            results.append({"error_code": InvalidRequestError.code, "matching_acls": [],
                            "error_message": unknown_filter_message(problem)})
        else:
            results.append({"error_code": 0, "error_message": None, "matching_acls": [
                {"error_code": 0, "error_message": None, **binding_fields(b)} for b in next(removed)]})
    return {"filter_results": results}
