"""APIs this broker answers that kio does not have, registered in kio's index by name.

kio is generated from Kafka 4's message JSON, and Kafka 4 dropped the ZooKeeper-era inter-broker
APIs, ControlledShutdown among them; protocol/controlled_shutdown.py builds its classes. This
module holds what the supported-versions table needs (api key, versions) and registers where the
classes live, so that `load_request_schema(7, v)` and `load_response_schema(7, v)` — hence the
codec, the dispatcher and the outbound client — find them like any other API's. kio imports a
class's module when it first resolves it, so the classes (~5 ms of dataclass building) are built
only in a broker that receives or sends a ControlledShutdown, not at every start.
"""

from __future__ import annotations

from types import MappingProxyType

import kio.index
from kio.static.constants import EntityType

CONTROLLED_SHUTDOWN_KEY = 7
CONTROLLED_SHUTDOWN_NAME = "controlled_shutdown"
CONTROLLED_SHUTDOWN_VERSIONS = (1, 3)  # v0's request header has no client id (Kafka 0.8-era brokers)
CONTROLLED_SHUTDOWN_FLEXIBLE_FROM = 3
_CLASSES = "logbroker.protocol.controlled_shutdown"


def register() -> None:
    """Name ControlledShutdown's classes in kio's index (idempotent)."""
    if CONTROLLED_SHUTDOWN_KEY in kio.index.api_key_map:
        return
    kio.index.api_key_map = MappingProxyType({**kio.index.api_key_map,
                                              CONTROLLED_SHUTDOWN_KEY: CONTROLLED_SHUTDOWN_NAME})
    low, high = CONTROLLED_SHUTDOWN_VERSIONS
    versions = {v: MappingProxyType({
        EntityType.request: f"{_CLASSES}:ControlledShutdownRequestV{v}",
        EntityType.response: f"{_CLASSES}:ControlledShutdownResponseV{v}",
    }) for v in range(low, high + 1)}
    kio.index.schema_name_map = MappingProxyType({**kio.index.schema_name_map,
                                                  CONTROLLED_SHUTDOWN_NAME: MappingProxyType(versions)})


register()
