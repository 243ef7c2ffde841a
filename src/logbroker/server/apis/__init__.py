"""One module per Kafka API, each with `API_KEY` and `handle(broker, request)`.

REGISTRY maps an api key to its handler; the supported versions live in
`logbroker.protocol.apis`, the single table the ApiVersions answer is built from.

Each API's module is imported on the first request for it, not when the broker starts: most
brokers never see most of the 61 APIs (share groups, KIP-848, transactions, SCRAM and ACL admin),
and their modules pull in their coordinators and kio schemas (~25 ms of start and
~3 MiB a broker would carry unused). A module is named after its API (`ApiKey.SHARE_FETCH` is
`share_fetch`), and the first request for it pays its import (well under a millisecond for most,
a few ms for the largest). The dispatcher calls REGISTRY on the event loop only, so the import
and the insertion need no lock.
"""

from __future__ import annotations

import importlib

from logbroker.protocol.apis import ApiKey

MODULES = (
    "api_versions", "metadata", "produce", "fetch", "list_offsets", "offset_for_leader_epoch",
    "create_topics", "delete_topics", "create_partitions", "describe_configs", "alter_configs",
    "incremental_alter_configs", "describe_cluster", "delete_records", "init_producer_id",
    "find_coordinator", "join_group", "sync_group", "heartbeat", "leave_group", "offset_commit",
    "offset_fetch", "list_groups", "describe_groups", "delete_groups", "offset_delete",
    "sasl_handshake", "sasl_authenticate", "describe_user_scram_credentials",
    "alter_user_scram_credentials", "create_acls", "describe_acls", "delete_acls", "elect_leaders",
    "alter_partition_reassignments", "list_partition_reassignments",
    "controlled_shutdown", "add_partitions_to_txn", "add_offsets_to_txn", "end_txn", "txn_offset_commit",
    "describe_transactions", "list_transactions", "write_txn_markers", "describe_producers",
    "describe_client_quotas", "alter_client_quotas",
    "describe_log_dirs", "alter_replica_log_dirs", "describe_topic_partitions",
    "create_delegation_token", "renew_delegation_token", "expire_delegation_token",
    "describe_delegation_token", "get_telemetry_subscriptions", "push_telemetry",
    "list_config_resources",
    "consumer_group_heartbeat", "consumer_group_describe",
    "share_group_heartbeat", "share_group_describe", "share_fetch", "share_acknowledge",
    "initialize_share_group_state", "read_share_group_state", "write_share_group_state",
    "delete_share_group_state", "read_share_group_state_summary",
    "describe_share_group_offsets", "alter_share_group_offsets", "delete_share_group_offsets",
)


class _Registry(dict):
    """api key → handler; a key not yet asked for imports its module (KeyError: no such API)."""

    def __missing__(self, api_key: int):
        module = importlib.import_module(f"{__name__}.{_MODULE_OF[api_key]}")
        self[api_key] = module.handle
        return module.handle


_MODULE_OF = {int(ApiKey[name.upper()]): name for name in MODULES}
REGISTRY = _Registry()
