"""Helpers for the broker tests: the same records through every client, and a raw protocol socket.

Every client's consumed record is normalised to one `Rec` (partition, offset, key, value,
headers, timestamp, timestamp type), so a test compares what it produced with what each client
read back field by field. Consumers use assign() with explicit offsets: consumer groups do not
exist yet, and none of these paths needs a coordinator.

`RawClient` speaks the protocol over a plain socket, with kio encoding the requests, for what
clients will not send on their own: duplicate idempotent batches, a flipped CRC byte, acks=2,
garbage frames, long polls with exact limits.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import io
import random
import socket
import struct
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from logbroker.protocol import apis
from logbroker.records.batch import BatchHeader
from logbroker.records.record_batch import RecordBatch, iter_batches
from logbroker.server.responses import build

TIMEOUT_S = 15
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"


@dataclass(frozen=True, slots=True)
class Spec:
    """A record to produce. timestamp None: the client stamps it."""

    partition: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp: int | None = None


@dataclass(frozen=True, slots=True)
class Rec:
    """A record as stored: what a consumer must give back, field for field."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int
    timestamp_type: str


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def sample_specs(count: int, *, partitions: int = 1, seed: int = 0, base_timestamp: int | None = None,
                 value_size: int = 40) -> list[Spec]:
    """Records that cover what users send: null and non-null keys, null and empty values,
    no headers, null header values, repeated header keys, non-ASCII header keys, binary bytes,
    and distinct explicit timestamps (not in order, so base and max timestamps differ)."""
    rng = random.Random(seed)
    base = (now_ms() - 3_600_000) if base_timestamp is None else base_timestamp
    header_sets = [
        (),
        (("trace", b"abc"),),
        (("dup", b"1"), ("dup", None), ("dup", b"")),
        (("ключ", "значение".encode()), ("null", None)),
        (("bin", bytes(range(256))),),
    ]
    specs = []
    for i in range(count):
        key = None if i % 3 == 0 else b"key-%d" % i
        if i % 7 == 3:
            value = None
        elif i % 11 == 5:
            value = b""
        else:
            value = b"value-%d-" % i + rng.randbytes(rng.randrange(value_size))
        timestamp = base + i * 10 + (5 if i % 4 == 1 else 0) - (3 if i % 5 == 2 else 0)
        specs.append(Spec(i % partitions, key, value, header_sets[i % len(header_sets)], timestamp))
    return specs


def expected_records(specs: list[Spec], offsets: list[int], *, timestamps: list[int] | None = None,
                     timestamp_type: str = CREATE_TIME) -> list[Rec]:
    """What the log must hold: each spec at the offset its delivery report gave."""
    recs = [Rec(s.partition, o, s.key, s.value, tuple(s.headers),
                s.timestamp if timestamps is None else timestamps[i], timestamp_type)
            for i, (s, o) in enumerate(zip(specs, offsets))]
    return sorted(recs, key=lambda r: (r.partition, r.offset))


def by_position(recs: list[Rec]) -> list[Rec]:
    return sorted(recs, key=lambda r: (r.partition, r.offset))


# ---- admin (confluent-kafka) ----------------------------------------------------------------

@functools.cache
def admin(bootstrap: str) -> AdminClient:
    """One AdminClient per broker, kept alive while its futures run."""
    return AdminClient({"bootstrap.servers": bootstrap})


def drop_admins() -> None:
    admin.cache_clear()
    gc.collect()


def create_topic(bootstrap: str, topic: str, partitions: int = 1, config: dict[str, str] | None = None) -> None:
    futures = admin(bootstrap).create_topics([NewTopic(topic, partitions, 1, config=config or {})])
    futures[topic].result(TIMEOUT_S)


# ---- confluent-kafka ------------------------------------------------------------------------

class DeliveryError(AssertionError):
    pass


def produce_confluent(bootstrap: str, topic: str, specs: list[Spec], **config: Any) -> list[Any]:
    """Produce `specs` and wait for every delivery report; returns the delivered Messages in
    the order of `specs`. Raises DeliveryError with the first failure."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, **config})
    # Learn the partition leaders first: otherwise the record that triggers the metadata
    # request may leave alone in a batch of its own, and linger.ms would not hold.
    producer.list_topics(topic, timeout=TIMEOUT_S)
    delivered: list[Any] = [None] * len(specs)
    errors: list[Any] = []

    def on_delivery(index: int, err, msg) -> None:
        if err is not None:
            errors.append(err)
        delivered[index] = msg

    for i, spec in enumerate(specs):
        while True:
            try:
                producer.produce(topic, value=spec.value, key=spec.key, partition=spec.partition,
                                 headers=list(spec.headers) or None, timestamp=spec.timestamp or 0,
                                 on_delivery=functools.partial(on_delivery, i))
                break
            except BufferError:
                producer.poll(0.05)
    remaining = producer.flush(TIMEOUT_S)
    if errors:
        raise DeliveryError(errors[0])
    assert remaining == 0, f"{remaining} records not delivered within {TIMEOUT_S} s"
    return delivered


def confluent_rec(msg) -> Rec:
    ts_type, ts = msg.timestamp()
    return Rec(msg.partition(), msg.offset(), msg.key(), msg.value(), tuple(msg.headers() or ()), ts,
               {1: CREATE_TIME, 2: LOG_APPEND_TIME}.get(ts_type, str(ts_type)))


def confluent_consumer(bootstrap: str, **config: Any) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": "tests-broker",
                     "enable.auto.commit": False, "enable.auto.offset.store": False,
                     "auto.offset.reset": "error", "fetch.wait.max.ms": 100, **config})


def consume_confluent(bootstrap: str, topic: str, starts: dict[int, int], count: int,
                      timeout_s: float = TIMEOUT_S, **config: Any) -> list[Rec]:
    """Read `count` records from `starts` ({partition: offset}); errors raise."""
    consumer = confluent_consumer(bootstrap, **config)
    try:
        consumer.assign([CkTopicPartition(topic, p, o) for p, o in starts.items()])
        out: list[Rec] = []
        deadline = time.monotonic() + timeout_s
        while len(out) < count and time.monotonic() < deadline:
            for msg in consumer.consume(min(count - len(out), 100_000), timeout=0.2):
                if msg.error() is not None:
                    raise KafkaException(msg.error())
                out.append(confluent_rec(msg))
        return out
    finally:
        consumer.close()


# ---- kafka-python ---------------------------------------------------------------------------

def kafka_python_rec(r) -> Rec:
    return Rec(r.partition, r.offset, r.key, r.value, tuple(tuple(h) for h in (r.headers or ())),
               r.timestamp, LOG_APPEND_TIME if r.timestamp_type == 1 else CREATE_TIME)


def consume_kafka_python(bootstrap: str, topic: str, starts: dict[int, int], count: int,
                         timeout_s: float = TIMEOUT_S, **config: Any) -> list[Rec]:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KpTopicPartition

    consumer = KafkaConsumer(**{"bootstrap_servers": bootstrap, "group_id": None, "enable_auto_commit": False,
                                "auto_offset_reset": "none", "fetch_max_wait_ms": 100,
                                "request_timeout_ms": int(timeout_s * 1000) + 5000, **config})
    try:
        tps = {p: KpTopicPartition(topic, p) for p in starts}
        consumer.assign(list(tps.values()))
        for p, offset in starts.items():
            consumer.seek(tps[p], offset)
        out: list[Rec] = []
        deadline = time.monotonic() + timeout_s
        while len(out) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                out.extend(kafka_python_rec(r) for r in records)
        return out
    finally:
        consumer.close()


def produce_kafka_python(bootstrap: str, topic: str, specs: list[Spec], **config: Any) -> list[Any]:
    """Produce with kafka-python; returns the RecordMetadata of each spec, in order."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, **config)
    try:
        futures = [producer.send(topic, value=s.value, key=s.key, partition=s.partition,
                                 headers=list(s.headers), timestamp_ms=s.timestamp) for s in specs]
        producer.flush(TIMEOUT_S)
        return [f.get(timeout=TIMEOUT_S) for f in futures]
    finally:
        producer.close(timeout=5)


# ---- aiokafka -------------------------------------------------------------------------------

def aiokafka_rec(r) -> Rec:
    return Rec(r.partition, r.offset, r.key, r.value, tuple(tuple(h) for h in (r.headers or ())),
               r.timestamp, LOG_APPEND_TIME if r.timestamp_type == 1 else CREATE_TIME)


def consume_aiokafka(bootstrap: str, topic: str, starts: dict[int, int], count: int,
                     timeout_s: float = TIMEOUT_S, **config: Any) -> list[Rec]:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition as AioTopicPartition

    async def run() -> list[Rec]:
        consumer = AIOKafkaConsumer(**{"bootstrap_servers": bootstrap, "group_id": None,
                                       "enable_auto_commit": False, "auto_offset_reset": "none",
                                       "fetch_max_wait_ms": 100, **config})
        await consumer.start()
        try:
            tps = {p: AioTopicPartition(topic, p) for p in starts}
            consumer.assign(list(tps.values()))
            for p, offset in starts.items():
                consumer.seek(tps[p], offset)
            out: list[Rec] = []
            deadline = time.monotonic() + timeout_s
            while len(out) < count and time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout_ms=200)).values():
                    out.extend(aiokafka_rec(r) for r in records)
            return out
        finally:
            await consumer.stop()

    return asyncio.run(run())


def produce_aiokafka(bootstrap: str, topic: str, specs: list[Spec], **config: Any) -> list[Any]:
    """Produce with aiokafka; returns the RecordMetadata of each spec, in order."""
    from aiokafka import AIOKafkaProducer

    async def run() -> list[Any]:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, **config)
        await producer.start()
        try:
            futures = [await producer.send(topic, value=s.value, key=s.key, partition=s.partition,
                                           headers=list(s.headers), timestamp_ms=s.timestamp)
                       for s in specs]
            return list(await asyncio.wait_for(asyncio.gather(*futures), TIMEOUT_S))
        finally:
            await producer.stop()

    return asyncio.run(run())


CONSUMERS = {
    "confluent": consume_confluent,
    "kafka-python": consume_kafka_python,
    "aiokafka": consume_aiokafka,
}


def kafka_python_lacks(codec: str) -> str | None:
    """Why kafka-python cannot read `codec` here (its optional codec package is not installed)."""
    import kafka.codec

    has = {"none": True, "gzip": kafka.codec.has_gzip(), "snappy": kafka.codec.has_snappy(),
           "lz4": kafka.codec.has_lz4(), "zstd": kafka.codec.has_zstd()}[codec]
    return None if has else f"kafka-python has no {codec} codec installed (python-snappy/lz4/zstandard)"


# ---- the data directory ---------------------------------------------------------------------

def segment_files(data_dir: Path, topic: str, partition: int, suffix: str = ".log") -> list[Path]:
    return sorted((Path(data_dir) / f"{topic}-{partition}").glob(f"*{suffix}"))


def stored_batches(data_dir: Path, topic: str, partition: int) -> list[BatchHeader]:
    """The batch headers of every segment of a partition, in offset order."""
    headers = []
    for path in segment_files(data_dir, topic, partition):
        data = path.read_bytes()
        headers.extend(h for _, h in iter_batches(data))
    return headers


def stored_record_batches(data_dir: Path, topic: str, partition: int) -> list[RecordBatch]:
    batches = []
    for path in segment_files(data_dir, topic, partition):
        data = path.read_bytes()
        batches.extend(RecordBatch(data, position) for position, _ in iter_batches(data))
    return batches


# ---- raw protocol ---------------------------------------------------------------------------

class ConnectionClosed(Exception):
    pass


class RawClient:
    """One connection speaking the Kafka protocol with kio-encoded requests."""

    def __init__(self, bootstrap: str, *, timeout_s: float = TIMEOUT_S, client_id: str = "tests-broker") -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout_s)
        self.client_id = client_id.encode()
        self._correlation_id = 0

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    @property
    def local_address(self) -> str:
        host, port = self.sock.getsockname()[:2]
        return f"{host}:{port}"

    def encode(self, api_key: int, version: int, fields: dict[str, Any], correlation_id: int) -> bytes:
        body = build(load_request_schema(api_key, version), fields)
        encoded = io.BytesIO()
        entity_writer(type(body))(encoded, body)
        header = struct.pack(">hhih", api_key, version, correlation_id, len(self.client_id)) + self.client_id
        flexible = apis.request_header_version(api_key, version) == 2
        return header + (b"\x00" if flexible else b"") + encoded.getvalue()

    def send(self, api_key: int, version: int, **fields: Any) -> int:
        """Send one request; returns its correlation id."""
        self._correlation_id += 1
        self.send_frame(self.encode(api_key, version, fields, self._correlation_id))
        return self._correlation_id

    def send_frame(self, payload: bytes) -> None:
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)

    def receive_frame(self) -> bytes:
        (size,) = struct.unpack(">i", self._read_exactly(4))
        return self._read_exactly(size)

    def receive(self, api_key: int, version: int) -> tuple[int, Any]:
        """Read one response: (correlation id, decoded kio body)."""
        data = self.receive_frame()
        (correlation_id,) = struct.unpack_from(">i", data)
        body_at = 4 + (1 if apis.response_header_version(api_key, version) == 1 else 0)
        reader = entity_reader(load_response_schema(api_key, version))
        return correlation_id, reader(memoryview(data), body_at)[0]

    def request(self, api_key: int, version: int, **fields: Any) -> Any:
        sent = self.send(api_key, version, **fields)
        correlation_id, body = self.receive(api_key, version)
        assert correlation_id == sent
        return body

    def closed_by_peer(self, timeout_s: float = 5.0) -> bool:
        """True if the broker closes the connection within `timeout_s` (without sending more)."""
        self.sock.settimeout(timeout_s)
        try:
            data = self.sock.recv(1)
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False
        return data == b""

    def _read_exactly(self, n: int) -> bytes:
        chunks = []
        while n:
            try:
                chunk = self.sock.recv(n)
            except ConnectionResetError as exc:
                raise ConnectionClosed("connection reset by the broker") from exc
            if not chunk:
                raise ConnectionClosed("connection closed by the broker")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    # -- the requests the tests send ------------------------------------------------------
    def produce(self, topic: str, partition: int, records: bytes, *, acks: int = -1, version: int = 9,
                timeout_ms: int = 5000) -> Any:
        """One Produce request; returns the partition's response (None for acks=0)."""
        fields = {"transactional_id": None, "acks": acks, "timeout": timeout_ms,
                  "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}]}
        if acks == 0:
            self.send(0, version, **fields)
            return None
        response = self.request(0, version, **fields)
        [topic_response] = response.responses
        [partition_response] = topic_response.partition_responses
        return partition_response

    def fetch(self, topic: str, partition: int, offset: int, *, max_wait_ms: int = 0, min_bytes: int = 1,
              partition_max_bytes: int = 1_048_576, max_bytes: int = 52_428_800, version: int = 12) -> Any:
        """One Fetch request for one partition; returns its PartitionData. From v13 the topic
        goes by its id (looked up with Metadata), and the answer must echo that id."""
        by_id = version >= 13
        named = {"topic_id": self.topic_id(topic)} if by_id else {"topic": topic}
        response = self.request(1, version, replica_id=-1, max_wait=max_wait_ms, min_bytes=min_bytes,
                                max_bytes=max_bytes, isolation_level=0, session_id=0, session_epoch=-1,
                                topics=[{**named, "partitions": [{
                                    "partition": partition, "fetch_offset": offset,
                                    "partition_max_bytes": partition_max_bytes}]}],
                                forgotten_topics_data=[], rack_id="")
        [topic_response] = response.responses
        if by_id:
            assert topic_response.topic_id == named["topic_id"]
        [partition_data] = topic_response.partitions
        return partition_data

    def fetch_many(self, topic: str, offsets: dict[int, int], *, max_bytes: int,
                   partition_max_bytes: int = 1_048_576, version: int = 12) -> dict[int, Any]:
        """One Fetch request for several partitions of a topic, in the order given; returns
        {partition: PartitionData}."""
        response = self.request(1, version, replica_id=-1, max_wait=0, min_bytes=1, max_bytes=max_bytes,
                                isolation_level=0, session_id=0, session_epoch=-1,
                                topics=[{"topic": topic, "partitions": [
                                    {"partition": p, "fetch_offset": o, "partition_max_bytes": partition_max_bytes}
                                    for p, o in offsets.items()]}],
                                forgotten_topics_data=[], rack_id="")
        [topic_response] = response.responses
        return {int(p.partition_index): p for p in topic_response.partitions}

    def topic_id(self, topic: str) -> Any:
        """The topic's id (a uuid.UUID) from Metadata v12."""
        response = self.request(3, 12, topics=[{"name": topic}], allow_auto_topic_creation=False,
                                include_topic_authorized_operations=False)
        [described] = response.topics
        assert int(described.error_code) == 0, described
        return described.topic_id

    def list_offset(self, topic: str, partition: int, timestamp: int, *, version: int = 7) -> Any:
        response = self.request(2, version, replica_id=-1, isolation_level=0, topics=[
            {"name": topic, "partitions": [{"partition_index": partition, "timestamp": timestamp}]}])
        return response.topics[0].partitions[0]

    def init_producer_id(self, *, version: int = 4) -> tuple[int, int]:
        response = self.request(22, version, transactional_id=None, transaction_timeout=60_000,
                                producer_id=-1, producer_epoch=-1)
        assert int(response.error_code) == 0, response
        return int(response.producer_id), int(response.producer_epoch)


def records_in(data: bytes | None) -> list[Any]:
    """The logbroker Records of every complete batch in a fetched record set."""
    if not data:
        return []
    out = []
    for position, _ in iter_batches(data):
        out.extend(RecordBatch(data, position).records())
    return out
