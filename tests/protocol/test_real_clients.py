"""Requests real clients send, decoded; and our responses, parsed by those clients.

A plain TCP server on 127.0.0.1 runs in a thread and answers with nothing but the protocol layer
(FrameDecoder, decode_request, the encoders): enough of a broker for a producer and an assign()ing
consumer to get through ApiVersions, Metadata, Produce, ListOffsets and Fetch. Every frame a
client sends must decode, and the client must accept every answer.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import uuid
from typing import Any

import pytest
from kio.index import load_response_schema

from logbroker.errors import KafkaError
from logbroker.protocol import (
    ApiKey,
    FetchPartitionData,
    FetchTopicData,
    FrameDecoder,
    ListOffsetsPartitionResult,
    MetadataBroker,
    MetadataPartition,
    MetadataTopic,
    ProducePartitionResult,
    UnsupportedApiVersionsRequest,
    api_versions_body,
    decode_request,
    encode_fetch_response,
    encode_list_offsets_response,
    encode_metadata_response,
    encode_produce_response,
    encode_response,
)
from protocol_helpers import kio_build

pytestmark = pytest.mark.timeout(30)
TIMEOUT_S = 5


class FakeBroker:
    """One-partition topics on broker 0; each Produce batch is kept and served back by Fetch."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.requests: list[Any] = []
        self.first_frames: list[bytes] = []
        self.errors: list[BaseException] = []
        self.log: dict[str, list[bytes]] = {}  # topic -> batches, offset i = batch i (1 record each)
        self.connections: list[socket.socket] = []
        self.lock = threading.Lock()
        self.first_frame = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def close(self) -> None:
        self.server.close()
        for conn in self.connections:
            conn.close()

    def api_keys(self) -> list[int]:
        return [r.api_key for r in self.requests]

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.connections.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        decoder = FrameDecoder()
        first = True
        try:
            while data := conn.recv(65536):
                for frame in decoder.feed(data):
                    if first:
                        self.first_frames.append(bytes(frame))
                        self.first_frame.set()
                        first = False
                    try:
                        request = decode_request(frame)
                    except UnsupportedApiVersionsRequest as exc:
                        conn.sendall(exc.response)
                        continue
                    self.requests.append(request)
                    for chunk in self.handle(request):
                        conn.sendall(chunk if isinstance(chunk, bytes) else bytes(chunk))
        except OSError:
            pass
        except (KafkaError, Exception) as exc:  # noqa: BLE001 - reported by the test
            self.errors.append(exc)
        finally:
            conn.close()

    def handle(self, request) -> list[bytes]:
        key, version, cid, body = request.api_key, request.api_version, request.correlation_id, request.body
        if key == ApiKey.API_VERSIONS:
            return [encode_response(key, version, cid, api_versions_body(version))]
        if key == ApiKey.METADATA:
            names = ["events"] if body.topics is None else [t.name for t in body.topics]
            topics = [MetadataTopic(0, name, [MetadataPartition(0, 0, 0, 0, [0], [0], [])],
                                    topic_id=uuid.uuid5(uuid.NAMESPACE_DNS, name)) for name in names]
            return [encode_metadata_response(
                version, cid, brokers=[MetadataBroker(0, "127.0.0.1", self.port)], topics=topics,
                cluster_id="fake-cluster", controller_id=0)]
        if key == ApiKey.INIT_PRODUCER_ID:
            response = kio_build(load_response_schema(key, version), {
                "throttle_time": 0, "error_code": 0, "producer_id": 1000, "producer_epoch": 0})
            return [encode_response(key, version, cid, response)]
        if key == ApiKey.PRODUCE:
            results = []
            with self.lock:
                for topic in body.topic_data:
                    partitions = []
                    for p in topic.partition_data:
                        batches = self.log.setdefault(topic.name, [])
                        partitions.append(ProducePartitionResult(p.index, 0, len(batches), -1, 0))
                        batches.append(bytes(p.records))
                    results.append((topic.name, partitions))
            return [] if body.acks == 0 else [encode_produce_response(version, cid, results)]
        if key == ApiKey.LIST_OFFSETS:
            def offset(topic, timestamp):
                return 0 if timestamp == -2 else len(self.log.get(topic, []))

            topics = [(t.name, [ListOffsetsPartitionResult(p.partition_index, 0, -1,
                                                           offset(t.name, p.timestamp), 0)
                                for p in t.partitions]) for t in body.topics]
            return [encode_list_offsets_response(version, cid, topics)]
        if key == ApiKey.FETCH:
            topics = []
            for t in body.topics:
                batches = self.log.get(t.topic, [])
                partitions = []
                for p in t.partitions:
                    records = batches[p.fetch_offset] if p.fetch_offset < len(batches) else None
                    partitions.append(FetchPartitionData(p.partition, 0, len(batches), len(batches), 0,
                                                         records=records))
                topics.append(FetchTopicData(t.topic, partitions))
            return encode_fetch_response(version, cid, topics)
        raise AssertionError(f"the fake broker does not answer api {key}")


@pytest.fixture
def fake_broker():
    broker = FakeBroker()
    yield broker
    broker.close()
    assert not broker.errors, broker.errors


def test_confluent_kafka_producer_round_trip(fake_broker):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    producer = confluent_kafka.Producer({
        "bootstrap.servers": fake_broker.bootstrap, "linger.ms": 0, "socket.timeout.ms": 3000,
        "message.timeout.ms": 4000, "enable.idempotence": True,
        # the fake broker answers the data path only, not the telemetry it advertises
        "enable.metrics.push": False})
    delivered = []
    producer.produce("events", b"hello from librdkafka", key=b"k",
                     on_delivery=lambda err, msg: delivered.append((err, msg.offset())))
    assert producer.flush(TIMEOUT_S) == 0
    assert delivered == [(None, 0)]

    first = decode_request(fake_broker.first_frames[0])
    assert first.api_key == ApiKey.API_VERSIONS and first.api_version in (3, 4)
    assert first.body.client_software_name == "confluent-kafka-python"
    produce = [r for r in fake_broker.requests if r.api_key == ApiKey.PRODUCE]
    assert produce and produce[0].api_version >= 9  # flexible: header v2 with the client id
    records = produce[0].body.topic_data[0].partition_data[0].records
    assert b"hello from librdkafka" in bytes(records)
    assert ApiKey.INIT_PRODUCER_ID in fake_broker.api_keys()


def test_kafka_python_producer_and_consumer_round_trip(fake_broker):
    kafka = pytest.importorskip("kafka")
    producer = kafka.KafkaProducer(bootstrap_servers=fake_broker.bootstrap, request_timeout_ms=3000,
                                   max_block_ms=TIMEOUT_S * 1000)
    metadata = producer.send("events", b"hello from kafka-python").get(timeout=TIMEOUT_S)
    assert metadata.offset == 0
    producer.close(timeout=2)

    # kafka-python 3 opens with ApiVersions v4, header v2, and its software name in the body.
    first = decode_request(fake_broker.first_frames[0])
    assert first.api_key == ApiKey.API_VERSIONS and first.api_version == 4
    assert first.header_version == 2 and first.client_id.startswith("kafka-python")
    assert first.body.client_software_name == "kafka-python"

    consumer = kafka.KafkaConsumer(bootstrap_servers=fake_broker.bootstrap, group_id=None,
                                   enable_auto_commit=False, request_timeout_ms=3000,
                                   fetch_max_wait_ms=100)
    partition = kafka.TopicPartition("events", 0)
    consumer.assign([partition])
    consumer.seek(partition, 0)
    values = []
    for _ in range(20):
        for records in consumer.poll(timeout_ms=250).values():
            values += [r.value for r in records]
        if values:
            break
    consumer.close()
    assert values == [b"hello from kafka-python"]
    fetches = [r for r in fake_broker.requests if r.api_key == ApiKey.FETCH]
    assert fetches and fetches[0].api_version == 12  # the most we advertise


def test_aiokafka_producer_round_trip(fake_broker):
    aiokafka = pytest.importorskip("aiokafka")

    async def produce():
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=fake_broker.bootstrap,
                                             request_timeout_ms=3000)
        await asyncio.wait_for(producer.start(), TIMEOUT_S)
        try:
            return await asyncio.wait_for(producer.send_and_wait("events", b"hello from aiokafka"),
                                          TIMEOUT_S)
        finally:
            await producer.stop()

    metadata = asyncio.run(produce())
    assert metadata.offset == 0
    assert decode_request(fake_broker.first_frames[0]).api_key == ApiKey.API_VERSIONS
    produce_requests = [r for r in fake_broker.requests if r.api_key == ApiKey.PRODUCE]
    assert b"hello from aiokafka" in bytes(produce_requests[0].body.topic_data[0].partition_data[0].records)


def capture_first_frame(start_client) -> bytes:
    """Accept one connection on a plain socket and read its first frame; never answer it."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(TIMEOUT_S)
        client = start_client(f"127.0.0.1:{server.getsockname()[1]}")
        conn, _ = server.accept()
        with conn:
            conn.settimeout(TIMEOUT_S)
            decoder = FrameDecoder()
            while not (frames := decoder.feed(conn.recv(65536))):
                pass
        return bytes(frames[0]), client


def test_first_frame_from_librdkafka_is_api_versions_v3_or_v4():
    confluent_kafka = pytest.importorskip("confluent_kafka")
    frame, producer = capture_first_frame(
        lambda bootstrap: confluent_kafka.Producer({"bootstrap.servers": bootstrap}))
    request = decode_request(memoryview(frame))
    assert request.api_key == ApiKey.API_VERSIONS and request.api_version in (3, 4)
    assert request.header_version == 2 and request.client_id == "rdkafka"
    assert request.body.client_software_name == "confluent-kafka-python"
    assert request.body.client_software_version
    del producer


def test_api_versions_v5_request_is_answered_so_the_client_can_retry(fake_broker):
    """What kafka-python and Java 4.x see from a broker older than their ApiVersions."""
    import struct

    from kio.schema.api_versions.v0.response import ApiVersionsResponse
    from kio.serial import entity_reader

    with socket.create_connection(("127.0.0.1", fake_broker.port), timeout=TIMEOUT_S) as conn:
        header = struct.pack(">hhih", 18, 5, 77, 6) + b"future" + b"\x00"
        conn.sendall(struct.pack(">i", len(header) + 1) + header + b"\x00")
        size = struct.unpack(">i", conn.recv(4))[0]
        data = b""
        while len(data) < size:
            data += conn.recv(size - len(data))
        # The connection is still open: a v3 request gets its answer.
        header = struct.pack(">hhih", 18, 3, 78, 1) + b"c" + b"\x00"
        body = b"\x02a\x021\x00"
        conn.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
        assert struct.unpack(">i", conn.recv(4))[0] > 0
    assert struct.unpack_from(">i", data)[0] == 77
    response, _ = entity_reader(ApiVersionsResponse)(data, 4)
    assert response.error_code == 35
    assert (18, 0, 4) in [(k.api_key, k.min_version, k.max_version) for k in response.api_keys]
