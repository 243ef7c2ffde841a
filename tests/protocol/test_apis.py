from __future__ import annotations

import struct

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from logbroker.protocol import apis
from logbroker.protocol.apis import SUPPORTED_APIS, ApiKey
from logbroker.protocol.codec import encode_response
from protocol_helpers import kio_response_frame

ALL_VERSIONS = [(spec.api_key, v) for spec in SUPPORTED_APIS.values()
                for v in range(spec.min_version, spec.max_version + 1)]


def test_table_has_the_ranges_the_broker_implements():
    expected = {
        ApiKey.API_VERSIONS: (0, 4), ApiKey.METADATA: (0, 13), ApiKey.PRODUCE: (3, 11),
        ApiKey.FETCH: (4, 17), ApiKey.LIST_OFFSETS: (1, 10), ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 4),
        ApiKey.CREATE_TOPICS: (2, 7), ApiKey.DELETE_TOPICS: (1, 6), ApiKey.CREATE_PARTITIONS: (0, 3),
        ApiKey.DESCRIBE_CONFIGS: (1, 4), ApiKey.ALTER_CONFIGS: (0, 2),
        ApiKey.ALTER_REPLICA_LOG_DIRS: (1, 2), ApiKey.DESCRIBE_LOG_DIRS: (1, 4),
        ApiKey.DESCRIBE_TOPIC_PARTITIONS: (0, 0),
        ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1), ApiKey.DESCRIBE_CLUSTER: (0, 2),
        ApiKey.DELETE_RECORDS: (0, 2), ApiKey.INIT_PRODUCER_ID: (0, 4),
        ApiKey.OFFSET_COMMIT: (2, 10), ApiKey.OFFSET_FETCH: (1, 10), ApiKey.FIND_COORDINATOR: (0, 6),
        ApiKey.JOIN_GROUP: (0, 9), ApiKey.HEARTBEAT: (0, 4), ApiKey.LEAVE_GROUP: (0, 5),
        ApiKey.SYNC_GROUP: (0, 5), ApiKey.DESCRIBE_GROUPS: (0, 6), ApiKey.LIST_GROUPS: (0, 5),
        ApiKey.DELETE_GROUPS: (0, 2), ApiKey.OFFSET_DELETE: (0, 0),
        ApiKey.SASL_HANDSHAKE: (0, 1), ApiKey.SASL_AUTHENTICATE: (0, 2),
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0), ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
        ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1), ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
        ApiKey.CREATE_DELEGATION_TOKEN: (1, 3), ApiKey.RENEW_DELEGATION_TOKEN: (1, 2),
        ApiKey.EXPIRE_DELEGATION_TOKEN: (1, 2), ApiKey.DESCRIBE_DELEGATION_TOKEN: (1, 3),
        ApiKey.GET_TELEMETRY_SUBSCRIPTIONS: (0, 0), ApiKey.PUSH_TELEMETRY: (0, 0),
        ApiKey.LIST_CONFIG_RESOURCES: (0, 1),
        ApiKey.ELECT_LEADERS: (0, 2), ApiKey.CONTROLLED_SHUTDOWN: (1, 3),
        ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 1), ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
        ApiKey.DESCRIBE_ACLS: (1, 3), ApiKey.CREATE_ACLS: (1, 3), ApiKey.DELETE_ACLS: (1, 3),
        ApiKey.ADD_PARTITIONS_TO_TXN: (0, 4), ApiKey.ADD_OFFSETS_TO_TXN: (0, 4), ApiKey.END_TXN: (0, 4),
        ApiKey.TXN_OFFSET_COMMIT: (0, 4), ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
        ApiKey.LIST_TRANSACTIONS: (0, 1), ApiKey.WRITE_TXN_MARKERS: (1, 2), ApiKey.DESCRIBE_PRODUCERS: (0, 0),
        ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 1), ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 1),
        ApiKey.SHARE_GROUP_HEARTBEAT: (1, 1), ApiKey.SHARE_GROUP_DESCRIBE: (1, 1), ApiKey.SHARE_FETCH: (1, 2),
        ApiKey.SHARE_ACKNOWLEDGE: (1, 2), ApiKey.READ_SHARE_GROUP_STATE: (0, 0),
        ApiKey.WRITE_SHARE_GROUP_STATE: (0, 1), ApiKey.DELETE_SHARE_GROUP_STATE: (0, 0),
        ApiKey.INITIALIZE_SHARE_GROUP_STATE: (0, 0), ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: (0, 1),
        ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: (0, 1), ApiKey.ALTER_SHARE_GROUP_OFFSETS: (0, 0),
        ApiKey.DELETE_SHARE_GROUP_OFFSETS: (0, 0),
    }
    assert {k: (s.min_version, s.max_version) for k, s in SUPPORTED_APIS.items()} == expected


def test_nothing_opt_in_is_advertised():
    # clients.md 16: Produce <= 11 (no transactions v2). (KIP-848 groups and KIP-714 telemetry
    # are implemented, so ConsumerGroupHeartbeat and both telemetry APIs are advertised.)
    assert (ApiKey.GET_TELEMETRY_SUBSCRIPTIONS in SUPPORTED_APIS) == (ApiKey.PUSH_TELEMETRY in SUPPORTED_APIS)
    assert SUPPORTED_APIS[ApiKey.PRODUCE].max_version <= 11
    assert SUPPORTED_APIS[ApiKey.END_TXN].max_version <= 4
    assert SUPPORTED_APIS[ApiKey.TXN_OFFSET_COMMIT].max_version <= 4


@pytest.mark.parametrize("api_key, version", ALL_VERSIONS)
def test_every_supported_version_has_kio_classes_and_matching_flexibility(api_key, version):
    request = load_request_schema(api_key, version)
    response = load_response_schema(api_key, version)
    assert apis.is_flexible(api_key, version) == request.__flexible__ == response.__flexible__
    assert apis.request_header_version(api_key, version) == request.__header_schema__.__version__
    assert apis.response_header_version(api_key, version) == response.__header_schema__.__version__


def test_is_supported():
    assert apis.is_supported(ApiKey.METADATA, 0)
    assert apis.is_supported(ApiKey.METADATA, 13)
    assert not apis.is_supported(ApiKey.METADATA, 14)
    assert not apis.is_supported(ApiKey.PRODUCE, 2)
    assert not apis.is_supported(ApiKey.JOIN_GROUP, 10)
    assert apis.is_supported(ApiKey.SASL_HANDSHAKE, 0)
    assert not apis.is_supported(ApiKey.SASL_HANDSHAKE, 2)
    assert not apis.is_supported(12345, 0)


@pytest.mark.parametrize("version", [3, 4, 5, 7])
def test_api_versions_headers_for_flexible_and_future_versions(version):
    assert apis.request_header_version(ApiKey.API_VERSIONS, version) == 2
    assert apis.response_header_version(ApiKey.API_VERSIONS, version) == 0


def test_flexible_responses_use_header_v1():
    assert apis.response_header_version(ApiKey.METADATA, 9) == 1
    assert apis.response_header_version(ApiKey.METADATA, 8) == 0
    assert apis.request_header_version(ApiKey.METADATA, 9) == 2
    assert apis.request_header_version(ApiKey.METADATA, 8) == 1


@pytest.mark.parametrize("version", range(0, 5))
def test_api_versions_body_lists_the_table(version):
    body = apis.api_versions_body(version)
    assert body.error_code == ErrorCode.none
    assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == [
        (s.api_key, s.min_version, s.max_version) for s in SUPPORTED_APIS.values()]
    if version >= 3:
        assert body.supported_features == () and body.finalized_features == ()
    frame = encode_response(ApiKey.API_VERSIONS, version, 77, body)
    assert frame == kio_response_frame(body, 77)
    decoded, size = entity_reader(type(body))(frame, 8)
    assert decoded == body and 8 + size == len(frame)


@pytest.mark.parametrize("version", [3, 4])
def test_api_versions_response_header_has_no_tagged_field_byte(version):
    frame = encode_response(ApiKey.API_VERSIONS, version, 0x01020304, apis.api_versions_body(version))
    size, correlation_id = struct.unpack_from(">ii", frame)
    assert size == len(frame) - 4 and correlation_id == 0x01020304
    assert frame[8:10] == b"\x00\x00"  # straight into the body: error_code 0, no tag byte before it
    # A v1 header would put a 0 byte at 8 and shift the body: the api_keys count would be off.
    assert frame[10] == len(SUPPORTED_APIS) + 1  # compact array length of api_keys
