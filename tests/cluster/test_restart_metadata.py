"""A restarted broker answers clients only once it knows the cluster's metadata.

Three brokers, a topic with three replicas; broker 2 is killed and started again (on the same
port) twice while a thread asks it for the topic's metadata (Metadata v1) every 20 ms and a
confluent-kafka producer keeps producing to the cluster. Kafka's brokers start serving once they
have the cluster's metadata: no answer may say that the topic is unknown or list no brokers, and
no produce may fail.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import uuid

from confluent_kafka import KafkaException, Producer
from kio.schema.metadata.v1.request import MetadataRequest, MetadataRequestTopic
from kio.schema.errors import ErrorCode

from logbroker.client import ConnectionClosedError, KafkaConnection
from logbroker.testing import ClusterProcess, wait_for

TOPIC = "steady"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class MetadataPoller:
    """Asks one address for TOPIC's metadata every 20 ms, reconnecting whenever the connection
    fails, and keeps each answer as (topic error code, number of brokers listed)."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.answers: list[tuple[ErrorCode, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._poll()), daemon=True)

    def start(self) -> MetadataPoller:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    async def _poll(self) -> None:
        request = MetadataRequest(topics=(MetadataRequestTopic(name=TOPIC),))
        connection = KafkaConnection(self.host, self.port, timeout_s=15)
        while not self._stop.is_set():
            try:
                response = await connection.request(request)
            except ConnectionClosedError:
                connection = KafkaConnection(self.host, self.port, timeout_s=15)
            else:
                (topic,) = response.topics
                self.answers.append((topic.error_code, len(response.brokers)))
            await asyncio.sleep(0.02)
        await connection.close()


def test_a_restarted_broker_never_says_an_existing_topic_is_unknown(logbroker_zookeeper, tmp_path):
    port = free_port()
    cluster = ClusterProcess(tmp_path, zk_connect=f"{logbroker_zookeeper.connect_string}/r-{uuid.uuid4().hex[:8]}",
                             broker_overrides={2: {"listeners": f"PLAINTEXT://127.0.0.1:{port}"}})
    with cluster:
        cluster.create_topic(TOPIC, partitions=3, replication_factor=3)
        poller = MetadataPoller("127.0.0.1", port).start()
        failures: list[str] = []
        delivered = [0]

        def on_delivery(err, _msg) -> None:
            if err is not None:
                failures.append(f"delivery: {err}")
            else:
                delivered[0] += 1

        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5,
                             "enable.idempotence": True, "message.timeout.ms": 60000})
        try:
            def produce_for(seconds: float) -> None:
                until = time.monotonic() + seconds
                while time.monotonic() < until:
                    try:
                        producer.produce(TOPIC, b"x" * 100, on_delivery=on_delivery)
                    except KafkaException as exc:
                        failures.append(f"produce: {exc}")
                    except BufferError:
                        pass
                    producer.poll(0.01)

            produce_for(1)
            answers_before = len(poller.answers)
            for _ in range(2):
                cluster.kill(2)
                produce_for(0.5)
                cluster.start_broker(2)  # waits out the killed process's ZooKeeper session first
                restarted_at = len(poller.answers)
                wait_for(lambda: len(poller.answers) >= restarted_at + 50, what="answers from the restarted broker")
                produce_for(0.5)
            assert producer.flush(60) == 0
        finally:
            poller.stop()
    assert failures == []
    assert delivered[0] > 0
    assert len(poller.answers) > answers_before + 100
    wrong = [answer for answer in poller.answers if answer != (ErrorCode.none, 3)]
    assert wrong == [], f"{len(wrong)} of {len(poller.answers)} answers were wrong: {sorted(set(wrong))}"
