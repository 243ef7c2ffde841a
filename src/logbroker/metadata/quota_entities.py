"""Client quota entities and their configs, as Kafka keeps them in ZooKeeper (pure, no I/O).

A quota entity is a user, a client id, or a user and a client id together; either name may be
the default (`None` here, `<default>` in a path). Kafka's ZooKeeper layout names each entity by a
config path relative to /config, its names in Kafka's Sanitizer form:

    users/<user>                    clients/<client-id>
    users/<user>/clients/<client-id>
    users/<default>   users/<default>/clients/<default>   users/<user>/clients/<default>
    clients/<default> ...

That path is the key everywhere: the znode under /config on a cluster, the key under
"client_quotas" in the single node's metadata file, the `entity_path` of a change notice.

Configs (Kafka's QuotaConfig): producer_byte_rate and consumer_byte_rate are LONG, bytes per
second; request_percentage (percent of one request-handling thread; here of the event loop) and
controller_mutation_rate (partitions created or deleted per second) are DOUBLE. Values are stored as
text, as Kafka's tools write them ("1024", "12.5"). `validate_alteration` holds Kafka's checks of an
AlterClientQuotas entry (ClientQuotaControlManager), each failure an InvalidRequestError.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from logbroker.errors import InvalidRequestError
from logbroker.metadata.sanitizer import desanitize, sanitize

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
DEFAULT = "<default>"  # ZooKeeperInternals.DEFAULT_STRING

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"

# key → Kafka's ConfigDef type
QUOTA_CONFIGS: dict[str, str] = {
    PRODUCER_BYTE_RATE: "long",
    CONSUMER_BYTE_RATE: "long",
    REQUEST_PERCENTAGE: "double",
    CONTROLLER_MUTATION_RATE: "double",
}
LONG_MAX = (1 << 63) - 1

# An entity: (user, client id), each absent (ABSENT) or a name, None being the default.
ABSENT = ""


def _part(name: str | None) -> str:
    return DEFAULT if name is None else sanitize(name)


def _name(part: str) -> str | None:
    return None if part == DEFAULT else desanitize(part)


def entity_path(entity: Mapping[str, str | None]) -> str:
    """The config path (relative to /config) of an entity given as {type: name or None}."""
    if USER in entity and CLIENT_ID in entity:
        return f"users/{_part(entity[USER])}/clients/{_part(entity[CLIENT_ID])}"
    if USER in entity:
        return f"users/{_part(entity[USER])}"
    return f"clients/{_part(entity[CLIENT_ID])}"


def entity_of_path(path: str) -> dict[str, str | None]:
    """{type: name or None} of a config path; ValueError for a path that names no quota entity."""
    parts = path.split("/")
    if len(parts) == 2 and parts[0] == "users":
        return {USER: _name(parts[1])}
    if len(parts) == 2 and parts[0] == "clients":
        return {CLIENT_ID: _name(parts[1])}
    if len(parts) == 4 and parts[0] == "users" and parts[2] == "clients":
        return {USER: _name(parts[1]), CLIENT_ID: _name(parts[3])}
    raise ValueError(f"not a client quota entity path: {path!r}")


def quota_values(config: Mapping[str, str]) -> dict[str, float]:
    """The quota keys of an entity's config as numbers (other keys, SCRAM credentials, skipped;
    a malformed value is left out)."""
    values = {}
    for key, text in config.items():
        if key in QUOTA_CONFIGS:
            try:
                values[key] = float(text)
            except ValueError:
                continue
    return values


def format_quota(key: str, value: float) -> str:
    """A validated value as Kafka's tools store it: integers for LONG keys."""
    if QUOTA_CONFIGS[key] == "long":
        return str(int(round(value)))
    return repr(float(value))


def validate_entity(components: Iterable[tuple[str, str | None]]) -> dict[str, str | None]:
    """{type: name} of an AlterClientQuotas entity, with Kafka's errors."""
    entity: dict[str, str | None] = {}
    for entity_type, name in components:
        if entity_type in entity:
            raise InvalidRequestError(f"Invalid client quota entity, duplicate entity entry {entity_type}")
        if entity_type not in (USER, CLIENT_ID, IP):
            raise InvalidRequestError(f"Unhandled client quota entity type: {entity_type}")
        if name is not None and name == "":
            raise InvalidRequestError(f"Empty {entity_type} not supported")
        entity[entity_type] = name
    if not entity:
        raise InvalidRequestError("Invalid empty client quota entity")
    if IP in entity:
        if len(entity) > 1:
            raise InvalidRequestError("Invalid quota entity combination, IP entity should not be "
                                      "combined with User or ClientId")
        raise InvalidRequestError("IP quotas (connection_creation_rate) are not supported by this broker")
    return entity


def validate_value(key: str, value: float) -> None:
    """Kafka's validateQuotaKeyValue for a value to set."""
    kind = QUOTA_CONFIGS.get(key)
    if kind is None:
        raise InvalidRequestError(f"Invalid configuration key {key}")
    if math.isnan(value) or value <= 0.0:
        raise InvalidRequestError(f"Quota {key} must be greater than 0")
    if kind == "long":
        if value > LONG_MAX:
            raise InvalidRequestError(f"Proposed value for {key} is too large for a LONG.")
        if abs(value - round(value)) > 1e-6:
            raise InvalidRequestError(f"{key} cannot be a fractional value.")


def apply_ops(config: Mapping[str, str], ops: Iterable[tuple[str, float, bool]]) -> dict[str, str]:
    """The entity's config after (key, value, remove) operations, validated; other keys kept."""
    new = dict(config)
    for key, value, remove in ops:
        if remove:
            if key not in QUOTA_CONFIGS:
                raise InvalidRequestError(f"Invalid configuration key {key}")
            new.pop(key, None)
            continue
        validate_value(key, value)
        new[key] = format_quota(key, value)
    return new


def lookup_order(user: str, client_id: str) -> tuple[tuple[str, tuple[str, str]], ...]:
    """The 8 config paths Kafka's ClientQuotaManager tries for a (principal name, client id),
    most specific first, each with the metric tags (sanitized user, client id) its sensor has
    when that level holds the quota."""
    u, c = sanitize(user), sanitize(client_id)
    both, user_only, client_only = (u, client_id), (u, ""), ("", client_id)
    return (
        (f"users/{u}/clients/{c}", both),
        (f"users/{u}/clients/{DEFAULT}", both),
        (f"users/{u}", user_only),
        (f"users/{DEFAULT}/clients/{c}", both),
        (f"users/{DEFAULT}/clients/{DEFAULT}", both),
        (f"users/{DEFAULT}", user_only),
        (f"clients/{c}", client_only),
        (f"clients/{DEFAULT}", client_only),
    )
