"""ApiVersions (api key 18): the versions table, the one switch clients read to turn features on.

Only what is implemented is advertised (clients.md 4). An unsupported ApiVersions version never
reaches here: the codec answers it with UNSUPPORTED_VERSION and a v0 body (clients.md 2). The
client software name and version of v3+ are kept on the connection: client telemetry labels a
client's metrics with them, as Kafka's ClientMetricsManager does.
"""

from __future__ import annotations

from logbroker.protocol.apis import api_versions_body

API_KEY = 18


def handle(broker, request):
    body = request.body
    if request.api_version >= 3 and request.connection is not None:  # the client's identity, for telemetry
        request.connection.client_software = (body.client_software_name, body.client_software_version)
    return api_versions_body(request.api_version)
