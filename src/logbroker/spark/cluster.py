"""Planning queries against the cluster: which partitions, and which offsets.

Everything the driver needs to plan a read goes through one confluent-kafka `Consumer` that is
never subscribed and never commits: Metadata for the partition list, ListOffsets for earliest,
latest and by-timestamp offsets (`offsets_for_times` answers all partitions in one request per
leader; -2 and -1 ask for earliest and latest). No consumer group is joined — the source keeps its
offsets in Spark's checkpoint, as Spark's own Kafka source does.

These calls block on the network; they run in Spark's Python planner process, never on an event
loop.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from logbroker.spark.errors import DataLossError, KafkaClientError, retriable
from logbroker.spark.offsets import EARLIEST, LATEST, OffsetSpec, PartitionOffsets
from logbroker.spark.options import SourceOptions, Subscription

T = TypeVar("T")

METADATA_TIMEOUT_S = 30.0
LIST_OFFSETS_TRY_S = 5.0
# librdkafka's own errors for a request that got no answer: worth asking another broker.
_TRANSIENT = frozenset({KafkaError._TIMED_OUT, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN})


class _TryAgain(Exception):
    """One try of a planning call failed in a way the next try may not (its message says how)."""


def _in_tries(attempt: Callable[[], T], *, between: Callable[[], None] = lambda: None) -> T:
    """`attempt()`, tried again every 0.2 s (after `between()`) while it raises _TryAgain, for up
    to METADATA_TIMEOUT_S in all; then its last failure is raised as KafkaClientError."""
    deadline = time.monotonic() + METADATA_TIMEOUT_S
    while True:
        try:
            return attempt()
        except _TryAgain as e:
            if time.monotonic() > deadline:
                raise KafkaClientError(str(e)) from None
        between()
        time.sleep(0.2)


def consumer_config(options: SourceOptions, *, purpose: str) -> dict[str, object]:
    """A consumer that reads by assign() with explicit offsets and never commits.

    `group.id` is required by librdkafka even for assign(); a fresh, unused id keeps the source
    independent of the broker's group coordinator.
    """
    config: dict[str, object] = {
        "bootstrap.servers": options.bootstrap_servers,
        "group.id": f"{options.group_id_prefix}-{purpose}-{uuid.uuid4().hex[:12]}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "log_level": 3,
    }
    config.update(options.kafka_config)
    return config


class ClusterView:
    """A planning connection: partitions of the subscription and their offsets."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.subscription: Subscription = options.subscription
        self._consumer = Consumer(consumer_config(options, purpose="planner"))

    def close(self) -> None:
        self._consumer.close()

    def __enter__(self) -> ClusterView:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def topic_partitions(self) -> list[tuple[str, int]]:
        """The partitions of the subscription that exist now, sorted."""
        metadata = self._list_topics()
        existing = {name: sorted(topic.partitions) for name, topic in metadata.topics.items()
                    if topic.error is None}
        sub = self.subscription
        if sub.assignment:
            return sorted(tp for tp in sub.assignment if tp[1] in existing.get(tp[0], ()))
        if sub.pattern is not None:
            regex = re.compile(sub.pattern)
            names = [name for name in existing
                     if regex.fullmatch(name) and not name.startswith("__")]
        else:
            names = [name for name in sub.topics if name in existing]
        return sorted((name, p) for name in names for p in existing[name])

    def _list_topics(self):
        """Metadata of every topic. librdkafka sends the request to one broker, and if that broker
        dies with the request in flight the request stays with it until the timeout (seen in CI:
        a leader SIGKILLed just before the planner asked); so ask in tries of LIST_OFFSETS_TRY_S,
        each to a broker usable then."""

        def attempt():
            try:
                return self._consumer.list_topics(timeout=LIST_OFFSETS_TRY_S)
            except KafkaException as e:
                error, failure = e.args[0], f"cannot list topics of {self.options.bootstrap_servers}: {e}"
                if retriable(error) or error.code() in _TRANSIENT:
                    raise _TryAgain(failure) from None
                raise KafkaClientError(failure) from None

        return _in_tries(attempt)

    def _list_offsets(self, queries: Mapping[tuple[str, int], int]) -> PartitionOffsets:
        if not queries:
            return {}
        request = [TopicPartition(t, p, q) for (t, p), q in queries.items()]

        def attempt() -> list[TopicPartition]:
            try:
                answers = self._consumer.offsets_for_times(request, timeout=LIST_OFFSETS_TRY_S)
            except KafkaException as e:
                # Timeouts, and _DESTROY_BROKER when the dead leader's handle is decommissioned
                # mid-request: all transient while a new leader is elected.
                raise _TryAgain(f"ListOffsets failed: {e}") from None
            if any(tp.error is not None and retriable(tp.error) for tp in answers):
                raise _TryAgain("ListOffsets failed: " + "; ".join(
                    str(tp.error) for tp in answers if tp.error is not None))
            return answers

        # During a leader failover librdkafka may keep asking the old leader until its metadata
        # is refreshed: each try after the first asks with fresh metadata.
        answers = _in_tries(attempt, between=self._refresh_metadata)
        result: PartitionOffsets = {}
        for tp in answers:
            if tp.error is not None:
                raise KafkaClientError(f"ListOffsets failed for {tp.topic}-{tp.partition}: "
                                       f"{tp.error}")
            result[(tp.topic, tp.partition)] = tp.offset
        return result

    def _refresh_metadata(self) -> None:
        try:
            self._consumer.list_topics(timeout=LIST_OFFSETS_TRY_S)
        except KafkaException:
            pass  # the next try fails the same way, or the deadline reports it

    def earliest(self, tps: Iterable[tuple[str, int]]) -> PartitionOffsets:
        return self._list_offsets({tp: EARLIEST for tp in tps})

    def latest(self, tps: Iterable[tuple[str, int]]) -> PartitionOffsets:
        return self._list_offsets({tp: LATEST for tp in tps})

    def by_timestamp(self, timestamps: Mapping[tuple[str, int], int], *,
                     missing_is_latest: bool) -> PartitionOffsets:
        """The first offset whose timestamp is ≥ the given one (ListOffsets by timestamp).

        A partition with no such record resolves to its latest offset with strategy "latest",
        and is an error otherwise, as in Spark.
        """
        found = self._list_offsets(timestamps)
        missing = [tp for tp, offset in found.items() if offset < 0]
        if missing and not missing_is_latest:
            raise KafkaClientError(
                f"no record at or after the given timestamp in {_names(missing)}; set "
                "startingOffsetsByTimestampStrategy=latest to start those at their latest offset")
        if missing:
            found.update(self.latest(missing))
        return found

    def resolve(self, spec: OffsetSpec, tps: list[tuple[str, int]], *,
                default_for_unlisted: int) -> PartitionOffsets:
        """Turn an offset spec into concrete offsets for `tps`.

        Partitions that a JSON spec does not list get `default_for_unlisted` (EARLIEST or LATEST).
        """
        if spec.kind == "earliest":
            return self.earliest(tps)
        if spec.kind == "latest":
            return self.latest(tps)
        if spec.kind == "timestamp":
            if spec.global_timestamp_ms is not None:
                queries = {tp: spec.global_timestamp_ms for tp in tps}
            else:
                queries = {tp: spec.timestamps[tp[0]][tp[1]] for tp in tps
                           if tp[1] in spec.timestamps.get(tp[0], {})}
            found = self.by_timestamp(queries, missing_is_latest=spec.missing_timestamp_is_latest)
            rest = [tp for tp in tps if tp not in found]
            found.update(self._list_offsets({tp: default_for_unlisted for tp in rest}))
            return found
        wanted = {tp: spec.offsets.get(tp[0], {}).get(tp[1], default_for_unlisted) for tp in tps}
        special = {tp: q for tp, q in wanted.items() if q in (EARLIEST, LATEST)}
        resolved = {tp: q for tp, q in wanted.items() if q >= 0}
        resolved.update(self._list_offsets(special))
        return resolved

    def check_not_lost(self, start: PartitionOffsets) -> PartitionOffsets:
        """Start offsets that fell below the log start offset are data loss.

        With failOnDataLoss the query fails naming the partitions; without, those partitions
        move up to their earliest offset.
        """
        earliest = self.earliest(start)
        lost = {tp: (offset, earliest[tp]) for tp, offset in start.items()
                if tp in earliest and offset < earliest[tp]}
        if not lost:
            return dict(start)
        if self.options.fail_on_data_loss:
            raise DataLossError(data_loss_message(lost))
        return {**start, **{tp: earliest[tp] for tp in lost}}


def _names(tps: Iterable[tuple[str, int]]) -> str:
    return ", ".join(f"{t}-{p}" for t, p in sorted(tps))


def data_loss_message(lost: Mapping[tuple[str, int], tuple[int, int]]) -> str:
    parts = ", ".join(f"{t}-{p} (wanted offset {want}, earliest is {have})"
                      for (t, p), (want, have) in sorted(lost.items()))
    return (f"Some data may have been lost because they are not available in Kafka any more; "
            f"either the data was aged out by Kafka or the topic may have been deleted before "
            f"all the data in the topic was processed: {parts}. If you want your streaming query "
            f"to continue in this case, set the source option failOnDataLoss to false.")
