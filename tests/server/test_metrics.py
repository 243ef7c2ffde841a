"""The metrics endpoint against a real broker and real clients: scraped over HTTP with urllib,
the counters must move by exactly what the clients did."""

from __future__ import annotations

import json
import os
import re
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from logbroker.testing import BrokerProcess, wait_for

METRICS_LINE = re.compile(r"Metrics endpoint listening on http://([^:]+):(\d+)/metrics")
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$')
TIMEOUT_S = 15


class Endpoint:
    def __init__(self, process: BrokerProcess) -> None:
        match = METRICS_LINE.search(process.new_log_text())
        assert match, process.new_log_text()
        self.base = f"http://{match.group(1)}:{match.group(2)}"
        self.process = process

    def get(self, path: str) -> tuple[int, str, str]:
        try:
            with urllib.request.urlopen(self.base + path, timeout=TIMEOUT_S) as response:
                return response.status, response.headers["Content-Type"], response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.headers["Content-Type"], error.read().decode()

    def scrape(self) -> dict[tuple[str, frozenset], float]:
        status, _, text = self.get("/metrics")
        assert status == 200
        samples = {}
        for line in text.splitlines():
            match = SAMPLE.match(line)
            if match and not line.startswith("#"):
                labels = frozenset(re.findall(r'(\w+)="([^"]*)"', match.group(2) or ""))
                samples[(match.group(1), labels)] = float(match.group(3))
        return samples


def value(samples, name: str, **labels) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


@pytest.fixture(scope="module")
def metrics_broker(tmp_path_factory):
    process = BrokerProcess(tmp_path_factory.mktemp("metrics-broker"), overrides={"metrics.port": "0"})
    yield process.start()
    process.kill()


@pytest.fixture
def endpoint(metrics_broker) -> Endpoint:
    return Endpoint(metrics_broker)


def create_topic(bootstrap: str, topic: str, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(TIMEOUT_S)


def segment_bytes(process: BrokerProcess, topic: str) -> int:
    return sum(p.stat().st_size for p in (process.data_dir / f"{topic}-0").glob("*.log"))


def test_produce_and_consume_move_counters_by_exact_amounts(metrics_broker, endpoint, topic):
    create_topic(metrics_broker.bootstrap, topic)
    before = endpoint.scrape()
    n, payload = 20, b"v" * 100
    producer = Producer({"bootstrap.servers": metrics_broker.bootstrap, "linger.ms": 0, "acks": "all"})
    for i in range(n):  # one flush per record: one Produce request, one batch, each
        producer.produce(topic, value=payload, key=b"k%d" % i)
        assert producer.flush(TIMEOUT_S) == 0
    consumer = Consumer({"bootstrap.servers": metrics_broker.bootstrap, "group.id": "unused",
                         "enable.auto.commit": False})
    consumer.assign([CkTopicPartition(topic, 0, 0)])
    got, deadline = 0, time.monotonic() + TIMEOUT_S
    while got < n and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got += 1
    consumer.close()
    assert got == n
    after = endpoint.scrape()

    def delta(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    batches = segment_bytes(metrics_broker, topic)  # the batches as they came, nothing else
    assert batches >= n * len(payload)
    assert value(after, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == n
    assert value(after, "kafka_server_brokertopicmetrics_bytesin_total", topic=topic) == batches
    assert value(after, "kafka_server_brokertopicmetrics_totalproducerequests_total", topic=topic) == n
    assert value(after, "kafka_server_brokertopicmetrics_failedproducerequests_total", topic=topic) == 0
    assert value(after, "kafka_server_brokertopicmetrics_bytesout_total", topic=topic) == batches
    assert value(after, "kafka_server_brokertopicmetrics_totalfetchrequests_total", topic=topic) >= 1
    # The all-topics totals moved by the same amounts (nothing else ran in between).
    assert delta("kafka_server_brokertopicmetrics_messagesin_total") == n
    assert delta("kafka_server_brokertopicmetrics_bytesin_total") == batches
    assert delta("kafka_server_brokertopicmetrics_bytesout_total") == batches
    produce_requests = sum(delta(name, **dict(labels)) for name, labels in after
                           if name == "kafka_network_requestmetrics_requests_total"
                           and ("request", "Produce") in labels)
    assert produce_requests == n
    assert delta("kafka_network_requestmetrics_totaltimems_count", request="Produce") == n
    assert delta("kafka_network_requestmetrics_totaltimems_sum", request="Produce") > 0
    assert value(after, "kafka_network_requestmetrics_totaltimems", request="Produce", quantile="0.99") > 0
    assert delta("kafka_network_requestmetrics_totaltimems_count", request="Fetch") >= 1
    # State read at scrape time.
    assert value(after, "kafka_log_log_logendoffset", topic=topic, partition="0") == n
    assert value(after, "kafka_log_log_logstartoffset", topic=topic, partition="0") == 0
    assert value(after, "kafka_log_log_size", topic=topic, partition="0") == batches
    assert value(after, "kafka_server_replicamanager_leadercount") >= 1
    assert value(after, "kafka_server_replicamanager_underreplicatedpartitions") == 0


def test_too_large_batch_counts_as_rejected_not_failed(metrics_broker, endpoint, topic):
    create_topic(metrics_broker.bootstrap, topic, **{"max.message.bytes": "1000"})
    producer = Producer({"bootstrap.servers": metrics_broker.bootstrap, "linger.ms": 0})
    errors = []
    producer.produce(topic, value=b"x" * 2000, on_delivery=lambda err, msg: errors.append(err))
    producer.flush(TIMEOUT_S)
    assert errors and errors[0] is not None and errors[0].name() == "MSG_SIZE_TOO_LARGE"
    samples = endpoint.scrape()
    assert value(samples, "kafka_server_brokertopicmetrics_bytesrejected_total", topic=topic) > 2000
    assert value(samples, "kafka_server_brokertopicmetrics_totalproducerequests_total", topic=topic) >= 1
    assert value(samples, "kafka_server_brokertopicmetrics_failedproducerequests_total", topic=topic) == 0
    assert value(samples, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == 0


def test_connections_are_counted(metrics_broker, endpoint):
    sockets = [socket.create_connection((metrics_broker.host, metrics_broker.port)) for _ in range(3)]
    try:
        samples = endpoint.scrape()
    finally:
        for s in sockets:
            s.close()
    assert value(samples, "kafka_server_socket_server_metrics_connection_count", listener="PLAINTEXT") >= 3


def test_client_quota_sensors_have_kafkas_names(metrics_broker, endpoint, topic):
    import sys
    sys.path.insert(0, str(Path(__file__).parents[1] / "broker"))
    from clients import RawClient
    from logbroker.records.builder import build_batch

    create_topic(metrics_broker.bootstrap, topic)
    client_id = f"metered-{topic}"
    with RawClient(metrics_broker.bootstrap, client_id=client_id) as client:
        response = client.request(49, 1, validate_only=False, entries=[{
            "entity": [{"entity_type": "client-id", "entity_name": client_id}],
            "ops": [{"key": "producer_byte_rate", "value": 100.0, "remove": False}]}])
        assert int(response.entries[0].error_code) == 0
        for _ in range(2):  # the second goes over the first window's 1000 bytes and is throttled
            assert int(client.produce(topic, 0, build_batch([(b"k", b"v" * 1000)])).error_code) == 0
    samples = endpoint.scrape()
    labels = {"resource": "Produce", "user": "", "clientId": client_id}
    assert value(samples, "kafka_server_quota_byte_rate", **labels) > 0
    assert value(samples, "kafka_server_quota_throttle_time", **labels) > 0


def test_healthz_is_200_with_json_while_listening(endpoint):
    status, content_type, body = endpoint.get("/healthz")
    assert (status, content_type) == (200, "application/json")
    report = json.loads(body)
    assert report["status"] == "ok" and report["listening"] and report["log_dirs_writable"]


def test_unknown_path_is_404(endpoint):
    assert endpoint.get("/nope")[0] == 404


def test_metrics_off_by_default_nothing_listens_but_kafka(tmp_path):
    with BrokerProcess(tmp_path) as process:
        assert "Metrics endpoint" not in process.new_log_text()
        assert listening_ports(process.process.pid) == {process.port}


def listening_ports(pid: int) -> set[int]:
    """The TCP ports `pid` listens on, from its socket inodes and /proc/net/tcp{,6}."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def test_health_is_503_when_a_log_dir_is_gone(tmp_path):
    from logbroker.server.metrics import BrokerMetrics, MetricsServer

    broker = SimpleNamespace(listeners=[object()], server=object(), broker_id=0, store=None,
                             log_dirs=[tmp_path, tmp_path / "missing"])
    status, report = MetricsServer(broker, BrokerMetrics()).health()
    assert status == 503 and report["unwritable_log_dirs"] == [str(tmp_path / "missing")]


def test_health_is_503_when_the_zookeeper_session_is_lost(tmp_path):
    from logbroker.server.metrics import BrokerMetrics, MetricsServer

    store = SimpleNamespace(session_alive=lambda: False)
    broker = SimpleNamespace(listeners=[object()], server=object(), broker_id=0, store=store,
                             log_dirs=[tmp_path])
    status, report = MetricsServer(broker, BrokerMetrics()).health()
    assert status == 503 and report["zookeeper_session"] is False


def test_request_names_are_kafkas():
    from logbroker.server.metrics import request_name

    assert [request_name(k) for k in (0, 1, 2, 18, 23)] == [
        "Produce", "Fetch", "ListOffsets", "ApiVersions", "OffsetForLeaderEpoch"]


def test_transaction_coordinator_metrics_have_kafkas_names(endpoint):
    values = endpoint.scrape()
    names = {name for name, _ in values}
    assert {"kafka_coordinator_transaction_transactionmarkerchannelmanager_unknowndestinationqueuesize",
            "kafka_coordinator_transaction_transactionmarkerchannelmanager_logappendretryqueuesize",
            "kafka_server_transaction_coordinator_metrics_partition_load_time_max",
            "kafka_server_transaction_coordinator_metrics_partition_load_time_avg"} <= names
    assert values[("kafka_coordinator_transaction_transactionmarkerchannelmanager_logappendretryqueuesize",
                   frozenset())] == 0


def test_group_coordinator_metrics_count_groups_by_type_and_state(metrics_broker, endpoint, topic):
    from confluent_kafka import Consumer
    create_topic(metrics_broker.bootstrap, topic)
    group = f"metrics-{topic}"
    member = Consumer({"bootstrap.servers": metrics_broker.bootstrap, "group.id": group,
                       "group.protocol": "consumer"})
    member.subscribe([topic])
    try:
        deadline = time.monotonic() + 20
        while not member.assignment():
            member.poll(0.1)
            assert time.monotonic() < deadline
        samples = endpoint.scrape()
        assert value(samples, "kafka_server_group_coordinator_metrics_group_count", protocol="consumer") >= 1
        assert value(samples, "kafka_server_group_coordinator_metrics_consumer_group_count", state="stable") >= 1
        assert value(samples, "kafka_server_group_coordinator_metrics_consumer_group_rebalance_total") >= 1
        assert ("kafka_server_group_coordinator_metrics_group_count", frozenset({("protocol", "classic")})) in samples
    finally:
        member.close()


def test_last_stable_offset_lag_counts_the_records_of_an_open_transaction(metrics_broker, endpoint, topic):
    create_topic(metrics_broker.bootstrap, topic)
    plain = Producer({"bootstrap.servers": metrics_broker.bootstrap})
    for i in range(3):
        plain.produce(topic, b"committed-%d" % i)
    assert plain.flush(TIMEOUT_S) == 0
    txn = Producer({"bootstrap.servers": metrics_broker.bootstrap, "transactional.id": f"lag-{topic}"})
    txn.init_transactions(TIMEOUT_S)
    txn.begin_transaction()
    for i in range(5):
        txn.produce(topic, b"open-%d" % i)
    assert txn.flush(TIMEOUT_S) == 0
    lag = "kafka_cluster_partition_laststableoffsetlag"
    assert value(endpoint.scrape(), lag, topic=topic, partition="0") == 5  # HW 8, LSO 3
    txn.commit_transaction(TIMEOUT_S)
    wait_for(lambda: value(endpoint.scrape(), lag, topic=topic, partition="0") == 0, timeout_s=TIMEOUT_S,
             what="the LSO reaching the high watermark after the commit")
