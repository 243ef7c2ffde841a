"""GetTelemetrySubscriptions (api key 71), v0 (KIP-714): the metrics this client is asked to push
and how often (server/client_telemetry.py). A zero or null instance id gets a new one. No
subscription matching: no metrics requested, the default 5-minute interval."""

from __future__ import annotations

from logbroker.server.apis._telemetry import identity, source
from logbroker.server.client_telemetry import ACCEPTED_COMPRESSION_TYPES

API_KEY = 71


def handle(broker, request) -> dict:
    telemetry = broker.client_telemetry
    instance_id, subscription = telemetry.get_subscription(
        request.body.client_instance_id, identity=identity(request), source=source(request))
    return {"error_code": 0, "client_instance_id": instance_id,
            "subscription_id": subscription.subscription_id,
            "accepted_compression_types": list(ACCEPTED_COMPRESSION_TYPES),
            "push_interval": subscription.interval_ms, "telemetry_max_bytes": telemetry.max_bytes,
            "delta_temporality": True, "requested_metrics": list(subscription.metrics)}
