"""The effective config of a log (Kafka's LogConfig).

A topic's effective config is the broker's defaults (set by the broker keys in `broker_synonym`,
e.g. `log.segment.bytes` → `segment.bytes`) overlaid with the topic's own overrides; the keys,
their types and checks are in logbroker.topic_configs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from logbroker.topic_configs import LONG_MAX, TOPIC_CONFIGS, format_value, parse_overrides


def _attr(name: str) -> str:
    return name.replace(".", "_")


@dataclass(frozen=True, slots=True)
class LogConfig:
    """The effective config of one log. Attribute names are the Kafka keys with '.' → '_'.

    Invariant: every field holds a parsed, checked value of its key's type.
    """

    cleanup_policy: list
    compression_type: str
    compression_gzip_level: int
    compression_lz4_level: int
    compression_zstd_level: int
    delete_retention_ms: int
    file_delete_delay_ms: int
    flush_before_ack: bool
    flush_messages: int
    flush_ms: int
    follower_replication_throttled_replicas: list
    index_interval_bytes: int
    leader_replication_throttled_replicas: list
    max_compaction_lag_ms: int
    max_message_bytes: int
    message_downconversion_enable: bool
    message_format_version: str
    message_timestamp_after_max_ms: int
    message_timestamp_before_max_ms: int
    message_timestamp_difference_max_ms: int
    message_timestamp_type: str
    min_cleanable_dirty_ratio: float
    min_compaction_lag_ms: int
    min_insync_replicas: int
    preallocate: bool
    retention_bytes: int
    retention_ms: int
    segment_bytes: int
    segment_index_bytes: int
    segment_jitter_ms: int
    segment_ms: int
    unclean_leader_election_enable: bool
    # Derived from the keys above once, for the produce path that reads them on every batch.
    compact: bool = dataclasses.field(init=False, repr=False)
    log_append_time: bool = dataclasses.field(init=False, repr=False)
    timestamp_before_max_ms: int = dataclasses.field(init=False, repr=False)
    timestamp_after_max_ms: int = dataclasses.field(init=False, repr=False)

    def __post_init__(self) -> None:
        derive = object.__setattr__
        derive(self, "compact", "compact" in self.cleanup_policy)
        derive(self, "log_append_time", self.message_timestamp_type == "LogAppendTime")
        # KIP-937: before/after.max.ms, or the deprecated difference.max.ms where they are unset.
        derive(self, "timestamp_before_max_ms", self.message_timestamp_difference_max_ms
               if self.message_timestamp_before_max_ms == LONG_MAX else self.message_timestamp_before_max_ms)
        derive(self, "timestamp_after_max_ms", self.message_timestamp_difference_max_ms
               if self.message_timestamp_after_max_ms == LONG_MAX else self.message_timestamp_after_max_ms)

    @classmethod
    def defaults(cls) -> LogConfig:
        return cls(**{_attr(d.name): d.default for d in TOPIC_CONFIGS.values()})

    def with_overrides(self, overrides: Mapping[str, object]) -> LogConfig:
        """This config with some keys (Kafka names, text or typed values) replaced.

        Raises InvalidConfigError for an unknown key or a bad value, naming the key.
        """
        changes = {_attr(name): value for name, value in parse_overrides(overrides).items()}
        return dataclasses.replace(self, **changes)

    def get(self, name: str) -> object:
        return getattr(self, _attr(name))

    def to_props(self) -> dict[str, str]:
        """Every key with its value in Kafka's text form."""
        return {name: format_value(self.get(name)) for name in TOPIC_CONFIGS}

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

