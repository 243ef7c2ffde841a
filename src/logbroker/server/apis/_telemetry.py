"""What GetTelemetrySubscriptions and PushTelemetry know of the client asking: its identity (the
labels of its metrics) and its source address (for subscriptions' `match`)."""

from __future__ import annotations

from logbroker.server.authorization import principal


def identity(request) -> dict[str, str]:
    connection = request.connection
    name, version = connection.client_software if connection is not None else ("", "")
    return {"client_id": request.client_id or "", "client_software_name": name,
            "client_software_version": version, "principal": principal(request)}


def source(request) -> dict[str, str]:
    peer = request.connection.peer if request.connection is not None else ""
    address, _, port = peer.rpartition(":")
    return {"client_source_address": address, "client_source_port": port}
