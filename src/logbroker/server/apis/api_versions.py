"""ApiVersions (api key 18): the versions table, the one switch clients read to turn features on.

Only what is implemented is advertised (clients.md 4). An unsupported ApiVersions version never
reaches here: the codec answers it with UNSUPPORTED_VERSION and a v0 body (clients.md 2).
"""

from __future__ import annotations

from logbroker.protocol.apis import api_versions_body

API_KEY = 18


def handle(broker, request):
    return api_versions_body(request.api_version)
