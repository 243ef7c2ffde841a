"""The options of Spark's Kafka source and sink, parsed once into frozen values.

Spark hands a data source its options as strings with case-insensitive names. `SourceOptions`
and `SinkOptions` turn them into typed values and reject what Spark's Kafka connector rejects
(no subscription, two subscriptions, `-2` in endingOffsets, ...) with a message naming the option.
Everything here is pure: no network, no pyspark, so it is cheap to import in every worker.

`kafka.<name>` options are passed through to librdkafka as `<name>`. A few Java-client settings
that librdkafka spells differently or does not have are translated or dropped (see
`_JAVA_ONLY_KAFKA_KEYS`), so the options of a Spark job written for the JVM connector work here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from logbroker.spark.errors import OptionError
from logbroker.spark.offsets import EARLIEST, LATEST, OffsetSpec, parse_offset_spec, \
    parse_timestamp_spec
from logbroker.spark.typed.options import TypedOptions, parse_typed_options

SUBSCRIPTION_OPTIONS = ("subscribe", "subscribepattern", "assign")

# Java consumer/producer settings with no librdkafka equivalent: accepted and ignored.
_JAVA_ONLY_KAFKA_KEYS = frozenset({
    "key.deserializer", "value.deserializer", "key.serializer", "value.serializer",
    "interceptor.classes", "partition.assignment.strategy", "max.poll.records",
    "buffer.memory", "retries.backoff.ms",
})
# Settings the source manages itself: passing them would break the offset bookkeeping.
_SOURCE_MANAGED_KAFKA_KEYS = frozenset({"enable.auto.commit", "auto.offset.reset"})


@dataclass(frozen=True, kw_only=True)
class Subscription:
    """Exactly one of: a topic list, a topic regex, or explicit partitions."""

    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assignment: tuple[tuple[str, int], ...] = ()

    @property
    def kind(self) -> str:
        if self.pattern is not None:
            return "subscribePattern"
        return "assign" if self.assignment else "subscribe"


@dataclass(frozen=True, kw_only=True)
class SourceOptions:
    """The read side: what to read, from where to where, and how to split it."""

    bootstrap_servers: str
    kafka_config: Mapping[str, str]
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60 * 1000
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    poll_timeout_ms: int = 120_000
    group_id_prefix: str = "spark-kafka-source"
    # Rows per Arrow RecordBatch yielded by a read task.
    arrow_batch_rows: int = 10_000
    # Offline backfill: a log dir to read segment files from instead of brokers, or a tiered
    # storage bucket (s3://bucket/prefix) with its store settings (the `rsm.config.` options).
    path: str | None = None
    remote_settings: Mapping[str, str] = field(default_factory=dict)
    # keyFormat / valueFormat: registry-framed columns decoded to structs (spark/typed/).
    typed: TypedOptions | None = None


@dataclass(frozen=True, kw_only=True)
class SinkOptions:
    """The write side: where rows go and the producer settings."""

    bootstrap_servers: str
    kafka_config: Mapping[str, str] = field(default_factory=dict)
    topic: str | None = None
    # Streaming writes: None = exactly once when the brokers support transactions (decided by
    # the stream writer on the driver), True / False = as the `exactlyOnce` option says.
    exactly_once: bool | None = None
    # transactional.id = "<prefix>-<query id>-<Spark partition>" (see exactly_once.py).
    transactional_id_prefix: str = "logbroker-spark"
    # keyFormat / valueFormat: struct columns encoded registry-framed (spark/typed/).
    typed: TypedOptions | None = None


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(key).lower(): str(value) for key, value in options.items() if value is not None}


def _kafka_config(opts: Mapping[str, str]) -> tuple[str, dict[str, str]]:
    config = {key[len("kafka."):]: value for key, value in opts.items() if key.startswith("kafka.")}
    bootstrap = config.pop("bootstrap.servers", None)
    if not bootstrap:
        raise OptionError("option 'kafka.bootstrap.servers' must be specified, "
                          "e.g. .option('kafka.bootstrap.servers', 'localhost:9092')")
    for key in list(config):
        if key in _JAVA_ONLY_KAFKA_KEYS:
            del config[key]
        elif key in _SOURCE_MANAGED_KAFKA_KEYS:
            raise OptionError(f"option 'kafka.{key}' is not supported: the source manages "
                              "offsets itself (use startingOffsets / failOnDataLoss)")
    return bootstrap, config


def _positive_int(opts: Mapping[str, str], name: str) -> int | None:
    raw = opts.get(name.lower())
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise OptionError(f"option '{name}' must be a positive integer, got {raw!r}") from None
    if value <= 0:
        raise OptionError(f"option '{name}' must be a positive integer, got {raw!r}")
    return value


_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|min|h)?\s*$")
_DURATION_MS = {"ms": 1, "s": 1000, None: 1000, "m": 60_000, "min": 60_000, "h": 3_600_000}


def _duration_ms(opts: Mapping[str, str], name: str, default: int) -> int:
    """Spark's durations: "15m", "30s", "500ms", a bare number is seconds."""
    raw = opts.get(name.lower())
    if raw is None:
        return default
    match = _DURATION.match(raw.lower())
    if not match:
        raise OptionError(f"option '{name}' must be a duration like 15m, 30s or 500ms, got {raw!r}")
    return int(match[1]) * _DURATION_MS[match[2]]


def _bool(opts: Mapping[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    if raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise OptionError(f"option '{name}' must be true or false, got {raw!r}")


def _subscription(opts: Mapping[str, str], *, optional: bool = False) -> Subscription:
    given = [name for name in SUBSCRIPTION_OPTIONS if opts.get(name, "").strip()]
    if optional and not given:
        return Subscription()
    if len(given) != 1:
        raise OptionError("exactly one of the options 'subscribe', 'subscribePattern' or "
                          f"'assign' must be specified, got {len(given)}")
    kind = given[0]
    raw = opts[kind].strip()
    if kind == "subscribe":
        topics = tuple(t.strip() for t in raw.split(",") if t.strip())
        if not topics:
            raise OptionError("option 'subscribe' names no topic")
        return Subscription(topics=topics)
    if kind == "subscribepattern":
        return Subscription(pattern=raw)
    try:
        parsed = json.loads(raw)
        assignment = tuple(sorted((str(topic), int(p)) for topic, parts in parsed.items()
                                  for p in parts))
    except (ValueError, AttributeError, TypeError):
        raise OptionError(f"option 'assign' must be JSON like {{\"topicA\":[0,1]}}, got {raw!r}") \
            from None
    if not assignment:
        raise OptionError("option 'assign' names no partition")
    return Subscription(assignment=assignment)


def _offset_option(opts: Mapping[str, str], prefix: str, default: OffsetSpec, *,
                   ending: bool) -> OffsetSpec:
    """One of `<prefix>Offsets`, `<prefix>Timestamp`, `<prefix>OffsetsByTimestamp`.

    As in Spark, a global timestamp wins over per-partition timestamps, which win over offsets.
    """
    name = f"{prefix}Offsets"
    # Ending at a timestamp past the last record means the end; starting there is an error
    # unless startingOffsetsByTimestampStrategy=latest, as in Spark.
    strategy = opts.get(f"{prefix}offsetsbytimestampstrategy",
                        "latest" if ending else "error").lower()
    if strategy not in ("error", "latest"):
        raise OptionError(f"option '{prefix}OffsetsByTimestampStrategy' must be 'error' or "
                          f"'latest', got {strategy!r}")
    if opts.get(f"{prefix}timestamp"):
        raw = opts[f"{prefix}timestamp"]
        try:
            ts = int(raw)
        except ValueError:
            raise OptionError(f"option '{prefix}Timestamp' must be epoch milliseconds, got {raw!r}") \
                from None
        return OffsetSpec(kind="timestamp", global_timestamp_ms=ts,
                          missing_timestamp_is_latest=strategy == "latest")
    if opts.get(f"{prefix}offsetsbytimestamp"):
        return parse_timestamp_spec(opts[f"{prefix}offsetsbytimestamp"],
                                    option=f"{prefix}OffsetsByTimestamp",
                                    missing_timestamp_is_latest=strategy == "latest")
    raw = opts.get(name.lower())
    if raw is None:
        return default
    spec = parse_offset_spec(raw, option=name)
    if ending and spec.kind == "earliest":
        raise OptionError(f"option '{name}' cannot be 'earliest' (it would read nothing)")
    if ending and spec.kind == "json" and any(
            offset == EARLIEST for parts in spec.offsets.values() for offset in parts.values()):
        raise OptionError(f"option '{name}' cannot use -2 (earliest) for a partition")
    return spec


def parse_source_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    opts = _lower(options)
    path = opts.get("path", "").strip() or None
    if path is not None:
        if streaming:
            raise OptionError("option 'path' (offline backfill) is for batch queries only")
        opts.setdefault("kafka.bootstrap.servers", "offline")
    bootstrap, config = _kafka_config(opts)
    if streaming and (opts.get("endingoffsets") or opts.get("endingtimestamp")
                      or opts.get("endingoffsetsbytimestamp")):
        raise OptionError("option 'endingOffsets' is for batch queries only")
    if not streaming and opts.get("maxoffsetspertrigger"):
        # Spark ignores it in batch queries too; say nothing.
        pass
    starting_default = OffsetSpec(kind="latest" if streaming else "earliest")
    starting = _offset_option(opts, "starting", starting_default, ending=False)
    if not streaming and starting.kind == "latest":
        raise OptionError("option 'startingOffsets' cannot be 'latest' for batch queries")
    if not streaming and starting.kind == "json" and any(
            offset == LATEST for parts in starting.offsets.values() for offset in parts.values()):
        raise OptionError("option 'startingOffsets' cannot use -1 (latest) in batch queries")
    ending = _offset_option(opts, "ending", OffsetSpec(kind="latest"), ending=True)
    poll_timeout_ms = _positive_int(opts, "kafkaConsumer.pollTimeoutMs") or 120_000
    subscription = _subscription(opts, optional=path is not None)
    return SourceOptions(
        bootstrap_servers=bootstrap,
        kafka_config=config,
        subscription=subscription,
        starting=starting,
        ending=ending,
        max_offsets_per_trigger=_positive_int(opts, "maxOffsetsPerTrigger"),
        min_offsets_per_trigger=_positive_int(opts, "minOffsetsPerTrigger"),
        max_trigger_delay_ms=_duration_ms(opts, "maxTriggerDelay", 15 * 60 * 1000),
        min_partitions=_positive_int(opts, "minPartitions"),
        max_records_per_partition=_positive_int(opts, "maxRecordsPerPartition"),
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        include_headers=_bool(opts, "includeHeaders", False),
        poll_timeout_ms=poll_timeout_ms,
        group_id_prefix=opts.get("groupidprefix", "spark-kafka-source"),
        arrow_batch_rows=_positive_int(opts, "arrowBatchRows") or 10_000,
        path=path,
        remote_settings={k[len("rsm.config."):]: v for k, v in opts.items() if k.startswith("rsm.config.")},
        typed=_typed_source(opts, subscription),
    )


def _typed_source(opts: Mapping[str, str], subscription: Subscription) -> TypedOptions | None:
    return parse_typed_options(opts, topic=subscription.topics[0]
                               if len(subscription.topics) == 1 else None)


def parse_typed_source_options(options: Mapping[str, str]) -> TypedOptions | None:
    """Only the typed-column options of a read (what the source's schema depends on)."""
    opts = _lower(options)
    return _typed_source(opts, _subscription(opts, optional=True))


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    opts = _lower(options)
    bootstrap, config = _kafka_config(opts)
    topic = opts.get("topic", "").strip() or None
    exactly_once = _bool(opts, "exactlyOnce", False) if "exactlyonce" in opts else None
    for key in ("transactional.id", "enable.idempotence"):
        if key in config:
            raise OptionError(f"option 'kafka.{key}' is not supported: the sink sets it (use "
                              "exactlyOnce / transactionalIdPrefix)")
    prefix = opts.get("transactionalidprefix", "logbroker-spark").strip() or "logbroker-spark"
    return SinkOptions(bootstrap_servers=bootstrap, kafka_config=config, topic=topic,
                       exactly_once=exactly_once, transactional_id_prefix=prefix,
                       typed=parse_typed_options(opts, topic=topic))
