"""ControlledShutdown's message classes (api key 7), v1-3, added to kio's index.

kio is generated from Kafka 4's message JSON, and Kafka 4 dropped the ZooKeeper-era inter-broker
APIs, ControlledShutdown among them. These are the same kio-style entities built from Kafka 3.9's
ControlledShutdownRequest.json / ControlledShutdownResponse.json:

    request   broker_id int32; broker_epoch int64 (v2+, default -1)
    response  error_code int16; remaining_partitions [topic_name string, partition_index int32]

v3 is flexible (request header v2, response header v1). v0 is left out: its request header has
no client id (header v0), which only Kafka 0.8-era brokers send.

protocol/extra_apis.py names these classes in `kio.index`; kio imports this module when it first
resolves one of them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import field

from kio.schema.errors import ErrorCode
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.schema.types import BrokerId, TopicName
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32, i64

from logbroker.protocol.extra_apis import CONTROLLED_SHUTDOWN_FLEXIBLE_FROM as FLEXIBLE_FROM
from logbroker.protocol.extra_apis import CONTROLLED_SHUTDOWN_KEY as API_KEY


def _entity(name: str, entity_type: EntityType, version: int, fields: list) -> type:
    flexible = version >= FLEXIBLE_FROM
    if entity_type == EntityType.request:
        header = RequestHeaderV2 if flexible else RequestHeaderV1
    else:
        header = ResponseHeaderV1 if flexible else ResponseHeaderV0
    namespace = {"__type__": entity_type, "__version__": i16(version), "__flexible__": flexible,
                 "__api_key__": i16(API_KEY), "__header_schema__": header}
    cls = dataclasses.make_dataclass(name, fields, namespace=namespace, frozen=True, slots=True,
                                     kw_only=True)
    cls.__module__ = __name__
    return cls


def _messages(version: int) -> tuple[type, type]:
    """(request class, response class) of one version."""
    request_fields = [("broker_id", BrokerId, field(metadata={"kafka_type": "int32"}))]
    if version >= 2:
        request_fields.append(("broker_epoch", i64, field(metadata={"kafka_type": "int64"}, default=i64(-1))))
    remaining = _entity("RemainingPartition", EntityType.nested, version, [
        ("topic_name", TopicName, field(metadata={"kafka_type": "string"})),
        ("partition_index", i32, field(metadata={"kafka_type": "int32"})),
    ])
    response = _entity("ControlledShutdownResponse", EntityType.response, version, [
        ("error_code", ErrorCode, field(metadata={"kafka_type": "error_code"})),
        ("remaining_partitions", tuple[remaining, ...]),
    ])
    response.RemainingPartition = remaining
    return _entity("ControlledShutdownRequest", EntityType.request, version, request_fields), response


ControlledShutdownRequestV1, ControlledShutdownResponseV1 = _messages(1)
ControlledShutdownRequestV2, ControlledShutdownResponseV2 = _messages(2)
ControlledShutdownRequestV3, ControlledShutdownResponseV3 = _messages(3)
# A version of extra_apis.CONTROLLED_SHUTDOWN_VERSIONS without its two classes here would fail
# only when a peer sends it: tests/protocol/test_apis.py loads every supported version's classes.
