"""Client quotas enforced on real clients (confluent-kafka): a producer or consumer over its byte
rate is held to it while another client runs at full speed, the throttle time reaches the client,
and request_percentage slows a hot client.

Timing on a loaded 2-core machine: each client runs long enough for the quota window (11 × 1 s,
Kafka's default) to reach its steady state, rates are measured over many seconds after that, and
every bound is a range — 10 % around the quota for the limited client, a generous
floor for the free one.
"""

from __future__ import annotations

import json
import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from clients import RawClient, create_topic

pytestmark = pytest.mark.timeout(180)

VALUE = b"x" * 1000


def set_quota(bootstrap: str, entity: dict, **quotas: float) -> None:
    with RawClient(bootstrap) as client:
        response = client.request(49, 1, validate_only=False, entries=[{
            "entity": [{"entity_type": t, "entity_name": n} for t, n in entity.items()],
            "ops": [{"key": k, "value": float(v), "remove": False} for k, v in quotas.items()]}])
    assert int(response.entries[0].error_code) == 0, response


class ProducerRun(threading.Thread):
    """Produces 1000-byte values as fast as librdkafka takes them (or at most `offered` bytes a
    second); counts delivered bytes per delivery time and keeps the largest throttle time the
    statistics report (the broker's throttle_time_ms).

    A limited client offers 1.5 times its quota, with a small local queue and 5 requests in flight
    (the Java producer's default): a client with an unbounded backlog sends, whenever its oldest
    sample leaves the window, all it has at once, and those bursts echo every 11 s — the average
    holds, but a measurement window must then span whole echoes."""

    def __init__(self, bootstrap: str, topic: str, client_id: str, seconds: float,
                 offered: float | None = None) -> None:
        super().__init__(daemon=True)
        self.delivered: list[tuple[float, int]] = []
        self.throttle_max_ms = 0
        self.seconds = seconds
        self.offered = offered
        self.topic = topic
        self.producer = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5,
                                  "batch.size": 16384, "max.in.flight.requests.per.connection": 5,
                                  "queue.buffering.max.kbytes": 64 if offered else 4096,
                                  "statistics.interval.ms": 500, "stats_cb": self._stats})

    def _stats(self, text: str) -> None:
        for broker in json.loads(text)["brokers"].values():
            self.throttle_max_ms = max(self.throttle_max_ms, broker.get("throttle", {}).get("max", 0))

    def _on_delivery(self, err, msg) -> None:
        if err is None:
            self.delivered.append((time.monotonic(), len(msg.value())))

    def run(self) -> None:
        start = time.monotonic()
        end = start + self.seconds
        produced = 0
        while (now := time.monotonic()) < end:
            if self.offered and produced > self.offered * (now - start):
                self.producer.poll(0.005)
                continue
            try:
                self.producer.produce(self.topic, VALUE, on_delivery=self._on_delivery)
                produced += len(VALUE)
                self.producer.poll(0)
            except BufferError:
                self.producer.poll(0.02)
        self.producer.flush(30)

    def rate(self, start: float, end: float) -> float:
        return sum(n for t, n in self.delivered if start <= t < end) / (end - start)


def test_producer_over_its_byte_rate_is_held_to_it_while_another_runs_free(shared_broker, topic):
    create_topic(shared_broker.bootstrap, topic)
    limited_id, free_id = f"limited-{uuid.uuid4().hex[:6]}", f"free-{uuid.uuid4().hex[:6]}"
    quota = 300_000
    set_quota(shared_broker.bootstrap, {"client-id": limited_id}, producer_byte_rate=quota)
    limited = ProducerRun(shared_broker.bootstrap, topic, limited_id, seconds=46, offered=1.5 * quota)
    free = ProducerRun(shared_broker.bootstrap, topic, free_id, seconds=8)
    start = time.monotonic()
    limited.start()
    free.start()
    free.join(60)
    limited.join(90)
    # After the first window's burst (up to 10 s of quota at once), the steady state.
    measured = limited.rate(start + 12, start + 45)  # three 11 s windows
    assert 0.9 * quota <= measured <= 1.1 * quota, measured
    assert free.rate(start + 1, start + 8) > 3 * quota
    assert limited.throttle_max_ms > 0  # the broker's throttle_time_ms, as librdkafka saw it


def test_consumer_over_its_byte_rate_is_held_to_it(shared_broker, topic):
    create_topic(shared_broker.bootstrap, topic)
    producer = Producer({"bootstrap.servers": shared_broker.bootstrap, "linger.ms": 20, "batch.size": 16384})
    for _ in range(30_000):  # 30 MB
        while True:
            try:
                producer.produce(topic, VALUE)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0
    limited_id, free_id = f"slow-{uuid.uuid4().hex[:6]}", f"fast-{uuid.uuid4().hex[:6]}"
    quota = 400_000
    set_quota(shared_broker.bootstrap, {"client-id": limited_id}, consumer_byte_rate=quota)

    def consume(client_id: str, seconds: float, out: list, offered: float | None = None) -> None:
        consumer = Consumer({"bootstrap.servers": shared_broker.bootstrap, "group.id": client_id,
                             "client.id": client_id, "enable.auto.commit": False,
                             "max.partition.fetch.bytes": 65536, "fetch.max.bytes": 65536, "message.max.bytes": 65536,
                             "queued.max.messages.kbytes": 128 if offered else 65536,
                             "statistics.interval.ms": 500,
                             "stats_cb": lambda text: out.append(("stats", text))})
        consumer.assign([TopicPartition(topic, 0, 0)])
        begin = time.monotonic()
        end = begin + seconds
        taken = 0
        while (now := time.monotonic()) < end:
            if offered and taken > offered * (now - begin):
                time.sleep(0.005)
                continue
            for msg in consumer.consume(64 if offered else 1000, 0.2):
                if not msg.error():
                    out.append((time.monotonic(), len(msg.value())))
                    taken += len(msg.value())
        consumer.close()

    limited: list = []
    free: list = []
    start = time.monotonic()
    threads = [threading.Thread(target=consume, args=(limited_id, 46, limited, 1.5 * quota), daemon=True),
               threading.Thread(target=consume, args=(free_id, 10, free), daemon=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)

    def rate(out: list, a: float, b: float) -> float:
        return sum(n for t, n in out if t != "stats" and start + a <= t < start + b) / (b - a)

    measured = rate(limited, 12, 45)  # three 11 s windows
    assert 0.9 * quota <= measured <= 1.1 * quota, measured
    free_bytes = sum(n for t, n in free if t != "stats")
    assert free_bytes == 30_000 * len(VALUE) or rate(free, 0, 10) > 3 * quota
    throttles = [max(b.get("throttle", {}).get("max", 0) for b in json.loads(text)["brokers"].values())
                 for kind, text in limited if kind == "stats"]
    assert max(throttles) > 0


def metadata_rate(bootstrap: str, client_id: str, seconds: float, skip_s: float = 0.0) -> tuple[float, int]:
    """Metadata requests a second one connection gets answered (after `skip_s`), and the
    largest throttle_time_ms in their responses."""
    with RawClient(bootstrap, client_id=client_id) as client:
        start = time.monotonic()
        counted = 0
        throttle_max_ms = 0
        while (now := time.monotonic()) < start + seconds:
            response = client.request(3, 12, topics=None, allow_auto_topic_creation=False,
                                      include_topic_authorized_operations=False)
            throttle_max_ms = max(throttle_max_ms, int(response.throttle_time.total_seconds() * 1000))
            if now >= start + skip_s:
                counted += 1
    return counted / (seconds - skip_s), throttle_max_ms


def test_request_percentage_limits_a_hot_client(shared_broker):
    hot_id, free_id = f"hot-{uuid.uuid4().hex[:6]}", f"cool-{uuid.uuid4().hex[:6]}"
    free_rate, free_throttle = metadata_rate(shared_broker.bootstrap, free_id, 4)
    set_quota(shared_broker.bootstrap, {"client-id": hot_id}, request_percentage=1)
    # After the first window's credit (1 % of 10 s), the hot client may use 1 % of the loop.
    hot_rate, hot_throttle = metadata_rate(shared_broker.bootstrap, hot_id, 14, skip_s=4)
    assert free_throttle == 0
    assert hot_throttle > 0
    assert hot_rate < 0.3 * free_rate, (hot_rate, free_rate)


def test_kafka_python_reports_the_produce_throttle_time(shared_broker, topic):
    import kafka

    create_topic(shared_broker.bootstrap, topic)
    client_id = f"kp-{uuid.uuid4().hex[:6]}"
    set_quota(shared_broker.bootstrap, {"client-id": client_id}, producer_byte_rate=1000)
    producer = kafka.KafkaProducer(bootstrap_servers=shared_broker.bootstrap, client_id=client_id, linger_ms=0)
    try:
        for _ in range(2):  # 10 s of quota (10 000 bytes) in the first window, then throttled
            producer.send(topic, b"x" * 8000).get(timeout=60)
        throttles = [v for group in producer.metrics().values() for k, v in group.items()
                     if k == "throttle-time-max"]
        assert throttles and max(throttles) > 0, producer.metrics()
    finally:
        producer.close(timeout=5)
