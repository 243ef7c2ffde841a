"""The supported-versions table: which Kafka APIs this broker answers, at which versions.

`SUPPORTED_APIS` is the single source. The ApiVersions response is built from it, the request
decoder refuses anything outside it, and the header versions follow from its `flexible_from`
column. Clients switch features on purely from what we advertise (clients.md 4, 5), so a row goes
in only when its handler exists, and raising a maximum is a promise that every field of the new
versions is honoured.

To add an API (FindCoordinator, JoinGroup, …) add one `ApiSpec` row. `flexible_from` is the first
version in the API's `flexibleVersions` in Kafka's message JSON (None if it has none);
tests/protocol/test_apis.py checks every row against kio's generated classes.
"""

from __future__ import annotations

import datetime
import enum
import importlib
from dataclasses import dataclass
from functools import cache
from types import MappingProxyType

from logbroker.protocol import extra_apis  # names ControlledShutdown's classes in kio's index
from logbroker.protocol.errors import UnknownApiKeyError


class ApiKey(enum.IntEnum):
    """Kafka's api keys (the `apiKey` of each message JSON), named as in Kafka's `ApiKeys`."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    CONTROLLED_SHUTDOWN = 7
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    CREATE_DELEGATION_TOKEN = 38
    RENEW_DELEGATION_TOKEN = 39
    EXPIRE_DELEGATION_TOKEN = 40
    DESCRIBE_DELEGATION_TOKEN = 41
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    GET_TELEMETRY_SUBSCRIPTIONS = 71
    PUSH_TELEMETRY = 72
    LIST_CONFIG_RESOURCES = 74
    DESCRIBE_TOPIC_PARTITIONS = 75
    SHARE_GROUP_HEARTBEAT = 76
    SHARE_GROUP_DESCRIBE = 77
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79
    INITIALIZE_SHARE_GROUP_STATE = 83
    READ_SHARE_GROUP_STATE = 84
    WRITE_SHARE_GROUP_STATE = 85
    DELETE_SHARE_GROUP_STATE = 86
    READ_SHARE_GROUP_STATE_SUMMARY = 87
    DESCRIBE_SHARE_GROUP_OFFSETS = 90
    ALTER_SHARE_GROUP_OFFSETS = 91
    DELETE_SHARE_GROUP_OFFSETS = 92


@dataclass(frozen=True, slots=True)
class ApiSpec:
    """One row of the table. Versions are inclusive; `min_version <= max_version`."""

    api_key: int
    min_version: int
    max_version: int
    flexible_from: int | None  # first flexible version, None if the API has none

    @property
    def name(self) -> str:
        try:
            return ApiKey(self.api_key).name
        except ValueError:
            return f"API_{self.api_key}"

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    def is_flexible(self, version: int) -> bool:
        return self.flexible_from is not None and version >= self.flexible_from


def _table(*specs: ApiSpec) -> MappingProxyType[int, ApiSpec]:
    for spec in specs:
        assert spec.min_version <= spec.max_version, spec
    return MappingProxyType({spec.api_key: spec for spec in sorted(specs, key=lambda s: s.api_key)})


# (api key, min, max, flexible from). Floors are Kafka 2.1's where kio (built from Kafka 4's
# schemas) still has the classes; see the module docstring before raising a maximum.
SUPPORTED_APIS: MappingProxyType[int, ApiSpec] = _table(
    ApiSpec(ApiKey.PRODUCE, 3, 11, 9),  # 12 is KIP-890 transactions v2: not before we do them
    ApiSpec(ApiKey.FETCH, 4, 17, 12),  # 13+ names topics by id (clients.md 6)
    ApiSpec(ApiKey.LIST_OFFSETS, 1, 10, 6),
    ApiSpec(ApiKey.METADATA, 0, 13, 9),
    ApiSpec(ApiKey.API_VERSIONS, 0, 4, 3),
    ApiSpec(ApiKey.CREATE_TOPICS, 2, 7, 5),
    ApiSpec(ApiKey.DELETE_TOPICS, 1, 6, 4),
    ApiSpec(ApiKey.DELETE_RECORDS, 0, 2, 2),
    ApiSpec(ApiKey.INIT_PRODUCER_ID, 0, 4, 2),
    ApiSpec(ApiKey.OFFSET_FOR_LEADER_EPOCH, 2, 4, 4),
    # Transactions v1 (KIP-98) with KIP-890 part 1: AddPartitionsToTxn v4 is the brokers' verify
    # form; the v5 / EndTxn v5 / TxnOffsetCommit v5 of transactions v2 are not advertised.
    ApiSpec(ApiKey.ADD_PARTITIONS_TO_TXN, 0, 4, 3),
    ApiSpec(ApiKey.ADD_OFFSETS_TO_TXN, 0, 4, 3),
    ApiSpec(ApiKey.END_TXN, 0, 4, 3),
    ApiSpec(ApiKey.TXN_OFFSET_COMMIT, 0, 4, 3),
    ApiSpec(ApiKey.DESCRIBE_TRANSACTIONS, 0, 0, 0),
    ApiSpec(ApiKey.LIST_TRANSACTIONS, 0, 1, 0),
    ApiSpec(ApiKey.DESCRIBE_CONFIGS, 1, 4, 4),
    ApiSpec(ApiKey.ALTER_CONFIGS, 0, 2, 2),
    ApiSpec(ApiKey.CREATE_PARTITIONS, 0, 3, 2),
    ApiSpec(ApiKey.ALTER_REPLICA_LOG_DIRS, 1, 2, 2),  # v0 is gone in Kafka 4
    ApiSpec(ApiKey.DESCRIBE_LOG_DIRS, 1, 4, 2),  # v5 (KIP-1066 cordoned dirs) is newer than 4.2
    ApiSpec(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, 0, 0),
    ApiSpec(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1, 1),
    ApiSpec(ApiKey.DESCRIBE_CLUSTER, 0, 2, 0),
    ApiSpec(ApiKey.OFFSET_COMMIT, 2, 10, 8),
    ApiSpec(ApiKey.OFFSET_FETCH, 1, 10, 6),
    ApiSpec(ApiKey.FIND_COORDINATOR, 0, 6, 3),
    ApiSpec(ApiKey.JOIN_GROUP, 0, 9, 6),
    ApiSpec(ApiKey.HEARTBEAT, 0, 4, 4),
    ApiSpec(ApiKey.LEAVE_GROUP, 0, 5, 4),
    ApiSpec(ApiKey.SYNC_GROUP, 0, 5, 4),
    ApiSpec(ApiKey.DESCRIBE_GROUPS, 0, 6, 5),
    ApiSpec(ApiKey.LIST_GROUPS, 0, 5, 3),
    ApiSpec(ApiKey.DELETE_GROUPS, 0, 2, 2),
    ApiSpec(ApiKey.OFFSET_DELETE, 0, 0, None),
    ApiSpec(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, 1, 0),  # KIP-848 consumer groups
    ApiSpec(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, 1, 0),
    ApiSpec(ApiKey.SASL_HANDSHAKE, 0, 1, None),
    ApiSpec(ApiKey.SASL_AUTHENTICATE, 0, 2, 2),
    ApiSpec(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, 0, 0),
    ApiSpec(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, 0, 0),
    ApiSpec(ApiKey.CREATE_DELEGATION_TOKEN, 1, 3, 2),  # KIP-48; kio has no v0 (gone in Kafka 4)
    ApiSpec(ApiKey.RENEW_DELEGATION_TOKEN, 1, 2, 2),
    ApiSpec(ApiKey.EXPIRE_DELEGATION_TOKEN, 1, 2, 2),
    ApiSpec(ApiKey.DESCRIBE_DELEGATION_TOKEN, 1, 3, 2),
    # KIP-714 client telemetry: librdkafka pushes its metrics once these are advertised.
    ApiSpec(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0, 0, 0),
    ApiSpec(ApiKey.PUSH_TELEMETRY, 0, 0, 0),
    ApiSpec(ApiKey.LIST_CONFIG_RESOURCES, 0, 1, 0),
    ApiSpec(ApiKey.DESCRIBE_CLIENT_QUOTAS, 0, 1, 1),
    ApiSpec(ApiKey.ALTER_CLIENT_QUOTAS, 0, 1, 1),
    ApiSpec(ApiKey.DESCRIBE_ACLS, 1, 3, 2),  # v0 (no pattern types) is gone from kio
    ApiSpec(ApiKey.CREATE_ACLS, 1, 3, 2),
    ApiSpec(ApiKey.DELETE_ACLS, 1, 3, 2),
    ApiSpec(ApiKey.ELECT_LEADERS, 0, 2, 2),
    ApiSpec(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, 1, 0),
    ApiSpec(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, 0, 0),
    ApiSpec(ApiKey.WRITE_TXN_MARKERS, 1, 2, 1),  # inter-broker; kio has no v0 (gone in Kafka 4)
    ApiSpec(ApiKey.DESCRIBE_PRODUCERS, 0, 0, 0),
    # KIP-932 share groups (kio has no v0: Kafka 4.0's early-access versions are gone).
    ApiSpec(ApiKey.SHARE_GROUP_HEARTBEAT, 1, 1, 0),
    ApiSpec(ApiKey.SHARE_GROUP_DESCRIBE, 1, 1, 0),
    ApiSpec(ApiKey.SHARE_FETCH, 1, 2, 0),
    ApiSpec(ApiKey.SHARE_ACKNOWLEDGE, 1, 2, 0),
    ApiSpec(ApiKey.INITIALIZE_SHARE_GROUP_STATE, 0, 0, 0),  # inter-broker: the share persister
    ApiSpec(ApiKey.READ_SHARE_GROUP_STATE, 0, 0, 0),
    ApiSpec(ApiKey.WRITE_SHARE_GROUP_STATE, 0, 1, 0),
    ApiSpec(ApiKey.DELETE_SHARE_GROUP_STATE, 0, 0, 0),
    ApiSpec(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, 0, 1, 0),
    ApiSpec(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 0, 1, 0),
    ApiSpec(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, 0, 0),
    ApiSpec(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, 0, 0),
    ApiSpec(ApiKey.CONTROLLED_SHUTDOWN, *extra_apis.CONTROLLED_SHUTDOWN_VERSIONS,
            extra_apis.CONTROLLED_SHUTDOWN_FLEXIBLE_FROM),  # inter-broker, ZooKeeper mode; not in kio (Kafka 4)
)

# ApiVersions' own flexible-from, which header parsing needs even for versions above our maximum.
API_VERSIONS_FLEXIBLE_FROM = 3


def api_spec(api_key: int) -> ApiSpec:
    """The table row of an api key; UnknownApiKeyError if we do not implement it."""
    spec = SUPPORTED_APIS.get(api_key)
    if spec is None:
        raise UnknownApiKeyError(
            f"api key {api_key} is not supported by this broker",
            api_key=api_key, api_version=-1, correlation_id=-1)
    return spec


def is_supported(api_key: int, version: int) -> bool:
    spec = SUPPORTED_APIS.get(api_key)
    return spec is not None and spec.min_version <= version <= spec.max_version


def is_flexible(api_key: int, version: int) -> bool:
    return api_spec(api_key).is_flexible(version)


def request_header_version(api_key: int, version: int) -> int:
    """2 (client id + tagged fields) iff the request version is flexible, else 1.

    Holds for ApiVersions too, and for versions above our maximum (Kafka parses an unknown newer
    ApiVersions request's header the same way before answering UNSUPPORTED_VERSION).
    """
    if api_key == ApiKey.API_VERSIONS:
        return 2 if version >= API_VERSIONS_FLEXIBLE_FROM else 1
    return 2 if api_spec(api_key).is_flexible(version) else 1


def response_header_version(api_key: int, version: int) -> int:
    """1 (with a tagged-field byte) iff the response is flexible — except ApiVersions, always 0.

    Clients read the ApiVersions response before they know what the broker speaks, so Kafka
    never gives it the tagged-field byte (clients.md 1).
    """
    if api_key == ApiKey.API_VERSIONS:
        return 0
    return 1 if api_spec(api_key).is_flexible(version) else 0


def api_versions_entries() -> tuple[tuple[int, int, int], ...]:
    """(api key, min version, max version) for every supported api, sorted by api key."""
    return tuple((s.api_key, s.min_version, s.max_version) for s in SUPPORTED_APIS.values())


@cache
def _api_versions_classes(version: int):  # noqa: ANN202 - kio classes, typed at the call site
    from kio.index import load_response_schema

    response_cls = load_response_schema(ApiKey.API_VERSIONS, version)
    return response_cls, importlib.import_module(response_cls.__module__).ApiVersion


def api_versions_body(version: int, *, error_code: int = 0, throttle_time_ms: int = 0):  # noqa: ANN201
    """The kio ApiVersionsResponse of `version` listing the table, for `codec.encode_response`.

    v3+ carries no supported or finalized features: we advertise no feature flags until a
    feature exists (clients.md 4) — Java 4.x would turn on transactions v2 from one.
    """
    from kio.schema.errors import ErrorCode

    response_cls, api_version_cls = _api_versions_classes(version)
    kwargs = {
        "error_code": ErrorCode(error_code),
        "api_keys": tuple(api_version_cls(api_key=k, min_version=lo, max_version=hi)
                          for k, lo, hi in api_versions_entries()),
    }
    if version >= 1:
        kwargs["throttle_time"] = datetime.timedelta(milliseconds=throttle_time_ms)
    return response_cls(**kwargs)
