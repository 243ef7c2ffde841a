"""PushTelemetry (api key 72), v0 (KIP-714): a client's OTLP metrics, checked against its
subscription and the limits (server/client_telemetry.py), decoded and kept for /metrics."""

from __future__ import annotations

from logbroker.errors import KafkaError
from logbroker.server.apis._telemetry import identity, source

API_KEY = 72


def handle(broker, request) -> dict:
    body = request.body
    try:
        broker.client_telemetry.push(body.client_instance_id, subscription_id=body.subscription_id,
                                     terminating=body.terminating, compression_type=body.compression_type,
                                     metrics=body.metrics, identity=identity(request), source=source(request))
    except KafkaError as exc:
        return {"error_code": exc.code}
    return {"error_code": 0}
