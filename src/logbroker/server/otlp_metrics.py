"""The OTLP metrics a client pushes (KIP-714), decoded into data points (pure; no I/O).

PushTelemetry's `metrics` is an OpenTelemetry `MetricsData` protobuf, compressed with the codec
the client chose from the ones we accepted. Gauges and sums become `Point`s; a sum is a counter
when it is monotonic, and `delta` says whether its value adds to the last one (delta temporality,
which GetTelemetrySubscriptions asks for) or replaces it. Histograms and summaries are left out:
the Kafka clients' standard metrics are gauges and sums.

Names follow Prometheus: `org.apache.kafka.producer.node.request.latency.avg` becomes
`org_apache_kafka_producer_node_request_latency_avg`, attribute keys likewise.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from logbroker.errors import CorruptRecordError, InvalidRecordError
from logbroker.records.compression import decompress

_NOT_PROMETHEUS = re.compile(r"[^a-zA-Z0-9_]")
DELTA = 1  # AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA


@dataclass(frozen=True, slots=True)
class Point:
    name: str  # the OTLP name, dotted
    attributes: tuple[tuple[str, str], ...]  # Prometheus-safe keys, sorted
    value: float
    counter: bool
    delta: bool


def prometheus_name(name: str) -> str:
    return _NOT_PROMETHEUS.sub("_", name)


def decode_metrics(compression_type: int, data: bytes) -> list[Point]:
    """The points of a push; InvalidRecordError when the bytes do not decompress or parse."""
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

    try:
        raw = decompress(compression_type, data) if compression_type else data
        metrics_data = MetricsData.FromString(bytes(raw))
    except (CorruptRecordError, DecodeError, ValueError, OSError, RuntimeError) as exc:
        raise InvalidRecordError(f"The telemetry metrics could not be decoded: {exc}") from None
    points = []
    for resource_metrics in metrics_data.resource_metrics:
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                kind = metric.WhichOneof("data")
                if kind == "gauge":
                    points.extend(_points(metric.name, metric.gauge.data_points, counter=False, delta=False))
                elif kind == "sum":
                    points.extend(_points(metric.name, metric.sum.data_points, counter=metric.sum.is_monotonic,
                                          delta=metric.sum.aggregation_temporality == DELTA))
    return points


def _points(name: str, data_points, *, counter: bool, delta: bool):
    for point in data_points:
        value = point.as_double if point.WhichOneof("value") == "as_double" else float(point.as_int)
        attributes = tuple(sorted((prometheus_name(a.key), _text(a.value)) for a in point.attributes))
        yield Point(name, attributes, value, counter, delta)


def _text(any_value) -> str:
    kind = any_value.WhichOneof("value")
    return "" if kind is None else str(getattr(any_value, kind))
