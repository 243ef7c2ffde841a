"""The registry's Prometheus metrics on the broker's /metrics endpoint: schema counts, and request
counts and latencies by endpoint and status."""

from __future__ import annotations

import re
import urllib.request

from registry_http import Registry

from logbroker.testing import SCHEMA_REGISTRY_OVERRIDES, TEST_OVERRIDES, BrokerProcess

METRICS_LINE = re.compile(r"Metrics endpoint listening on (http://[^/\s]+)/metrics")
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$')


def scrape(base: str) -> dict[tuple[str, frozenset], float]:
    with urllib.request.urlopen(base + "/metrics", timeout=15) as response:
        text = response.read().decode()
    samples = {}
    for line in text.splitlines():
        match = SAMPLE.match(line)
        if match and not line.startswith("#"):
            samples[(match.group(1), frozenset(re.findall(r'(\w+)="([^"]*)"', match.group(2) or "")))] = \
                float(match.group(3))
    return samples


def test_registry_metrics_count_schemas_and_requests(tmp_path):
    with BrokerProcess(tmp_path, overrides={**TEST_OVERRIDES, **SCHEMA_REGISTRY_OVERRIDES, "metrics.port": "0"}) as broker:
        registry = Registry(broker.schema_registry_url())
        base = METRICS_LINE.search(broker.new_log_text()).group(1)
        registry.put("/config", {"compatibility": "NONE"})
        registry.register("a", '"string"')
        registry.register("b", '"string"')
        registry.register("b", '"int"', schemaType="AVRO")
        registry.delete("/subjects/a")
        for _ in range(3):
            registry.get("/schemas/ids/1")
        registry.get("/schemas/ids/99")
        samples = scrape(base)
        assert samples[("schema_registry_registered_schemas", frozenset())] == 2
        assert samples[("schema_registry_schema_ids", frozenset())] == 2
        assert samples[("schema_registry_subjects", frozenset())] == 1
        by_id = frozenset({("endpoint", "get_schema_by_id"), ("method", "GET"), ("status", "200")})
        assert samples[("schema_registry_requests_total", by_id)] == 3
        missing = frozenset({("endpoint", "get_schema_by_id"), ("method", "GET"), ("status", "404")})
        assert samples[("schema_registry_requests_total", missing)] == 1
        registered = frozenset({("endpoint", "register_schema"), ("method", "POST"), ("status", "200")})
        assert samples[("schema_registry_requests_total", registered)] == 3
        latency = frozenset({("endpoint", "get_schema_by_id")})
        assert samples[("schema_registry_request_latency_seconds_count", latency)] == 4
        assert samples[("schema_registry_request_latency_seconds_sum", latency)] > 0
        assert ("schema_registry_request_latency_seconds",
                frozenset({("endpoint", "get_schema_by_id"), ("quantile", "0.99")})) in samples
