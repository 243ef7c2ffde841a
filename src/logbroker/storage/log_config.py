"""The effective config of a log (Kafka's LogConfig).

A topic's effective config is the broker's defaults (set by the broker keys in `broker_synonym`,
e.g. `log.segment.bytes` → `segment.bytes`) overlaid with the topic's own overrides; the keys,
their types and checks are in logbroker.topic_configs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from logbroker.errors import InvalidConfigError
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
    local_retention_bytes: int
    local_retention_ms: int
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
    remote_log_copy_disable: bool
    remote_log_delete_on_disable: bool
    remote_storage_enable: bool
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

    @property
    def local_retention_ms_effective(self) -> int:
        """local.retention.ms, with -2 meaning retention.ms (Kafka's localRetentionMs)."""
        return self.retention_ms if self.local_retention_ms == -2 else self.local_retention_ms

    @property
    def local_retention_bytes_effective(self) -> int:
        """local.retention.bytes, with -2 meaning retention.bytes."""
        return self.retention_bytes if self.local_retention_bytes == -2 else self.local_retention_bytes


def check_remote_storage(config: LogConfig, *, system_enabled: bool,
                         previous: LogConfig | None = None) -> None:
    """Kafka's LogConfig checks of a topic's tiered storage settings (InvalidConfigError with
    Kafka's words): remote.storage.enable only with the broker's remote.log.storage.system.enable
    and cleanup.policy delete (or empty); local.retention.* neither -1 nor above retention.*
    when those are bounded; with remote.log.copy.disable, local.retention.* equal to
    retention.*; turning remote storage off only with remote.log.delete.on.disable."""
    if previous is not None and previous.remote_storage_enable and not config.remote_storage_enable \
            and not config.remote_log_delete_on_disable:
        raise InvalidConfigError(
            "It is invalid to disable remote storage without deleting remote data. If you want "
            "to keep the remote data and turn to read only, please set `remote.storage.enable=true,"
            "remote.log.copy.disable=true`. If you want to disable remote storage and delete all "
            "remote data, please set `remote.storage.enable=false,remote.log.delete.on.disable=true`.")
    if not config.remote_storage_enable:
        return
    if not system_enabled:
        raise InvalidConfigError("Tiered Storage functionality is disabled in the broker. "
                                 "Topic cannot be configured with remote log storage.")
    if config.cleanup_policy and config.cleanup_policy != ["delete"]:
        raise InvalidConfigError("Remote log storage only supports topics with cleanup.policy=delete "
                                 "or cleanup.policy being an empty list.")
    for unit, total, local in (("bytes", config.retention_bytes, config.local_retention_bytes),
                               ("ms", config.retention_ms, config.local_retention_ms)):
        if total != -1 and local != -2:
            if local == -1:
                raise InvalidConfigError(f"Invalid value -1 for configuration local.retention.{unit}: "
                                         f"Value must not be -1 as retention.{unit} value is set as {total}.")
            if local > total:
                raise InvalidConfigError(
                    f"Invalid value {local} for configuration local.retention.{unit}: Value must "
                    f"not be more than retention.{unit} property value: {total}")
        if config.remote_log_copy_disable and local != -2 and local != total:
            raise InvalidConfigError(
                f"When `remote.log.copy.disable` is set to true, the `local.retention.{unit}` and "
                f"`retention.{unit}` must be set to the identical value because there will be no "
                "more logs copied to the remote storage.")

