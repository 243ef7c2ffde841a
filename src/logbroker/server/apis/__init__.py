"""One module per Kafka API, each with `API_KEY` and `handle(broker, request)`.

REGISTRY maps an api key to its handler; the supported versions live in
`logbroker.protocol.versions`, the single table the ApiVersions answer is built from.
"""

from __future__ import annotations

import importlib

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
    "consumer_group_heartbeat", "consumer_group_describe",
    "share_group_heartbeat", "share_group_describe", "share_fetch", "share_acknowledge",
    "initialize_share_group_state", "read_share_group_state", "write_share_group_state",
    "delete_share_group_state", "read_share_group_state_summary",
    "describe_share_group_offsets", "alter_share_group_offsets", "delete_share_group_offsets",
)


def _load() -> dict:
    registry = {}
    for name in MODULES:
        try:
            module = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
            continue
        registry[module.API_KEY] = module.handle
    return registry


REGISTRY = _load()
