"""Client telemetry (KIP-714) against a real broker: a subscription made with `logbroker
client-metrics`, librdkafka (confluent-kafka, `enable.metrics.push` on by default) pushing its
producer metrics, which land on /metrics labelled with its client id; the limits (size, rate,
unknown subscription, terminating) with raw GetTelemetrySubscriptions / PushTelemetry requests;
the subscription read back with DescribeConfigs and ListConfigResources, and bad values refused.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import urllib.request
import uuid

import confluent_kafka
import pytest
from kio.schema.get_telemetry_subscriptions.v0.request import GetTelemetrySubscriptionsRequest
from kio.schema.list_config_resources.v0.request import ListConfigResourcesRequest
from kio.schema.push_telemetry.v0.request import PushTelemetryRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import Gauge, Metric, MetricsData, NumberDataPoint, ResourceMetrics, ScopeMetrics

from logbroker.client import KafkaConnection
from logbroker.records.compression import compress
from logbroker.testing import BrokerProcess, wait_for

METRICS_LINE = re.compile(r"Metrics endpoint listening on http://([^:]+):(\d+)/metrics")
MAX_BYTES = 8192


@pytest.fixture(scope="module")
def telemetry_broker(tmp_path_factory):
    process = BrokerProcess(tmp_path_factory.mktemp("telemetry"),
                            overrides={"metrics.port": "0", "telemetry.max.bytes": str(MAX_BYTES)})
    process.start()
    match = METRICS_LINE.search(process.new_log_text())
    process.metrics_url = f"http://{match.group(1)}:{match.group(2)}/metrics"
    yield process
    process.kill()


def tool(broker, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "logbroker.cli", "client-metrics",
                           "--bootstrap-server", broker.bootstrap, *args], capture_output=True, text=True, timeout=60)


def scrape(broker) -> str:
    with urllib.request.urlopen(broker.metrics_url, timeout=15) as response:
        return response.read().decode()


def requests(broker, *bodies, client_id: str = "raw-telemetry"):
    """The responses to `bodies`, in order, over one connection."""
    async def go():
        connection = KafkaConnection(broker.host, broker.port, client_id=client_id, timeout_s=10)
        try:
            return [await connection.request(body) for body in bodies]
        finally:
            await connection.close()
    return asyncio.run(go())


def metrics_data(name: str, value: float, **attributes: str) -> bytes:
    point = NumberDataPoint(as_double=value, attributes=[KeyValue(key=k, value=AnyValue(string_value=v))
                                                         for k, v in attributes.items()])
    metric = Metric(name=name, gauge=Gauge(data_points=[point]))
    return MetricsData(resource_metrics=[ResourceMetrics(scope_metrics=[ScopeMetrics(metrics=[metric])])]
                       ).SerializeToString()


def push(instance_id, subscription_id: int, data: bytes, *, compression: int = 0, terminating: bool = False):
    return PushTelemetryRequest(client_instance_id=instance_id, subscription_id=subscription_id,
                                terminating=terminating, compression_type=compression, metrics=data)


GET_NEW = GetTelemetrySubscriptionsRequest(client_instance_id=uuid.UUID(int=0))


def test_subscriptions_are_managed_like_kafka_client_metrics(telemetry_broker):
    altered = tool(telemetry_broker, "--alter", "--name", "cli-sub", "--metrics", "org.apache.kafka.consumer.",
                   "--interval", "60000", "--match", "client_software_name=nobody")
    assert altered.returncode == 0 and altered.stdout == "Altered client metrics config for cli-sub.\n"
    assert "cli-sub" in tool(telemetry_broker, "--list").stdout.split()
    described = tool(telemetry_broker, "--describe", "--name", "cli-sub").stdout
    assert described == ("Client metrics configs for cli-sub are:\n  interval.ms=60000\n"
                         "  match=client_software_name=nobody\n  metrics=org.apache.kafka.consumer.\n")
    (listed,) = requests(telemetry_broker, ListConfigResourcesRequest())
    assert "cli-sub" in [r.resource_name for r in listed.config_resources]
    bad = tool(telemetry_broker, "--alter", "--name", "cli-sub", "--interval", "50")
    assert bad.returncode == 1 and "INVALID_CONFIG" in bad.stderr
    bad_match = tool(telemetry_broker, "--alter", "--name", "cli-sub", "--match", "colour=red")
    assert bad_match.returncode == 1 and "INVALID_CONFIG" in bad_match.stderr
    assert "interval.ms=60000" in tool(telemetry_broker, "--describe", "--name", "cli-sub").stdout  # kept
    deleted = tool(telemetry_broker, "--delete", "--name", "cli-sub")
    assert deleted.returncode == 0
    assert "cli-sub" not in tool(telemetry_broker, "--list").stdout.split()


def test_librdkafka_pushes_its_producer_metrics_to_the_prometheus_endpoint(telemetry_broker):
    assert tool(telemetry_broker, "--alter", "--name", "producers", "--metrics", "org.apache.kafka.producer.",
                "--interval", "500").returncode == 0
    client_id = f"telemetry-{uuid.uuid4().hex[:8]}"
    producer = confluent_kafka.Producer({"bootstrap.servers": telemetry_broker.bootstrap, "client.id": client_id})
    try:
        topic = f"telemetry-{uuid.uuid4().hex[:8]}"

        def pushed() -> bool:
            producer.produce(topic, b"x")
            producer.poll(0.1)
            return f'client_id="{client_id}"' in scrape(telemetry_broker)
        wait_for(pushed, timeout_s=60, what="librdkafka's telemetry push")
        assert producer.flush(30) == 0
    finally:
        producer.flush(10)
    lines = [line for line in scrape(telemetry_broker).splitlines() if f'client_id="{client_id}"' in line]
    assert lines and all(line.startswith("org_apache_kafka_producer_") for line in lines)
    # confluent-kafka names itself in ApiVersions v3: confluent-kafka-python, <version>-rdkafka-<version>
    assert all('client_software_name="confluent-kafka-python"' in line and 'principal="User:ANONYMOUS"' in line
               and re.search(r'client_software_version="[^"]*-rdkafka-', line) for line in lines), lines[0]
    assert tool(telemetry_broker, "--delete", "--name", "producers").returncode == 0


def test_push_limits_are_kafkas(telemetry_broker):
    assert tool(telemetry_broker, "--alter", "--name", "raw", "--metrics", "test.raw.", "--interval", "3600000",
                "--match", "client_id=raw-telemetry").returncode == 0
    (subscription,) = requests(telemetry_broker, GET_NEW)
    assert subscription.error_code == 0 and subscription.requested_metrics == ("test.raw.",)
    assert subscription.push_interval.total_seconds() == 3600 and subscription.telemetry_max_bytes == MAX_BYTES
    assert subscription.delta_temporality and 4 in subscription.accepted_compression_types
    instance, sid = subscription.client_instance_id, subscription.subscription_id
    assert instance != uuid.UUID(int=0)
    data = metrics_data("test.raw.queue.depth", 7.0, partition="3")
    first, second, unknown, large = requests(
        telemetry_broker, push(instance, sid, compress("zstd", data), compression=4), push(instance, sid, data),
        push(instance, sid + 1, data), push(instance, sid, b"\0" * (MAX_BYTES + 1), terminating=True))
    assert first.error_code == 0
    assert second.error_code == 89  # THROTTLING_QUOTA_EXCEEDED: sooner than the interval
    assert unknown.error_code == 117  # UNKNOWN_SUBSCRIPTION_ID
    assert large.error_code == 118  # TELEMETRY_TOO_LARGE (a terminating push is not throttled)
    final, after = requests(telemetry_broker, push(instance, sid, data, terminating=True), push(instance, sid, data))
    assert final.error_code == 0 and after.error_code == 42  # INVALID_REQUEST after terminating
    garbage, = requests(telemetry_broker, GetTelemetrySubscriptionsRequest(client_instance_id=None))
    bad, = requests(telemetry_broker, push(garbage.client_instance_id, garbage.subscription_id, b"\xff\x01garbage"))
    assert bad.error_code == 87  # INVALID_RECORD
    text = scrape(telemetry_broker)
    sample = re.search(r'^test_raw_queue_depth\{([^}]*)\} (\S+)$', text, re.M)
    assert sample and float(sample.group(2)) == 7.0
    assert f'client_instance_id="{instance}"' in sample.group(1) and 'partition="3"' in sample.group(1)
    assert 'client_id="raw-telemetry"' in sample.group(1)
    assert tool(telemetry_broker, "--delete", "--name", "raw").returncode == 0


def test_a_client_no_subscription_matches_is_asked_for_nothing(telemetry_broker):
    (subscription,) = requests(telemetry_broker, GET_NEW, client_id="matches-nothing")
    assert subscription.requested_metrics == ()
    assert subscription.push_interval.total_seconds() == 300
