"""The schema registry as the data source sees it: confluent-kafka's SchemaRegistryClient over
HTTP (so any Confluent-compatible registry works), one client per Python worker and registry.

The client caches schemas by id itself; codecs built from them are cached here by (registry,
id), so a worker parses a writer schema once however many tasks and batches meet it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from confluent_kafka.schema_registry import RegisteredSchema, Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from logbroker.schema_registry import wire
from logbroker.schema_registry.formats import ResolvedReference
from logbroker.spark.errors import OptionError
from logbroker.spark.typed.options import ColumnFormat, TypedOptions

# Confluent's error codes: subject, version and schema id not found.
NOT_FOUND_CODES = frozenset({40401, 40402, 40403})

_clients: dict[tuple, SchemaRegistryClient] = {}
_cached: dict[tuple, Any] = {}


def client(typed: TypedOptions) -> SchemaRegistryClient:
    key = tuple(sorted(typed.registry_config().items()))
    if key not in _clients:
        _clients[key] = SchemaRegistryClient(typed.registry_config())
    return _clients[key]


def cached(typed: TypedOptions, key: tuple, build: Callable[[], Any]) -> Any:
    """`build()` once per worker, registry and `key` (e.g. ("avro-writer", schema id))."""
    full_key = (typed.registry_url, *key)
    if full_key not in _cached:
        _cached[full_key] = build()
    return _cached[full_key]


def subject_schema(typed: TypedOptions, column: ColumnFormat) -> RegisteredSchema:
    """The column's subject at its version option (latest when unset)."""
    registry = client(typed)
    try:
        if column.version is None:
            found = registry.get_latest_version(column.subject)
        else:
            found = registry.get_version(column.subject, column.version)
    except SchemaRegistryError as e:
        raise OptionError(f"{column.column}: subject {column.subject!r} version "
                          f"{column.version or 'latest'} at {typed.registry_url}: {e.error_message}"
                          ) from None
    if (found.schema.schema_type or "AVRO") != column.schema_type:
        raise OptionError(f"{column.column}: subject {column.subject!r} holds a "
                          f"{found.schema.schema_type or 'AVRO'} schema, not {column.format}")
    return found


def schema_by_id(typed: TypedOptions, schema_id: int) -> Schema:
    """Raises SchemaRegistryError (error_code 40403) for an id the registry does not have."""
    return client(typed).get_schema(schema_id)


def resolved_references(typed: TypedOptions, schema: Schema) -> tuple[ResolvedReference, ...]:
    return wire.resolved_references(client(typed), schema)


def register(typed: TypedOptions, subject: str, schema: Schema) -> int:
    try:
        return client(typed).register_schema(subject, schema)
    except SchemaRegistryError as e:
        raise OptionError(f"registering a schema under {subject!r} at {typed.registry_url} "
                          f"failed: {e.error_message}") from None
