"""DescribeCluster (api key 60), v0-1: the cluster id, the controller and the live brokers.

The brokers are listed with their advertised host and port, as in Metadata. v1's endpoint_type 2
(the KRaft controllers) is UNSUPPORTED_ENDPOINT_TYPE from a broker, as in Kafka. Without an
authorizer every operation is allowed, so asking for the cluster's authorized operations gets all
of those Kafka defines for the cluster resource.
"""

from __future__ import annotations

from logbroker.security.acl import CLUSTER_NAME
from logbroker.server.authorization import CLUSTER, authorized_operations

API_KEY = 60

BROKERS_ENDPOINT_TYPE = 1
UNSUPPORTED_ENDPOINT_TYPE = 115  # Kafka's error code; not yet in logbroker.errors
NO_AUTHORIZED_OPERATIONS = -2147483648

# AclOperation codes Kafka supports on the CLUSTER resource (AclEntry.supportedOperations):
# ALTER 7, DESCRIBE 8, CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11,
# IDEMPOTENT_WRITE 12, CREATE 5 — as a bit field.
ALL_CLUSTER_OPERATIONS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))


def handle(broker, request) -> dict:
    body = request.body
    endpoint_type = getattr(body, "endpoint_type", BROKERS_ENDPOINT_TYPE)
    if endpoint_type != BROKERS_ENDPOINT_TYPE:
        return {"error_code": UNSUPPORTED_ENDPOINT_TYPE, "endpoint_type": endpoint_type,
                "error_message": f"Unsupported endpoint type {endpoint_type}: brokers answer for "
                                 f"their brokers (1) only",
                "cluster_id": broker.cluster_id, "controller_id": -1, "brokers": []}
    return {
        "error_code": 0,
        "error_message": None,
        "endpoint_type": BROKERS_ENDPOINT_TYPE,
        "cluster_id": broker.cluster_id,
        "controller_id": broker.controller_id,
        "brokers": [{"broker_id": b.broker_id, "host": b.host, "port": b.port, "rack": b.rack}
                    for b in broker.brokers(getattr(request.connection, "listener_name", None))],
        "cluster_authorized_operations": (cluster_operations(broker, request)
                                          if body.include_cluster_authorized_operations
                                          else NO_AUTHORIZED_OPERATIONS),
    }


def cluster_operations(broker, request) -> int:
    """The operations allowed on the cluster: all of them without an authorizer."""
    if broker.authorizer is None:
        return ALL_CLUSTER_OPERATIONS
    return authorized_operations(broker, request, CLUSTER, CLUSTER_NAME)
