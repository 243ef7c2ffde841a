"""The registry's Prometheus metrics, on the broker's `/metrics` endpoint (when `metrics.port` is
set) next to Kafka's:

    schema_registry_registered_schemas               live (not soft-deleted) subject versions
    schema_registry_schema_ids                       distinct schema ids
    schema_registry_subjects                         subjects with a live version
    schema_registry_requests_total{endpoint,method,status}
    schema_registry_request_latency_seconds{endpoint,quantile} (+ _count, _sum)

Confluent's registry exposes kafka.schema.registry:type=registered-count and per-endpoint
jersey-metrics request rates and latencies over JMX; these are the same facts with Prometheus
names. As in server/metrics.py, requests add to plain ints and a ring buffer of latencies per
endpoint on the event loop, and the families are built at scrape time.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

from logbroker.schema_registry.state import RegistryState
from logbroker.server.metrics import TimeReservoir


class RegistryMetrics:
    """What the REST app counts, and a prometheus-client collector of it. Event loop only."""

    def __init__(self, state: RegistryState) -> None:
        self.state = state
        self.requests: dict[tuple[str, str, int], int] = {}
        self.latency: dict[str, TimeReservoir] = {}

    def observe(self, endpoint: str, method: str, status: int, seconds: float) -> None:
        key = (endpoint, method, status)
        self.requests[key] = self.requests.get(key, 0) + 1
        times = self.latency.get(endpoint)
        if times is None:
            times = self.latency[endpoint] = TimeReservoir()
        times.add(seconds)

    def collect(self) -> Iterable[Metric]:
        state = self.state
        live = [s for s in state.all_schemas() if not s.deleted]
        yield GaugeMetricFamily("schema_registry_registered_schemas",
                                "Live (not soft-deleted) subject versions", value=len(live))
        yield GaugeMetricFamily("schema_registry_schema_ids", "Distinct schema ids of live versions",
                                value=len({s.id for s in live}))
        yield GaugeMetricFamily("schema_registry_subjects", "Subjects with a live version",
                                value=len(state.subject_names()))
        requests = CounterMetricFamily("schema_registry_requests", "Registry HTTP requests",
                                       labels=("endpoint", "method", "status"))
        for (endpoint, method, status), count in sorted(self.requests.items()):
            requests.add_metric((endpoint, method, str(status)), count)
        yield requests
        name = "schema_registry_request_latency_seconds"
        latency = Metric(name, "Seconds from a registry request's arrival to its answer, over the latest "
                               "requests of each endpoint", "summary")
        for endpoint, times in sorted(self.latency.items()):
            labels = {"endpoint": endpoint}
            for q, seconds in times.quantiles():
                latency.add_sample(name, {**labels, "quantile": str(q)}, seconds)
            latency.add_sample(name + "_count", labels, times.count)
            latency.add_sample(name + "_sum", labels, times.sum_s)
        yield latency
