"""DescribeUserScramCredentials (api key 50), v0: which SCRAM mechanisms (and iterations) each
user has — never the credentials themselves.

`users` null or empty describes every user; an unknown user gets RESOURCE_NOT_FOUND, a user named
twice DUPLICATE_RESOURCE, as in Kafka.
"""

from __future__ import annotations

from logbroker.errors import DuplicateResourceError, KafkaError, ResourceNotFoundError
from logbroker.security.acl import AclOperation
from logbroker.security.scram import MECHANISMS
from logbroker.server.authorization import require_cluster

API_KEY = 50


def handle(broker, request) -> dict:
    try:
        require_cluster(broker, request, AclOperation.DESCRIBE)
    except KafkaError as exc:
        return {"error_code": exc.code, "error_message": str(exc), "results": []}
    stored = broker.credential_store.scram_users()
    asked = [u.name for u in (request.body.users or ())]
    names = asked or sorted(stored)
    results = []
    for name in dict.fromkeys(names):
        if asked.count(name) > 1:
            results.append({"user": name, "error_code": DuplicateResourceError.code,
                            "error_message": f"Cannot describe SCRAM credentials for the same user "
                                             f"twice in a single request: {name}"})
        elif name not in stored:
            results.append({"user": name, "error_code": ResourceNotFoundError.code,
                            "error_message": f"Attempt to describe a user credential that does not "
                                             f"exist: {name}"})
        else:
            results.append({"user": name, "error_code": 0, "error_message": None,
                            "credential_infos": [
                                {"mechanism": MECHANISMS[m][1], "iterations": c.iterations}
                                for m, c in sorted(stored[name].items())]})
    return {"error_code": 0, "error_message": None, "results": results}
