"""Capture record batches exactly as librdkafka (confluent-kafka) writes them: the fixtures here.

Not a test. Run it by hand to regenerate the `librdkafka_*.bin` files:

    .venv/bin/python tests/records/data/capture_librdkafka.py

It produces to librdkafka's in-process mock cluster (`test.mock.num.brokers`), which stores each
produced batch as it arrived (offsets assigned), then reads the partition back with a hand-written
Fetch v4 request, so the bytes saved are the producer's own batches, byte for byte.
"""

from __future__ import annotations

import logging
import re
import socket
import struct
import sys
from pathlib import Path

import confluent_kafka

HERE = Path(__file__).parent
TIMESTAMP = 1_700_000_000_000


def _mock_producer(config: dict) -> tuple[confluent_kafka.Producer, str]:
    found: list[str] = []

    class Grab(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            match = re.search(r"replaced with (\S+)", record.getMessage())
            if match:
                found.append(match.group(1))

    logger = logging.getLogger(f"capture-{id(config)}")
    logger.setLevel(logging.INFO)
    logger.propagate = False
    logger.addHandler(Grab())
    producer = confluent_kafka.Producer({"test.mock.num.brokers": 1, "linger.ms": 50, **config}, logger=logger)
    producer.poll(0.1)
    if not found:
        sys.exit("could not find the mock cluster's address in librdkafka's log")
    return producer, found[0]


def _fetch_partition0(address: str, topic: str) -> bytes:
    """Fetch v4 of topic partition 0 from offset 0, read_uncommitted: the raw records bytes."""
    host, port = address.split(":")
    name = topic.encode()
    body = (struct.pack(">iiiib", -1, 100, 1, 16 << 20, 0) + struct.pack(">ih", 1, len(name)) + name
            + struct.pack(">i", 1) + struct.pack(">iqi", 0, 0, 16 << 20))
    client_id = b"capture"
    message = struct.pack(">hhih", 1, 4, 1, len(client_id)) + client_id + body
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(struct.pack(">i", len(message)) + message)
        (size,) = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))
        data = b""
        while len(data) < size:
            data += sock.recv(size - len(data))
    position = 4 + 4 + 4  # correlation id, throttle, topic count
    (topic_length,) = struct.unpack_from(">h", data, position)
    position += 2 + topic_length + 4  # topic, partition count
    _partition, error, _hw, _lso = struct.unpack_from(">ihqq", data, position)
    position += 22
    if error:
        sys.exit(f"fetch error {error}")
    (aborted,) = struct.unpack_from(">i", data, position)
    position += 4 + 16 * max(aborted, 0)
    (records_length,) = struct.unpack_from(">i", data, position)
    position += 4
    return data[position:position + records_length]


def _small_records(producer: confluent_kafka.Producer, topic: str) -> None:
    for i in range(5):
        producer.produce(topic, partition=0, key=None if i == 2 else b"key-%d" % i,
                         value=b"" if i == 3 else (b"value %d " % i) * 20,
                         headers=[("h1", b"v1"), ("null-header", None)] if i != 4 else None,
                         timestamp=TIMESTAMP + i * 7)


def capture(name: str, config: dict, fill) -> None:
    producer, address = _mock_producer(config)
    if config.get("transactional.id"):
        producer.init_transactions(10)
        producer.begin_transaction()
        fill(producer, "t")
        producer.commit_transaction(10)
    else:
        fill(producer, "t")
    if producer.flush(10):
        sys.exit(f"{name}: messages left unsent")
    data = _fetch_partition0(address, "t")
    (HERE / f"librdkafka_{name}.bin").write_bytes(data)
    print(f"{name}: {len(data)} bytes")


def _large_records(producer: confluent_kafka.Producer, topic: str) -> None:
    pattern = bytes(range(256))
    for i in range(3):
        producer.produce(topic, partition=0, key=b"big-%d" % i, value=pattern * 400 + b"%d" % i,
                         timestamp=TIMESTAMP + i)


def main() -> None:
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        capture(codec, {"compression.type": codec}, _small_records)
        if codec != "none":  # several compression blocks (lz4 64 KiB, xerial snappy 32 KiB)
            capture(f"{codec}_large", {"compression.type": codec, "message.max.bytes": 4 << 20}, _large_records)
    capture("idempotent", {"enable.idempotence": True}, _small_records)
    capture("transactional", {"transactional.id": "capture-txn", "compression.type": "zstd"}, _small_records)


if __name__ == "__main__":
    main()
