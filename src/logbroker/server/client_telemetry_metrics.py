"""The metrics clients pushed (KIP-714), as Prometheus families for /metrics.

One family per pushed metric name (`org.apache.kafka.producer.node.request.latency.avg` →
`org_apache_kafka_producer_node_request_latency_avg`), a counter for monotonic sums (Prometheus
adds `_total`), a gauge otherwise. Each sample is labelled with the pushing client's identity —
client_instance_id, client_id, client_software_name, client_software_version, principal — then
the data point's own attributes (an attribute named like an identity label is left out). Label
sets differ between points of one family, so a family takes the union and leaves a missing
label empty.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

from logbroker.server.otlp_metrics import prometheus_name

IDENTITY_LABELS = ("client_instance_id", "client_id", "client_software_name", "client_software_version",
                   "principal")


def telemetry_families(telemetry) -> Iterable[Metric]:
    by_name: dict[str, list] = {}
    for instance in list(telemetry.instances.values()):
        for point in list(instance.points.values()):
            by_name.setdefault(point.name, []).append((instance.identity, point))
    for name, samples in sorted(by_name.items()):
        counter = all(point.counter for _, point in samples)
        extra = sorted({k for _, point in samples for k, _ in point.attributes} - set(IDENTITY_LABELS))
        labels = [*IDENTITY_LABELS, *extra]
        documentation = f"{name}, pushed by clients (KIP-714 client telemetry)"
        family = (CounterMetricFamily if counter else GaugeMetricFamily)(
            prometheus_name(name), documentation, labels=labels)
        for identity, point in samples:
            attributes = dict(point.attributes)
            family.add_metric([identity.get(k, "") for k in IDENTITY_LABELS] + [attributes.get(k, "") for k in extra],
                              point.value)
        yield family
