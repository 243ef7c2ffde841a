"""The Kafka wire protocol, sans I/O: bytes in, objects out; objects in, bytes out.

    framing.FrameDecoder      socket bytes -> request frames (size-prefixed)
    codec.decode_request      frame -> Request (header fields + kio request object)
    codec.encode_response     kio response object -> response frame
    responses.*               hand-written encoders of the hot responses (Produce, Fetch,
                              Metadata, ListOffsets); Fetch returns chunks for os.sendfile
    apis.SUPPORTED_APIS       the supported-versions table, the single source of ApiVersions
    headers                   request header v1/v2, response header v0/v1

Nothing here touches a socket or imports from logbroker beyond the leaves (errors).
"""

from logbroker.protocol.apis import (
    SUPPORTED_APIS,
    ApiKey,
    ApiSpec,
    api_versions_body,
    is_supported,
    request_header_version,
    response_header_version,
)
from logbroker.protocol.codec import (
    Request,
    decode_request,
    encode_api_versions_unsupported,
    encode_response,
)
from logbroker.protocol.errors import (
    InvalidReceiveError,
    MalformedRequestError,
    RequestHeaderError,
    UnknownApiKeyError,
    UnsupportedApiVersionError,
    UnsupportedApiVersionsRequest,
)
from logbroker.protocol.framing import DEFAULT_MAX_REQUEST_BYTES, FrameDecoder
from logbroker.protocol.responses.common import NodeEndpoint
from logbroker.protocol.responses.fetch import FetchPartitionData, FetchTopicData, encode_fetch_response
from logbroker.protocol.responses.list_offsets import (
    ListOffsetsPartitionResult,
    ListOffsetsTopicResult,
    encode_list_offsets_response,
)
from logbroker.protocol.responses.metadata import (
    MetadataBroker,
    MetadataPartition,
    MetadataTopic,
    encode_metadata_response,
)
from logbroker.protocol.responses.produce import (
    ProducePartitionResult,
    ProduceTopicResult,
    encode_produce_response,
)

__all__ = [
    "DEFAULT_MAX_REQUEST_BYTES",
    "SUPPORTED_APIS",
    "ApiKey",
    "ApiSpec",
    "FetchPartitionData",
    "FetchTopicData",
    "FrameDecoder",
    "InvalidReceiveError",
    "ListOffsetsPartitionResult",
    "ListOffsetsTopicResult",
    "MalformedRequestError",
    "MetadataBroker",
    "MetadataPartition",
    "MetadataTopic",
    "NodeEndpoint",
    "ProducePartitionResult",
    "ProduceTopicResult",
    "Request",
    "RequestHeaderError",
    "UnknownApiKeyError",
    "UnsupportedApiVersionError",
    "UnsupportedApiVersionsRequest",
    "api_versions_body",
    "decode_request",
    "encode_api_versions_unsupported",
    "encode_fetch_response",
    "encode_list_offsets_response",
    "encode_metadata_response",
    "encode_produce_response",
    "encode_response",
    "is_supported",
    "request_header_version",
    "response_header_version",
]
