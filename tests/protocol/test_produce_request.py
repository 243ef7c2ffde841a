"""The hand-written Produce decoder (protocol/requests/produce.py) against the general path it
replaces for Produce (guard.py's walk, then kio's reader): on valid frames and on thousands of
mutated ones, both refuse, or both accept with the same content."""

from __future__ import annotations

import datetime
import random
import struct

import pytest
from kio.index import load_request_schema
from kio.serial import entity_reader

from logbroker.protocol.guard import BodyRejected, check_body
from logbroker.protocol.requests.produce import decode_produce_request
from logbroker.records.builder import build_batch
from protocol_helpers import as_hand_decoded_produce, kio_body_bytes

VERSIONS = range(3, 13)


def produce_body(version: int, *, transactional_id: str | None, topics: dict[str, list[bytes | None]]):
    cls = load_request_schema(0, version)
    module = __import__(cls.__module__, fromlist=["x"])
    return cls(transactional_id=transactional_id, acks=-1, timeout=datetime.timedelta(milliseconds=30000),
               topic_data=tuple(module.TopicProduceData(name=name, partition_data=tuple(
                   module.PartitionProduceData(index=i, records=records) for i, records in enumerate(parts)))
                   for name, parts in topics.items()))


def general_path(version: int, buf: bytes):
    cls = load_request_schema(0, version)
    try:
        check_body(cls, buf, 0)
        body, _ = entity_reader(cls)(buf, 0)
    except BodyRejected:
        return "refused"
    except KeyError as e:
        if "Unknown tagged field" in str(e):
            return "unknown tag"
        return "refused"
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException:  # noqa: BLE001 - kio's own refusals (codec.py treats them the same)
        return "refused"
    return as_hand_decoded_produce(body)


def hand_path(version: int, buf: bytes):
    try:
        return decode_produce_request(memoryview(buf), 0, version)
    except BodyRejected:
        return "refused"


SAMPLES = [
    {"transactional_id": None, "topics": {"events": [build_batch([(None, b"v" * 100)])]}},
    {"transactional_id": "tx-1", "topics": {"a": [build_batch([(b"k", b"v")] * 3), None],
                                            "b-topic": [build_batch([(None, b"x" * 300)])]}},
    {"transactional_id": "", "topics": {"ünïcode": [b""]}},
]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("sample", range(len(SAMPLES)))
def test_valid_bodies_decode_the_same(version, sample):
    buf = kio_body_bytes(produce_body(version, **SAMPLES[sample]))
    hand = hand_path(version, buf)
    assert hand != "refused"
    assert hand == general_path(version, buf)


def mutations(buf: bytes, rng: random.Random):
    """Byte flips, truncations, insertions and hostile lengths at random places."""
    for _ in range(60):
        data = bytearray(buf)
        kind = rng.randrange(5)
        at = rng.randrange(len(data))
        if kind == 0:
            data[at] = rng.randrange(256)
        elif kind == 1:
            del data[at:]
        elif kind == 2:
            data[at:at] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 5)))
        elif kind == 3:
            data[at:at + 4] = struct.pack(">i", rng.choice([-1, -2, 0, 1, 0x7FFFFFFF, -0x80000000]))
        else:
            data[at:at + 2] = rng.choice([b"\x00\x00", b"\xff\xff", b"\x80\x00", b"\x00\x01"])
        yield bytes(data)


@pytest.mark.parametrize("version", VERSIONS)
def test_mutated_bodies_are_refused_or_decoded_the_same_by_both(version):
    rng = random.Random(version)
    checked = refused = 0
    for sample in SAMPLES:
        for buf in mutations(kio_body_bytes(produce_body(version, **sample)), rng):
            hand, general = hand_path(version, buf), general_path(version, buf)
            if general == "unknown tag":
                # kio refuses a tagged field it does not know; Kafka skips it (KIP-482), as we do
                continue
            assert hand == general, f"v{version}, body {buf.hex()}: hand {hand!r}, general {general!r}"
            checked += 1
            refused += hand == "refused"
    assert 0 < refused < checked


@pytest.mark.parametrize("version, body, words", [
    (3, b"\xff\xff" + struct.pack(">hi", 1, 100) + b"\xff\xff\xff\xff", "non-nullable field ProduceRequest.topic_data"),
    (3, b"\xff\xff" + struct.pack(">hi", 1, 100) + b"\xff\xff\xff\xfe", "array length -2"),
    (9, b"\x00" + struct.pack(">hi", 1, 100) + b"\x02\x00" + bytes(4), "non-nullable field TopicProduceData.name"),
    (9, b"\x00" + struct.pack(">hi", 1, 100) + b"\xff\xff\xff\xff\x0f", "cannot fit"),
])
def test_refusals_say_what_the_guard_says(version, body, words):
    with pytest.raises(BodyRejected, match=words):
        decode_produce_request(memoryview(body), 0, version)
