"""Topic config keys (Kafka's LogConfig definitions): names, types, defaults, broker synonyms,
and the checks of their values.

Below both the metadata layer (a topic's configs are validated when it is created or altered)
and the log layer (storage/log_config.py builds a log's effective config from them); the broker's
own keys (server/config_defs.py) reuse the checks. A bad value is an InvalidConfigError naming
the key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from logbroker.errors import InvalidConfigError

LONG_MAX = (1 << 63) - 1
INT_MAX = (1 << 31) - 1


@dataclass(frozen=True, slots=True)
class ConfigDef:
    """One topic config key: its type (`int`, `long`, `double`, `boolean`, `string`, `list`),
    default (already parsed), the broker key that sets its default, and an optional check that
    returns an error description for a bad parsed value."""

    name: str
    type: str
    default: object
    broker_synonym: str | None
    doc: str
    check: Callable[[object], str | None] | None = None


# Value checks for ConfigDef.check; server/config_defs.py uses them for broker keys too.

def valid_values(check: Callable[[object], str | None], text: str) -> Callable[[object], str | None]:
    """`check`, carrying the valid values in Kafka's documentation style (`[0,...]`,
    `[gzip, lz4]`) as `check.valid_values`, for the generated config reference."""
    check.valid_values = text  # type: ignore[attr-defined]
    return check


def at_least(minimum: int | float) -> Callable[[object], str | None]:
    return valid_values(lambda v: None if v >= minimum else f"must be at least {minimum}",
                        f"[{minimum},...]")


def between(lo: float, hi: float) -> Callable[[object], str | None]:
    return valid_values(lambda v: None if lo <= v <= hi else f"must be between {lo} and {hi}",
                        f"[{lo},...,{hi}]")


def one_of(*choices: str, allow_empty: bool = False) -> Callable[[object], str | None]:
    def check(v: object) -> str | None:
        values = v if isinstance(v, list) else [v]
        bad = [x for x in values if x not in choices]
        return f"must be one of {', '.join(choices)}" if bad or not (values or allow_empty) else None
    return valid_values(check, f"[{', '.join(choices)}]")


# Kafka 3.9's MetadataVersion strings (MetadataVersionValidator): every IBP version and every
# release up to 3.9. message.format.version takes them; from IBP 3.0 on Kafka ignores it.
_IBP_VERSIONS = (
    ["0.8.0", "0.8.1", "0.8.2", "0.9.0", "0.10.0-IV0", "0.10.0-IV1", "0.10.1-IV0", "0.10.1-IV1",
     "0.10.1-IV2", "0.10.2-IV0", "0.11.0-IV0", "0.11.0-IV1", "0.11.0-IV2", "1.0-IV0", "1.1-IV0",
     "2.0-IV0", "2.0-IV1", "2.1-IV0", "2.1-IV1", "2.1-IV2", "2.2-IV0", "2.2-IV1", "2.3-IV0",
     "2.3-IV1", "2.4-IV0", "2.4-IV1", "2.5-IV0", "2.6-IV0", "2.7-IV0", "2.7-IV1", "2.7-IV2",
     "2.8-IV0", "2.8-IV1", "3.0-IV0", "3.0-IV1", "3.1-IV0", "3.2-IV0", "3.3-IV0", "3.3-IV1",
     "3.3-IV2", "3.3-IV3", "3.4-IV0", "3.5-IV0", "3.5-IV1", "3.5-IV2", "3.6-IV0", "3.6-IV1",
     "3.6-IV2", "3.7-IV0", "3.7-IV1", "3.7-IV2", "3.7-IV3", "3.7-IV4", "3.8-IV0", "3.9-IV0"])
METADATA_VERSIONS = frozenset(_IBP_VERSIONS) | {v.split("-")[0] for v in _IBP_VERSIONS}


def _metadata_version(value: object) -> str | None:
    """Kafka's MetadataVersion.fromVersionString: `2.8`, `2.8.1` (patch ignored), `3.0-IV1`,
    `0.10.2` (three parts before 1.0)."""
    parts = str(value).split(".")
    key = ".".join(parts[:3 if str(value).startswith("0.") else 2])
    return None if key in METADATA_VERSIONS else f"Version {value} is not a valid version"


metadata_version = valid_values(_metadata_version, "a Kafka version: 0.8.0 to 3.9, e.g. 3.0-IV1")


# Topic configs Kafka 3.9 has and 4.0 removed (KIP-724: no message format but v2, no
# down-conversion; KIP-937's difference.max.ms): accepted, described back, one deprecation WARN
# line when set. The first two have no effect here (logbroker writes and serves v2 only).
REMOVED_IN_KAFKA_4 = {
    "message.format.version": "it is ignored: logbroker writes message format v2 only, as Kafka "
                              "does from inter-broker protocol 3.0",
    "message.downconversion.enable": "it has no effect: logbroker never down-converts (Fetch v4+ "
                                     "only)",
    "message.timestamp.difference.max.ms": "use message.timestamp.before.max.ms and "
                                           "message.timestamp.after.max.ms (KIP-937)",
}


def deprecation_warnings(topic: str, overrides: Mapping[str, object]) -> list[str]:
    """One line per deprecated key a topic sets, for the log."""
    return [f"Topic configuration {key} with value `{overrides[key]}` of topic `{topic}` is "
            f"deprecated and was removed in Apache Kafka 4.0; {why}"
            for key, why in REMOVED_IN_KAFKA_4.items() if key in overrides]


TOPIC_CONFIGS: dict[str, ConfigDef] = {d.name: d for d in (
    ConfigDef("cleanup.policy", "list", ["delete"], "log.cleanup.policy",
              "delete old segments, compact to the latest value per key, or both; empty (Kafka "
              "4.2, KAFKA-19112): neither — only DeleteRecords moves the log start",
              one_of("delete", "compact", allow_empty=True)),
    ConfigDef("compression.type", "string", "producer", "compression.type",
              "codec for stored batches; 'producer' keeps what the producer sent",
              one_of("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")),
    ConfigDef("compression.gzip.level", "int", -1, "compression.gzip.level", "gzip level",
              between(-1, 9)),
    ConfigDef("compression.lz4.level", "int", 9, "compression.lz4.level", "lz4 level",
              between(1, 17)),
    ConfigDef("compression.zstd.level", "int", 3, "compression.zstd.level", "zstd level",
              between(-131072, 22)),
    ConfigDef("delete.retention.ms", "long", 86_400_000, "log.cleaner.delete.retention.ms",
              "how long tombstones are kept on compacted topics", at_least(0)),
    ConfigDef("file.delete.delay.ms", "long", 60_000, "log.segment.delete.delay.ms",
              "delay before a .deleted segment file is removed", at_least(0)),
    ConfigDef("flush.before.ack", "boolean", False, "log.flush.before.ack",
              "logbroker only (Kafka acknowledges from the page cache): answer a produce only "
              "once its batch is fsynced, on the leader for acks=1 and on every in-sync replica "
              "for acks=-1, by group commits (replication/group_commit.py)"),
    ConfigDef("flush.messages", "long", LONG_MAX, "log.flush.interval.messages",
              "fsync after this many messages", at_least(1)),
    ConfigDef("flush.ms", "long", LONG_MAX, "log.flush.interval.ms",
              "fsync after this many milliseconds", at_least(0)),
    ConfigDef("follower.replication.throttled.replicas", "list", [],
              "follower.replication.throttled.replicas", "replicas throttled on the follower side"),
    ConfigDef("index.interval.bytes", "int", 4096, "log.index.interval.bytes",
              "bytes appended between offset index entries", at_least(0)),
    ConfigDef("leader.replication.throttled.replicas", "list", [],
              "leader.replication.throttled.replicas", "replicas throttled on the leader side"),
    ConfigDef("local.retention.bytes", "long", -2, "log.local.retention.bytes",
              "tiered topics: largest size of the local part of a partition before uploaded "
              "segments are deleted locally (-2: retention.bytes; never more than it)",
              at_least(-2)),
    ConfigDef("local.retention.ms", "long", -2, "log.local.retention.ms",
              "tiered topics: age after which uploaded segments are deleted locally (-2: "
              "retention.ms; never more than it)", at_least(-2)),
    ConfigDef("max.compaction.lag.ms", "long", LONG_MAX, "log.cleaner.max.compaction.lag.ms",
              "longest a record stays uncompacted", at_least(1)),
    ConfigDef("max.message.bytes", "int", 1_048_588, "message.max.bytes",
              "largest record batch accepted", at_least(0)),
    ConfigDef("message.downconversion.enable", "boolean", True,
              "log.message.downconversion.enable",
              "deprecated, removed in Kafka 4.0: down-convert for old consumers (no effect)"),
    ConfigDef("message.format.version", "string", "3.0-IV1", "log.message.format.version",
              "deprecated, removed in Kafka 4.0: the message format version (ignored, as Kafka "
              "does from inter-broker protocol 3.0)", metadata_version),
    ConfigDef("message.timestamp.after.max.ms", "long", LONG_MAX,
              "log.message.timestamp.after.max.ms",
              "how far a record's timestamp may lie in the future", at_least(0)),
    ConfigDef("message.timestamp.before.max.ms", "long", LONG_MAX,
              "log.message.timestamp.before.max.ms",
              "how far a record's timestamp may lie in the past", at_least(0)),
    ConfigDef("message.timestamp.difference.max.ms", "long", LONG_MAX,
              "log.message.timestamp.difference.max.ms",
              "deprecated: both before and after bounds at once", at_least(0)),
    ConfigDef("message.timestamp.type", "string", "CreateTime", "log.message.timestamp.type",
              "CreateTime keeps the producer's timestamp, LogAppendTime uses the broker's",
              one_of("CreateTime", "LogAppendTime")),
    ConfigDef("min.cleanable.dirty.ratio", "double", 0.5, "log.cleaner.min.cleanable.ratio",
              "dirty fraction that makes a log eligible for cleaning", between(0.0, 1.0)),
    ConfigDef("min.compaction.lag.ms", "long", 0, "log.cleaner.min.compaction.lag.ms",
              "shortest time a record stays uncompacted", at_least(0)),
    ConfigDef("min.insync.replicas", "int", 1, "min.insync.replicas",
              "replicas that must acknowledge an acks=all write", at_least(1)),
    ConfigDef("preallocate", "boolean", False, "log.preallocate",
              "preallocate segment files"),
    ConfigDef("remote.log.copy.disable", "boolean", False, None,
              "tiered topics: stop uploading segments (those already uploaded stay readable "
              "and expire); local.retention.* must then equal retention.*"),
    ConfigDef("remote.log.delete.on.disable", "boolean", False, None,
              "must be true to turn remote.storage.enable off; the topic's remote segments are "
              "then deleted"),
    ConfigDef("remote.storage.enable", "boolean", False, None,
              "tier the topic: upload closed segments to the remote store (needs the broker's "
              "remote.log.storage.system.enable; not with cleanup.policy=compact)"),
    ConfigDef("retention.bytes", "long", -1, "log.retention.bytes",
              "largest size of a partition before old segments are deleted (-1: no limit)"),
    ConfigDef("retention.ms", "long", 604_800_000, "log.retention.ms",
              "age after which segments are deleted (-1: no limit)", at_least(-1)),
    ConfigDef("segment.bytes", "int", 1_073_741_824, "log.segment.bytes",
              "largest size of a segment file", at_least(14)),
    ConfigDef("segment.index.bytes", "int", 10_485_760, "log.index.size.max.bytes",
              "size each index file is preallocated to", at_least(8)),
    ConfigDef("segment.jitter.ms", "long", 0, "log.roll.jitter.ms",
              "random jitter subtracted from segment.ms", at_least(0)),
    ConfigDef("segment.ms", "long", 604_800_000, "log.roll.ms",
              "age after which a new segment is rolled", at_least(1)),
    ConfigDef("unclean.leader.election.enable", "boolean", False,
              "unclean.leader.election.enable", "allow an out-of-sync replica to become leader"),
)}


def parse_value(definition: ConfigDef, raw: object) -> object:
    """Parse a config value given as text (or already typed) and check it.

    Raises InvalidConfigError naming the key and what it expects.
    """
    try:
        value = _parse(definition.type, raw)
    except (TypeError, ValueError):
        raise InvalidConfigError(
            f"Invalid value {raw!r} for configuration {definition.name}: "
            f"expected a {definition.type}") from None
    problem = definition.check(value) if definition.check else None
    if problem:
        raise InvalidConfigError(f"Invalid value {raw!r} for configuration {definition.name}: {problem}")
    return value


def _parse(kind: str, raw: object) -> object:
    if kind in ("int", "long"):
        if isinstance(raw, bool):
            raise TypeError(raw)
        value = int(raw.strip()) if isinstance(raw, str) else int(raw)
        limit = INT_MAX if kind == "int" else LONG_MAX
        if not -limit - 1 <= value <= limit:
            raise ValueError(raw)
        return value
    if kind == "double":
        return float(raw)
    if kind == "boolean":
        return parse_boolean(raw)
    if kind == "list":
        if isinstance(raw, list):
            return raw
        return [item.strip() for item in str(raw).split(",") if item.strip()]
    return str(raw).strip()


def parse_boolean(raw: object) -> bool:
    """Kafka's boolean config values: true or false, any case; ValueError otherwise."""
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text not in ("true", "false"):
        raise ValueError(raw)
    return text == "true"


def format_value(value: object) -> str:
    """A parsed value back in Kafka's text form (DescribeConfigs, topic config files)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(value)
    return str(value)


def parse_overrides(overrides: Mapping[str, object]) -> dict[str, object]:
    """A topic's overrides (Kafka names, text or typed values) parsed and checked.

    Raises InvalidConfigError for an unknown key or a bad value, naming the key.
    """
    parsed = {}
    for name, raw in overrides.items():
        definition = TOPIC_CONFIGS.get(name)
        if definition is None:
            raise InvalidConfigError(f"Unknown topic config name: {name}")
        parsed[name] = parse_value(definition, raw)
    return parsed
