"""Metrics with Kafka's names, in Prometheus format, and a health check: `/metrics` and `/healthz`
on `metrics.port` (unset: no endpoint, no counting, nothing imported).

Names are Kafka's JMX metrics as the Prometheus JMX exporter's standard Kafka rules
(kafka-2_0_0.yml, `lowercaseOutputName: true`) render them, so existing dashboards work unchanged:

    kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=T
        → kafka_server_brokertopicmetrics_messagesin_total{topic="T"}   (and without `topic`:
          the all-topics total). Likewise BytesIn, BytesOut, BytesRejected, ReplicationBytesOut,
          TotalProduceRequests, TotalFetchRequests, FailedProduceRequests, FailedFetchRequests.
    kafka.network:type=RequestMetrics,name=RequestsPerSec,request=Produce,version=9
        → kafka_network_requestmetrics_requests_total{request="Produce",version="9"}
    kafka.network:type=RequestMetrics,name=TotalTimeMs,request=Produce
        → kafka_network_requestmetrics_totaltimems{request="Produce",quantile="0.99"} (+ _count, _sum)
    kafka.server:type=ReplicaManager,name=LeaderCount → kafka_server_replicamanager_leadercount
        (PartitionCount, UnderReplicatedPartitions, UnderMinIsrPartitionCount,
        AtMinIsrPartitionCount; IsrShrinksPerSec/IsrExpandsPerSec → …_isrshrinks_total/…_isrexpands_total)
    kafka.log:type=Log,name=LogEndOffset,topic=T,partition=P → kafka_log_log_logendoffset{…}
        (LogStartOffset, Size, NumLogSegments)
    kafka.server:type=DelayedOperationPurgatory,name=PurgatorySize,delayedOperation=Produce
        → kafka_server_delayedoperationpurgatory_purgatorysize{delayedOperation="Produce"}
    kafka.server:type=socket-server-metrics,listener=L → kafka_server_socket_server_metrics_connection_count
    kafka.network:type=RequestChannel,name=RequestQueueSize → kafka_network_requestchannel_requestqueuesize
    kafka.server:type=Produce,user=U,client-id=C byte-rate / throttle-time (Fetch likewise,
    Request request-time / throttle-time, ControllerMutation mutation-rate / throttle-time: the
    client quota sensors, server/client_quotas.py) → kafka_server_quota_byte_rate{resource="Produce",
        user="U",clientId="C"} (the exporter's quota rule; an absent tag is an empty label)
    kafka.coordinator.transaction:type=TransactionMarkerChannelManager,name=UnknownDestinationQueueSize
        → kafka_coordinator_transaction_transactionmarkerchannelmanager_unknowndestinationqueuesize
        (and LogAppendRetryQueueSize: markers not yet written); the transaction-coordinator-metrics
        group's partition-load-time-max/-avg → kafka_server_transaction_coordinator_metrics_partition_load_time_max
    kafka.server:type=group-coordinator-metrics,name=group-count,protocol=consumer
        → kafka_server_group_coordinator_metrics_group_count{protocol="consumer"} (classic, …);
        name=consumer-group-count,state=stable → …_consumer_group_count{state="stable"} (likewise
        classic-group-count and every other group type's); consumer-group-rebalance-count
        → …_consumer_group_rebalance_total (group epoch bumps)
    the metrics clients push (KIP-714), which Kafka leaves to a plugin: one family per pushed
        metric, labelled with the client's identity (server/client_telemetry_metrics.py)
    consumer-group lag, which Kafka has no JMX metric for, as kafka_exporter names it:
        kafka_consumergroup_lag{consumergroup,topic,partition}, kafka_consumergroup_current_offset

Why counters are plain ints and not prometheus-client Counter objects: a Counter's `inc()` takes
a lock and checks its argument (~0.3 µs), and one produce request moves six of them. Here the hot
paths add to attributes of small slotted objects (~40 ns each) on the event loop, and a custom
collector turns them into prometheus-client metric families at scrape time; everything that is
state rather than an event (offsets, sizes, ISR, purgatories, connections) is read only then.
TotalTimeMs is a summary over the latest `RESERVOIR_SIZE` requests of each API (Kafka's own
histograms sample about as many, exponentially decayed), kept in a ring buffer.

What counts as a failed request follows Kafka's ReplicaManager: errors a client is expected to
meet and handle (unknown topic, not leader, record too large, corrupt record, out of range, …)
are not failures of the broker and are not counted; anything else is. BytesRejected counts the
batches refused as too large (MESSAGE_TOO_LARGE), as Kafka's log does.

Threads: everything here runs on the event loop, except rendering the text of a scrape, which
goes to the default executor on a snapshot of the metric families taken on the loop, so a large
scrape does not stall requests and never sees half-updated state.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import struct
from collections.abc import Awaitable, Callable, Iterable
from time import perf_counter
from types import CoroutineType
from typing import Any

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

from logbroker.coordinator.group import GroupType
from logbroker.errors import KafkaError, MessageTooLargeError, UnknownTopicOrPartitionError
from logbroker.protocol.apis import SUPPORTED_APIS, ApiKey
from logbroker.protocol.responses.fetch import records_size
from logbroker.server.remote_metrics import remote_storage_families

log = logging.getLogger("kafka.metrics.PrometheusReporter")

RESERVOIR_SIZE = 1024  # a power of two: the ring index is `count & (RESERVOIR_SIZE - 1)`
QUANTILES = (0.5, 0.75, 0.95, 0.98, 0.99, 0.999)  # Kafka's 50th … 999thPercentile
HTTP_TIMEOUT_S = 10.0

# Errors Kafka's ReplicaManager does not count as failed produce / fetch requests (see above).
_EXPECTED_PRODUCE_ERRORS = frozenset({2, 3, 6, 10, 18, 56})  # CORRUPT_MESSAGE, UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE, KAFKA_STORAGE_ERROR
_EXPECTED_FETCH_ERRORS = frozenset({1, 3, 6, 9, 56, 74, 75, 100, 102})  # + OFFSET_OUT_OF_RANGE, REPLICA_NOT_AVAILABLE, FENCED/UNKNOWN_LEADER_EPOCH, UNKNOWN/INCONSISTENT_TOPIC_ID

# The request header starts with api_key int16 and api_version int16: read as one number.
_API_KEY_AND_VERSION = struct.Struct(">I").unpack_from
_REQUEST_NAMES = {int(k): "".join(w.capitalize() for w in k.name.split("_")) for k in ApiKey}


def request_name(api_key: int) -> str:
    """Kafka's name for an API, as RequestMetrics labels it: `ListOffsets`, `OffsetForLeaderEpoch`."""
    return _REQUEST_NAMES.get(api_key, str(api_key))


# -- what the hot paths touch --------------------------------------------------------------------
class BrokerTopicMetrics:
    """Kafka's BrokerTopicMetrics for one topic (or for all): event counts since startup."""

    __slots__ = ("messages_in", "bytes_in", "bytes_out", "bytes_rejected", "replication_bytes_out",
                 "total_produce_requests", "total_fetch_requests", "failed_produce_requests",
                 "failed_fetch_requests")

    def __init__(self) -> None:
        for name in self.__slots__:
            setattr(self, name, 0)


class TimeReservoir:
    """The latest RESERVOIR_SIZE request times of one API (seconds), plus count and sum of all."""

    __slots__ = ("samples", "count", "sum_s")

    def __init__(self) -> None:
        self.samples = [0.0] * RESERVOIR_SIZE
        self.count = 0
        self.sum_s = 0.0

    def add(self, seconds: float) -> None:
        self.samples[self.count & (RESERVOIR_SIZE - 1)] = seconds
        self.count += 1
        self.sum_s += seconds

    def quantiles(self) -> list[tuple[float, float]]:
        """(quantile, seconds) over the samples held; empty before the first request."""
        held = sorted(self.samples[:min(self.count, RESERVOIR_SIZE)])
        if not held:
            return []
        last = len(held) - 1
        return [(q, held[min(last, int(q * len(held)))]) for q in QUANTILES]


class RequestStats:
    """One (API, version): how many requests; their times go to the API's reservoir."""

    __slots__ = ("count", "times")

    def __init__(self, times: TimeReservoir) -> None:
        self.count = 0
        self.times = times


class BrokerMetrics:
    """The counters of one broker, and the hooks that move them.

    Hooks (each guarded by `if … is not None`, so with metrics off they cost one attribute test):
    the Kafka handler is wrapped by `TimedHandler` (requests and TotalTimeMs per API);
    `ReplicaManager.append_records_now` calls `on_produce`; the Fetch handler passes its results
    through `on_fetch`. Replication calls `isr_shrinks += 1` / `isr_expands += 1` when it changes
    an ISR. All on the event loop.
    """

    def __init__(self) -> None:
        self.all_topics = BrokerTopicMetrics()
        self.topics: dict[str, BrokerTopicMetrics] = {}
        self.requests: dict[int, RequestStats] = {}  # api_key << 16 | api_version
        self.request_times: dict[int, TimeReservoir] = {}  # api_key
        self.isr_shrinks = 0
        self.isr_expands = 0

    def topic(self, topic: str) -> BrokerTopicMetrics:
        stats = self.topics.get(topic)
        if stats is None:
            stats = self.topics[topic] = BrokerTopicMetrics()
        return stats

    def request_stats(self, key: int) -> RequestStats | None:
        """The stats of `api_key << 16 | api_version`; None for an API we do not serve, so a
        client sending garbage cannot grow the label set."""
        stats = self.requests.get(key)
        if stats is None:
            api_key, version = key >> 16, key & 0xFFFF
            if api_key not in SUPPORTED_APIS or version > 0x7F:
                return None
            times = self.request_times.get(api_key)
            if times is None:
                times = self.request_times[api_key] = TimeReservoir()
            stats = self.requests[key] = RequestStats(times)
        return stats

    # -- produce ----------------------------------------------------------------------------
    def on_produce(self, entries: dict, results: dict) -> None:
        """After the appends of one Produce request (before any wait): `entries` maps each
        partition to its batch, `results` to its ProduceResult. Messages in = the offsets the
        batch was given (its record count); bytes in = the batch's length."""
        all_topics, topics = self.all_topics, self.topics
        for tp, result in results.items():
            if result.error is not None:
                self._produce_failed(tp, result.error, len(entries[tp]))
                continue
            stats = topics.get(tp.topic) or self.topic(tp.topic)
            messages = result.last_offset - result.base_offset + 1
            size = len(entries[tp])
            all_topics.total_produce_requests += 1
            all_topics.messages_in += messages
            all_topics.bytes_in += size
            stats.total_produce_requests += 1
            stats.messages_in += messages
            stats.bytes_in += size

    def _produce_failed(self, tp, error: KafkaError, size: int) -> None:
        all_topics = self.all_topics
        stats = None if isinstance(error, UnknownTopicOrPartitionError) else self.topic(tp.topic)
        all_topics.total_produce_requests += 1
        if stats is not None:
            stats.total_produce_requests += 1
        if error.code not in _EXPECTED_PRODUCE_ERRORS:
            all_topics.failed_produce_requests += 1
            if stats is not None:
                stats.failed_produce_requests += 1
        if isinstance(error, MessageTooLargeError):
            all_topics.bytes_rejected += size
            if stats is not None:
                stats.bytes_rejected += size

    # -- fetch ------------------------------------------------------------------------------
    def on_fetch(self, replica_id: int, results):
        """The results of one Fetch (a dict, or an awaitable of one), counted when they are
        final; returns what it was given (or an awaitable of the same)."""
        if isinstance(results, dict):
            self._count_fetch(replica_id, results)
            return results
        return self._fetch_later(replica_id, results)

    async def _fetch_later(self, replica_id: int, pending: Awaitable[dict]) -> dict:
        results = await pending
        self._count_fetch(replica_id, results)
        return results

    def _count_fetch(self, replica_id: int, results: dict) -> None:
        all_topics = self.all_topics
        follower = replica_id >= 0
        for tp, result in results.items():
            error = result.error
            stats = self.topic(tp.topic) if not isinstance(error, UnknownTopicOrPartitionError) else None
            all_topics.total_fetch_requests += 1
            if stats is not None:
                stats.total_fetch_requests += 1
            if error is not None:
                if error.code not in _EXPECTED_FETCH_ERRORS:
                    all_topics.failed_fetch_requests += 1
                    if stats is not None:
                        stats.failed_fetch_requests += 1
                continue
            size = records_size(result.records)  # a file region, or bytes read from remote
            if not size:
                continue
            if follower:  # Kafka counts replication apart: ReplicationBytesOutPerSec
                all_topics.replication_bytes_out += size
            else:
                all_topics.bytes_out += size
                stats.bytes_out += size


class TimedHandler:
    """Wraps the Kafka request handler: counts each request per (API, version) and times it from
    dispatch until its response is encoded (not the wait behind earlier responses on the same
    connection, nor the socket write)."""

    __slots__ = ("handler", "metrics", "requests")

    def __init__(self, handler: Callable, metrics: BrokerMetrics) -> None:
        self.handler = handler
        self.metrics = metrics
        self.requests = metrics.requests

    def __call__(self, frame: memoryview, connection):
        start = perf_counter()
        try:
            key = _API_KEY_AND_VERSION(frame)[0]
        except struct.error:  # shorter than a header: the dispatcher closes the connection
            return self.handler(frame, connection)
        stats = self.requests.get(key) or self.metrics.request_stats(key)
        result = self.handler(frame, connection)
        if stats is None:
            return result
        stats.count += 1
        if type(result) is CoroutineType:
            return self._timed(result, stats.times, start)
        times = stats.times
        elapsed = perf_counter() - start
        times.samples[times.count & (RESERVOIR_SIZE - 1)] = elapsed
        times.count += 1
        times.sum_s += elapsed
        return result

    @staticmethod
    async def _timed(coroutine, times: TimeReservoir, start: float):
        try:
            return await coroutine
        finally:
            times.add(perf_counter() - start)


# -- scrape time ------------------------------------------------------------------------------
def _counter(name: str, documentation: str) -> Metric:
    return Metric(name, documentation, "counter")


class BrokerCollector:
    """Builds every logbroker family at scrape time from the counters and the broker's state."""

    _TOPIC_METRICS = (
        ("messages_in", "messagesin", "Records appended (MessagesInPerSec)"),
        ("bytes_in", "bytesin", "Bytes of record batches appended (BytesInPerSec)"),
        ("bytes_out", "bytesout", "Record bytes sent to consumers (BytesOutPerSec)"),
        ("bytes_rejected", "bytesrejected", "Bytes of batches refused as too large (BytesRejectedPerSec)"),
        ("total_produce_requests", "totalproducerequests", "Partition appends asked for (TotalProduceRequestsPerSec)"),
        ("total_fetch_requests", "totalfetchrequests", "Partition reads asked for (TotalFetchRequestsPerSec)"),
        ("failed_produce_requests", "failedproducerequests", "Partition appends failed unexpectedly (FailedProduceRequestsPerSec)"),
        ("failed_fetch_requests", "failedfetchrequests", "Partition reads failed unexpectedly (FailedFetchRequestsPerSec)"),
    )

    def __init__(self, broker: Any, metrics: BrokerMetrics) -> None:
        self.broker = broker
        self.metrics = metrics

    def collect(self) -> Iterable[Metric]:
        partitions = list(self.broker.replica_manager.partitions.values())
        yield from self._topic_metrics({p.tp.topic for p in partitions})
        yield from self._request_metrics()
        yield from self._replica_manager(partitions)
        yield from self._logs(partitions)
        yield from self._server()
        yield from self._quotas()
        yield from self._group_lag()
        yield from self._group_coordinator()
        yield from self._transaction_coordinator()
        yield from remote_storage_families(self.broker.replica_manager.remote_log_manager, partitions)
        if self.broker.client_telemetry is not None and self.broker.client_telemetry.instances:
            from logbroker.server.client_telemetry_metrics import telemetry_families
            yield from telemetry_families(self.broker.client_telemetry)

    def _topic_metrics(self, hosted_topics: set[str]) -> Iterable[Metric]:
        m = self.metrics
        for gone in [t for t in m.topics if t not in hosted_topics]:
            del m.topics[gone]  # a deleted topic's metrics go, as Kafka removes them
        topics = sorted(m.topics.items())
        for attribute, short, documentation in self._TOPIC_METRICS:
            family = _counter(f"kafka_server_brokertopicmetrics_{short}", documentation)
            sample = family.name + "_total"
            family.add_sample(sample, {}, getattr(m.all_topics, attribute))
            for topic, stats in topics:
                family.add_sample(sample, {"topic": topic}, getattr(stats, attribute))
            yield family
        family = _counter("kafka_server_brokertopicmetrics_replicationbytesout",
                          "Record bytes sent to follower replicas (ReplicationBytesOutPerSec)")
        family.add_sample(family.name + "_total", {}, m.all_topics.replication_bytes_out)
        yield family

    def _request_metrics(self) -> Iterable[Metric]:
        m = self.metrics
        requests = _counter("kafka_network_requestmetrics_requests", "Requests received (RequestsPerSec)")
        for key, stats in sorted(m.requests.items()):
            requests.add_sample("kafka_network_requestmetrics_requests_total",
                                {"request": request_name(key >> 16), "version": str(key & 0xFFFF)}, stats.count)
        yield requests
        name = "kafka_network_requestmetrics_totaltimems"
        total = Metric(name, "Milliseconds from a request's dispatch to its encoded response, over the "
                             f"latest {RESERVOIR_SIZE} requests of each API (TotalTimeMs)", "summary")
        for api_key, times in sorted(m.request_times.items()):
            labels = {"request": request_name(api_key)}
            for q, seconds in times.quantiles():
                total.add_sample(name, {**labels, "quantile": str(q)}, seconds * 1000)
            total.add_sample(name + "_count", labels, times.count)
            total.add_sample(name + "_sum", labels, times.sum_s * 1000)
        yield total

    def _replica_manager(self, partitions: list) -> Iterable[Metric]:
        leaders = [p for p in partitions if p.is_leader]
        under_replicated = under_min_isr = at_min_isr = 0
        for p in leaders:
            isr, min_isr = len(p.isr), p.log.config.min_insync_replicas
            under_replicated += isr < len(p.replicas)
            under_min_isr += isr < min_isr
            at_min_isr += isr == min_isr
        for short, value, documentation in (
                ("leadercount", len(leaders), "Partitions this broker leads"),
                ("partitioncount", len(partitions), "Partitions this broker hosts"),
                ("underreplicatedpartitions", under_replicated, "Led partitions whose ISR is smaller than their replica set"),
                ("underminisrpartitioncount", under_min_isr, "Led partitions whose ISR is below min.insync.replicas"),
                ("atminisrpartitioncount", at_min_isr, "Led partitions whose ISR is exactly min.insync.replicas")):
            yield GaugeMetricFamily(f"kafka_server_replicamanager_{short}", documentation, value=value)
        for short, value in (("isrshrinks", self.metrics.isr_shrinks), ("isrexpands", self.metrics.isr_expands)):
            family = _counter(f"kafka_server_replicamanager_{short}", f"ISR {short[3:]} (Isr{short[3:].capitalize()}PerSec)")
            family.add_sample(family.name + "_total", {}, value)
            yield family

    def _logs(self, partitions: list) -> Iterable[Metric]:
        labels = ["topic", "partition"]
        end = GaugeMetricFamily("kafka_log_log_logendoffset", "Offset of the next record appended", labels=labels)
        start = GaugeMetricFamily("kafka_log_log_logstartoffset", "First offset held", labels=labels)
        size = GaugeMetricFamily("kafka_log_log_size", "Bytes on disk in the partition's segments", labels=labels)
        segments = GaugeMetricFamily("kafka_log_log_numlogsegments", "Segments of the partition", labels=labels)
        lso_lag = GaugeMetricFamily("kafka_cluster_partition_laststableoffsetlag",
                                    "High watermark minus last stable offset: how far open transactions "
                                    "hold read_committed consumers back (LastStableOffsetLag)", labels=labels)
        for p in sorted(partitions, key=lambda p: (p.tp.topic, p.tp.partition)):
            values = [p.tp.topic, str(p.tp.partition)]
            log_ = p.log
            end.add_metric(values, log_.log_end_offset)
            start.add_metric(values, log_.log_start_offset)
            size.add_metric(values, log_.size_in_bytes)
            segments.add_metric(values, len(log_.segments))
            lso_lag.add_metric(values, p.high_watermark - p.last_stable_offset)
        yield from (end, start, size, segments, lso_lag)

    def _server(self) -> Iterable[Metric]:
        broker = self.broker
        rm = broker.replica_manager
        sizes = [("Produce", len(rm.produce_purgatory)), ("Fetch", len(rm.fetch_purgatory))]
        for short in ("purgatorysize", "numdelayedoperations"):
            family = GaugeMetricFamily(f"kafka_server_delayedoperationpurgatory_{short}",
                                       "Requests waiting in the purgatory", labels=["delayedOperation"])
            for name, size in sizes:
                family.add_metric([name], size)
            yield family
        connections = list(broker.server.connections) if broker.server is not None else []
        listener = broker.listeners[0].name if len(broker.listeners) == 1 else "ALL"
        family = GaugeMetricFamily("kafka_server_socket_server_metrics_connection_count",
                                   "Open client connections", labels=["listener"])
        family.add_metric([listener], len(connections))
        yield family
        queued = sum(len(getattr(c, "_slots", ())) for c in connections)
        yield GaugeMetricFamily("kafka_network_requestchannel_requestqueuesize",
                                "Requests received and not yet answered, over all connections", value=queued)
        yield GaugeMetricFamily("kafka_server_kafkaserver_brokerstate",
                                "Broker state: 3 running, 1 starting", value=3 if broker.listeners else 1)

    def _quotas(self) -> Iterable[Metric]:
        quotas = self.broker.client_quotas
        if quotas is None:
            return
        labels = ["resource", "user", "clientId"]
        families = {name: GaugeMetricFamily(f"kafka_server_quota_{name}", documentation, labels=labels)
                    for name, documentation in (
                        ("byte_rate", "Bytes a second of a client's produce requests or fetch responses"),
                        ("request_time", "Percentage of the event loop a client's requests took"),
                        ("mutation_rate", "Partitions a second a client created or deleted"),
                        ("throttle_time", "Average throttle time given to a client, in ms"))}
        rate_name = {"Produce": "byte_rate", "Fetch": "byte_rate", "Request": "request_time",
                     "ControllerMutation": "mutation_rate"}
        now_ms = quotas.clock_ms()
        for manager in quotas.managers:
            for (user, client_id), sensors in list(manager.sensors.items()):
                values = [manager.metric_group, user, client_id]
                families[rate_name[manager.metric_group]].add_metric(values, sensors.rate.rate(now_ms))
                families["throttle_time"].add_metric(values, sensors.throttle.avg_ms)
        yield from families.values()

    def _group_lag(self) -> Iterable[Metric]:
        """Lag of each committed offset of the groups this broker coordinates."""
        coordinator = getattr(self.broker, "group_coordinator", None)
        groups = getattr(coordinator, "groups", None)
        if not groups:
            return
        labels = ["consumergroup", "topic", "partition"]
        lag = GaugeMetricFamily("kafka_consumergroup_lag", "High watermark minus the committed offset", labels=labels)
        current = GaugeMetricFamily("kafka_consumergroup_current_offset", "Committed offset", labels=labels)
        partitions = self.broker.replica_manager.partitions
        for group_id, group in sorted(groups.items()):
            for tp, committed in sorted(getattr(group, "offsets", {}).items()):
                offset = getattr(committed, "offset", committed)
                values = [group_id, tp.topic, str(tp.partition)]
                current.add_metric(values, offset)
                partition = partitions.get(tp)
                if partition is not None and offset >= 0:
                    lag.add_metric(values, max(partition.high_watermark - offset, 0))
        yield from (current, lag)


    def _group_coordinator(self) -> Iterable[Metric]:
        """Kafka 4's group-coordinator-metrics: groups by type, each type's groups by state, and
        the rebalances of consumer-protocol groups (group epoch bumps)."""
        coordinator = getattr(self.broker, "group_coordinator", None)
        if coordinator is None:
            return
        prefix = "kafka_server_group_coordinator_metrics_"
        by_type = GaugeMetricFamily(prefix + "group_count", "Groups this broker coordinates, by protocol",
                                    labels=["protocol"])
        by_state: dict[str, dict[str, int]] = {t.value: {} for t in GroupType}
        for group in coordinator.owned_groups():
            states = by_state.setdefault(group.group_type.value, {})
            states[group.state_name.lower()] = states.get(group.state_name.lower(), 0) + 1
        for group_type, states in sorted(by_state.items()):
            by_type.add_metric([group_type], sum(states.values()))
        yield by_type
        for group_type, states in sorted(by_state.items()):
            family = GaugeMetricFamily(prefix + f"{group_type}_group_count",
                                       f"{group_type.capitalize()} groups this broker coordinates, by state",
                                       labels=["state"])
            for state, count in sorted(states.items()):
                family.add_metric([state], count)
            yield family
        rebalances = CounterMetricFamily(prefix + "consumer_group_rebalance",
                                         "Group epoch bumps of consumer-protocol groups (consumer-group-rebalance-count)")
        rebalances.add_metric([], coordinator.consumer_group_rebalances)
        yield rebalances

    def _transaction_coordinator(self) -> Iterable[Metric]:
        coordinator = getattr(self.broker, "transaction_coordinator", None)
        if coordinator is None:
            return
        channel = coordinator.marker_channel
        prefix = "kafka_coordinator_transaction_transactionmarkerchannelmanager_"
        yield GaugeMetricFamily(prefix + "unknowndestinationqueuesize",
                                "Transaction markers waiting for their partition to have a leader",
                                value=channel.unknown_destination_queue_size)
        yield GaugeMetricFamily(prefix + "logappendretryqueuesize",
                                "Transaction markers not yet written to their partitions", value=channel.queue_size)
        times = coordinator.state_manager.load_times_ms
        prefix = "kafka_server_transaction_coordinator_metrics_partition_load_time_"
        yield GaugeMetricFamily(prefix + "max", "Longest load of a __transaction_state partition (ms)",
                                value=max(times, default=0))
        yield GaugeMetricFamily(prefix + "avg", "Average load of a __transaction_state partition (ms)",
                                value=sum(times) / len(times) if times else 0)


class _Snapshot:
    """Families collected on the loop, for the encoder to render in a thread."""

    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> list[Metric]:
        return self.families


# -- the endpoint -----------------------------------------------------------------------------
class MetricsServer:
    """`/metrics` (Prometheus text or OpenMetrics, as the scraper's Accept header asks) and
    `/healthz` over HTTP/1.1, one request per connection, on the broker's event loop."""

    def __init__(self, broker: Any, metrics: BrokerMetrics) -> None:
        self.broker = broker
        self.metrics = metrics
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(BrokerCollector(broker, metrics))
        for collector in (ProcessCollector, PlatformCollector, GCCollector):
            collector(registry=self.registry)
        self._server: asyncio.base_events.Server | None = None
        self.port = 0

    async def start(self, host: str, port: int) -> int:
        self._server = await asyncio.start_server(self._serve, host or None, port, reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def render(self, accept: str = "") -> tuple[bytes, str]:
        families = list(self.registry.collect())  # on the loop: a consistent snapshot
        encoder, content_type = choose_encoder(accept)
        body = await asyncio.get_running_loop().run_in_executor(None, encoder, _Snapshot(families))
        return body, content_type

    def health(self) -> tuple[int, dict]:
        """200 when the Kafka listeners are up, every log dir is writable and (in a cluster) the
        ZooKeeper session is alive; 503 naming what is not."""
        broker = self.broker
        listening = bool(broker.listeners) and broker.server is not None
        dirs = {str(d): d.is_dir() and os.access(d, os.W_OK | os.X_OK) for d in broker.log_dirs}
        checks: dict[str, object] = {"listening": listening, "log_dirs_writable": all(dirs.values())}
        # Hook for the ZooKeeper store: a metadata store with `session_alive()` is asked.
        session_alive = getattr(broker.store, "session_alive", None)
        if callable(session_alive):
            checks["zookeeper_session"] = bool(session_alive())
        healthy = all(v is True for v in checks.values())
        report = {"status": "ok" if healthy else "unavailable", "broker_id": broker.broker_id, **checks}
        if not checks["log_dirs_writable"]:
            report["unwritable_log_dirs"] = [d for d, ok in dirs.items() if not ok]
        return (200 if healthy else 503), report

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request_line = await asyncio.wait_for(reader.readline(), HTTP_TIMEOUT_S)
            accept = ""
            while True:
                line = await asyncio.wait_for(reader.readline(), HTTP_TIMEOUT_S)
                if line in (b"\r\n", b"\n", b""):
                    break
                name, _, value = line.decode("latin-1").partition(":")
                if name.strip().lower() == "accept":
                    accept = value.strip()
            method, target, *_ = request_line.decode("latin-1").split()
            path = target.split("?", 1)[0]
            if method not in ("GET", "HEAD"):
                status, content_type, body = 405, "text/plain", b"Method Not Allowed\n"
            elif path == "/metrics":
                body, content_type = await self.render(accept)
                status = 200
            elif path in ("/healthz", "/health"):
                status, report = self.health()
                content_type, body = "application/json", json.dumps(report).encode() + b"\n"
            elif path == "/":
                status, content_type, body = 200, "text/plain", b"logbroker: /metrics /healthz\n"
            else:
                status, content_type, body = 404, "text/plain", b"Not Found\n"
            reason = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}[status]
            head = (f"HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\n"
                    f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
            writer.write(head if method == "HEAD" else head + body)
            await writer.drain()
        except Exception as exc:  # noqa: BLE001 - a bad scrape must not disturb the broker
            log.debug("Metrics request failed: %r", exc)
        finally:
            writer.close()


async def start_metrics(broker: Any) -> MetricsServer:
    """Turn metrics on for `broker` (after its server exists, before its listeners bind): wrap
    its request handler, hook its ReplicaManager, and serve HTTP on `metrics.port` on the host of
    its first listener."""
    metrics = BrokerMetrics()
    broker.server.handler = TimedHandler(broker.server.handler, metrics)
    broker.replica_manager.metrics = metrics
    server = MetricsServer(broker, metrics)
    host = broker.config.listeners[0][1] if broker.config.listeners else ""
    port = await server.start(host, broker.config.metrics_port)
    log.info("Metrics endpoint listening on http://%s:%d/metrics (and /healthz)", host or "0.0.0.0", port)
    return server
