"""Client-metrics subscriptions: KIP-714's CLIENT_METRICS config resources (resource type 16),
with Kafka's ClientMetricsConfigs keys, as `kafka-client-metrics.sh` and `kafka-configs.sh
--entity-type client-metrics` manage them.

    metrics      list of metric name prefixes to collect ("*": every metric; empty: none)
    interval.ms  how often matching clients push, 100 ms … 1 hour (default 5 minutes)
    match        list of `selector=regex` (client_instance_id, client_id, client_software_name,
                 client_software_version, client_source_address, client_source_port); a client
                 matches when every regex matches all of its value; empty: every client

Kept in the metadata store: /config/client-metrics/<name> with a change notice on a cluster (as
Kafka's ZooKeeper-era AdminZkClient writes it), "client_metrics" in a single node's metadata file.
Set with IncrementalAlterConfigs (SET / DELETE; APPEND / SUBTRACT on the list keys), read with
DescribeConfigs, listed with ListConfigResources. A subscription left with no keys is deleted.
An unknown key is INVALID_REQUEST, a bad value INVALID_CONFIG, as in Kafka; nothing of the
resource is stored then.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from logbroker.errors import InvalidConfigError, InvalidRequestError

CLIENT_METRICS = 16  # ConfigResource.Type.CLIENT_METRICS
CLIENT_METRICS_CONFIG_SOURCE = 7  # DescribeConfigs' ConfigSource.CLIENT_METRICS_CONFIG
DEFAULT_CONFIG_SOURCE = 5

METRICS, INTERVAL_MS, MATCH = "metrics", "interval.ms", "match"
DEFAULT_INTERVAL_MS = 300_000
MIN_INTERVAL_MS, MAX_INTERVAL_MS = 100, 3_600_000
ALL_METRICS = "*"
SELECTORS = ("client_instance_id", "client_id", "client_software_name", "client_software_version",
             "client_source_address", "client_source_port")
_DOCS = {METRICS: "metric name prefixes pushed by matching clients (* for all)",
         INTERVAL_MS: "how often matching clients push their metrics",
         MATCH: "selector=regex pairs a client must all match (empty: every client)"}


@dataclass(frozen=True, slots=True)
class Subscription:
    """One named subscription, validated. `selectors` maps a selector to its compiled regex."""

    name: str
    metrics: tuple[str, ...]
    interval_ms: int
    selectors: tuple[tuple[str, re.Pattern], ...]

    def matches(self, client: dict[str, str]) -> bool:
        return all(pattern.fullmatch(client.get(key, "")) for key, pattern in self.selectors)


def split_list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def parse(name: str, configs: dict[str, str]) -> Subscription:
    """The subscription `configs` describe; InvalidRequestError for an unknown key,
    InvalidConfigError for a bad value."""
    for key in configs:
        if key not in (METRICS, INTERVAL_MS, MATCH):
            raise InvalidRequestError(f"Unknown client metric configuration: {key}")
    try:
        interval_ms = int(configs.get(INTERVAL_MS, DEFAULT_INTERVAL_MS))
    except ValueError:
        raise InvalidConfigError(f"Invalid value {configs[INTERVAL_MS]} for configuration "
                                 f"{INTERVAL_MS}: Not a number of type INT") from None
    if not MIN_INTERVAL_MS <= interval_ms <= MAX_INTERVAL_MS:
        raise InvalidConfigError(f"Invalid telemetry push interval for subscription {name}, interval "
                                 f"must be between {MIN_INTERVAL_MS} and {MAX_INTERVAL_MS}")
    selectors = []
    for item in split_list(configs.get(MATCH, "")):
        key, sep, regex = item.partition("=")
        if not sep or key.strip() not in SELECTORS or not regex:
            raise InvalidConfigError(f"Illegal client matching pattern: {item} (selectors: {', '.join(SELECTORS)})")
        try:
            selectors.append((key.strip(), re.compile(regex)))
        except re.error as exc:
            raise InvalidConfigError(f"Illegal regex pattern {regex!r} for {key}: {exc}") from None
    return Subscription(name, tuple(split_list(configs.get(METRICS, ""))), interval_ms, tuple(selectors))


def describe(configs: dict[str, str], *, keys: set[str] | None, include_synonyms: bool,
             include_documentation: bool) -> list[dict]:
    """DescribeConfigs entries of a subscription: its set keys, and the defaults of the rest."""
    defaults = {METRICS: "", INTERVAL_MS: str(DEFAULT_INTERVAL_MS), MATCH: ""}
    entries = []
    for name in (INTERVAL_MS, MATCH, METRICS):
        if keys is not None and name not in keys:
            continue
        source = CLIENT_METRICS_CONFIG_SOURCE if name in configs else DEFAULT_CONFIG_SOURCE
        value = configs.get(name, defaults[name])
        entries.append({"name": name, "value": value, "read_only": False, "config_source": source,
                        "is_sensitive": False,
                        "synonyms": [{"name": name, "value": value, "source": source}] if include_synonyms else [],
                        "config_type": 3 if name == INTERVAL_MS else 7,
                        "documentation": _DOCS[name] if include_documentation else None})
    return entries
