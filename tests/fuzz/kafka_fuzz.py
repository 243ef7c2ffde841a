"""Structure-aware fuzzing of the Kafka protocol: request frames built from kio's schemas, then
mutated where it hurts.

`FuzzCases(seed, topics)` yields `Case`s for every (api key, version) of `SUPPORTED_APIS` — an API
added to the table later is fuzzed without a change here. Each case is a function of (seed,
index) alone (its own `random.Random`), so one case can be replayed by its index.

A valid request is encoded straight from the schema that kio's generated classes describe (field
order, kafka_type, nullability, flexible versions), with values drawn from small pools chosen by
field name — existing topics and a few illegal names, small timeouts and partition counts (so
that a "valid" CreateTopics does not ask for a million partitions and a Fetch does not park for
minutes), real record batches for `records`. While encoding it notes where every length or count
prefix is (`Span`), so the mutations can aim at them:

    valid      the request as encoded
    bitflip    1-4 random bits anywhere after the size prefix (header included)
    length     one length/count prefix set to -1, 0, 1, huge or random
    null       one non-nullable array/string/bytes set to null
    truncate   the frame cut short
    garbage    random bytes appended
    header     api key or version out of range, or a frame of random bytes

One exception: a CreateTopics or CreatePartitions mutation that would ask for more than
MAX_FUZZ_PARTITIONS partitions is sent unmutated (see there).
"""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass

from kio.serial._introspect import EntityField, EntityTupleField, PrimitiveField, PrimitiveTupleField, classify_field, get_field_tag

from logbroker.protocol import apis, codec
from logbroker.protocol.guard import is_nullable, resolved_fields
from logbroker.records.builder import build_batch

MUTATIONS = ("valid", "bitflip", "length", "null", "truncate", "garbage", "header")
WEIGHTS = (20, 20, 20, 15, 10, 8, 7)

_FIXED = {"int8": ">b", "int16": ">h", "int32": ">i", "int64": ">q", "uint16": ">H", "uint32": ">I",
          "uint64": ">Q", "float64": ">d", "timedelta_i32": ">i", "timedelta_i64": ">q",
          "datetime_i64": ">q", "error_code": ">h"}
_RANGES = {"int8": 7, "int16": 15, "int32": 31, "int64": 63, "timedelta_i32": 31,
           "timedelta_i64": 63, "datetime_i64": 63, "error_code": 15}


@dataclass(frozen=True, slots=True)
class Span:
    """A length or count prefix in the encoded frame."""

    offset: int
    width: int
    flexible: bool  # compact (uvarint of n + 1) rather than int16/int32
    size_bits: int  # 16 or 32 for the legacy encodings
    nullable: bool
    name: str


@dataclass(frozen=True, slots=True)
class Case:
    index: int
    api_key: int
    version: int
    correlation_id: int
    mutation: str
    frame: bytes  # size prefix included

    def describe(self) -> str:
        return (f"case {self.index}: {apis.SUPPORTED_APIS[self.api_key].name if self.api_key in apis.SUPPORTED_APIS else self.api_key} "
                f"v{self.version} {self.mutation} ({len(self.frame)} bytes: {self.frame[:80].hex()}…)")


def all_versions() -> list[tuple[int, int]]:
    return [(spec.api_key, v) for spec in apis.SUPPORTED_APIS.values()
            for v in range(spec.min_version, spec.max_version + 1)]


def uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


class _Encoder:
    """Encodes one random valid body of a kio request class, noting every length prefix."""

    def __init__(self, rng: random.Random, pools: _Pools, base: int) -> None:
        self.rng = rng
        self.pools = pools
        self.out = bytearray()
        self.spans: list[Span] = []
        self.base = base  # offset of the body in the frame
        self.depth = 0

    def entity(self, cls: type) -> None:
        flexible = cls.__flexible__
        self.depth += 1
        for f in resolved_fields(cls):
            if get_field_tag(f) is not None:
                continue  # tagged fields are optional; the mutations reach their section anyway
            self.field(cls, f, flexible)
        if flexible:
            self.out += b"\x00"
        self.depth -= 1

    def _length(self, n: int, *, flexible: bool, bits: int, nullable: bool, name: str) -> None:
        start = self.base + len(self.out)
        if flexible:
            data = uvarint(n + 1)
        else:
            data = struct.pack(">h" if bits == 16 else ">i", n)
        self.out += data
        self.spans.append(Span(start, len(data), flexible, bits, nullable, name))

    def field(self, cls: type, f, flexible: bool) -> None:  # noqa: ANN001
        kind = classify_field(f)
        nullable = is_nullable(f.type)
        name = f"{cls.__name__}.{f.name}"
        null = nullable and self.rng.random() < 0.1
        if isinstance(kind, PrimitiveField):
            self.primitive(f.metadata["kafka_type"], f.name, cls.__name__, flexible=flexible,
                           nullable=nullable, null=null, name=name)
        elif isinstance(kind, (PrimitiveTupleField, EntityTupleField)):
            count = -1 if null else self.rng.choice((0, 1, 1, 1, 2, 3) if self.depth < 3 else (0, 1))
            self._length(count, flexible=flexible, bits=32, nullable=nullable, name=name)
            for _ in range(max(count, 0)):
                if isinstance(kind, EntityTupleField):
                    self.entity(kind.type_)
                else:
                    self.primitive(f.metadata["kafka_type"], f.name, cls.__name__, flexible=flexible,
                                   nullable=False, null=False, name=name + "[]")
        elif isinstance(kind, EntityField):
            if nullable:
                self.out += b"\xff" if null else b"\x01"
            if not null:
                self.entity(kind.type_)
        else:
            raise TypeError(name)

    def primitive(self, kafka_type: str, field: str, owner: str, *, flexible: bool, nullable: bool,
                  null: bool, name: str) -> None:
        fmt = _FIXED.get(kafka_type)
        if fmt is not None:
            self.out += struct.pack(fmt, self.pools.integer(self.rng, kafka_type, field))
        elif kafka_type == "bool":
            self.out += bytes([self.rng.choice((0, 1))])
        elif kafka_type == "uint8":
            self.out += bytes([self.rng.randrange(256)])
        elif kafka_type == "uuid":
            self.out += self.rng.choice((bytes(16), self.rng.randbytes(16), *self.pools.topic_ids))
        elif kafka_type == "string":
            value = None if null else self.pools.string(self.rng, field, owner).encode("utf-8", "surrogatepass")
            self._length(-1 if value is None else len(value), flexible=flexible, bits=16,
                         nullable=nullable, name=name)
            self.out += value or b""
        elif kafka_type in ("bytes", "records"):
            value = None if null else self.pools.binary(self.rng, kafka_type, field)
            self._length(-1 if value is None else len(value), flexible=flexible, bits=32,
                         nullable=nullable, name=name)
            self.out += value or b""
        else:
            raise TypeError(f"{name}: kafka_type {kafka_type}")


class _Pools:
    """Values by field name: enough real ones for requests to get past the first checks."""

    def __init__(self, topics: list[str], topic_ids: list[bytes]) -> None:
        self.topics = topics
        self.topic_ids = topic_ids
        self.bad_topics = ["", "evil\n", "a/b", "..", "caf\u00e9", "x" * 250, "new-\r"]
        self.batches = [build_batch([(b"k", b"v")], now_ms=1_700_000_000_000),
                        build_batch([(None, b"v" * 100)] * 5, now_ms=1_700_000_000_000),
                        build_batch([(b"k", b"v")], producer_id=1000, producer_epoch=0, base_sequence=0,
                                    now_ms=1_700_000_000_000)]

    def integer(self, rng: random.Random, kafka_type: str, field: str) -> int:
        f = field.lower()
        if "timeout" in f or "wait" in f or "backoff" in f or f.endswith("_ms") and "time" not in f:
            choices = (0, 0, 10, 100, -1)
        elif f in ("num_partitions", "count", "replication_factor") or "replica" in f and "factor" in f:
            choices = (-1, 0, 1, 2, 3)
        elif f == "acks":
            choices = (-1, 0, 1, 2)
        elif "partition" in f and "bytes" not in f or f in ("index", "partition_index"):
            choices = (0, 0, 1, 2, -1, 100)
        elif "bytes" in f:
            choices = (0, 1, 1024, 1 << 20, -1, -65536, 2**31 - 1)
        elif "offset" in f or "timestamp" in f:
            choices = (0, 1, 3, -1, -2, -3, 2**40)
        elif "epoch" in f or "generation" in f:
            choices = (-1, 0, 1, 5)
        elif "id" in f:  # broker, replica, node, producer ids
            choices = (-1, 0, 1, 1000)
        else:
            choices = (0, 1, -1, 2, 100, "max", "min", "random")
        value = rng.choice(choices)
        bits = _RANGES.get(kafka_type, 31)
        if kafka_type.startswith("uint"):
            return {"max": 2 ** (int(kafka_type[4:]) - 1), "min": 0}.get(value, abs(value) if isinstance(value, int) else 7)
        if value == "max":
            return 2**bits - 1
        if value == "min":
            return -(2**bits)
        if value == "random":
            return rng.randrange(-(2**bits), 2**bits)
        return max(min(value, 2**bits - 1), -(2**bits))

    def string(self, rng: random.Random, field: str, owner: str) -> str:
        f = field.lower()
        topicish = "topic" in f or (f == "name" and "Topic" in owner) or f == "resource_name"
        if topicish:
            return rng.choice(self.topics) if rng.random() < 0.75 else rng.choice(self.bad_topics)
        if "group" in f:
            return rng.choice(("g-fuzz", "g-fuzz", "g-1", "", "g\n"))
        if "member" in f:
            return rng.choice(("", "", "m-1", "consumer-1-abc"))
        if "protocol_type" in f:
            return "consumer"
        if f in ("key", "name") and "Config" in owner or "config" in f:
            return rng.choice(("retention.ms", "cleanup.policy", "max.message.bytes", "bogus.key", ""))
        if f == "value":
            return rng.choice(("1000", "-1", "compact", "delete", "x", ""))
        if "principal" in f:
            return rng.choice(("User:alice", "User:*", "alice", "", "User:a\n"))
        if "host" in f:
            return rng.choice(("*", "127.0.0.1", ""))
        if "mechanism" in f:
            return rng.choice(("PLAIN", "SCRAM-SHA-256", "GSSAPI", ""))
        if "user" in f:
            return rng.choice(("alice", "a/b", "a\nb", ""))
        return rng.choice(("", "x", "consumer", "range", "\n", "\x00",
                           "".join(rng.choice("abc-_.é\n ") for _ in range(rng.randrange(12)))))

    def binary(self, rng: random.Random, kafka_type: str, field: str = "") -> bytes:
        if kafka_type == "records" and rng.random() < 0.8:
            return rng.choice(self.batches)
        if "auth" in field and rng.random() < 0.7:  # SaslAuthenticate: PLAIN and SCRAM first messages
            return rng.choice((b"\x00alice\x00alice-secret", b"\x00alice\x00wrong", b"alice\x00alice\x00x",
                               b"n,,n=alice,r=fuzznonce", b"n,a=bob,n=alice,r=", b"c=biws,r=x,p=AAAA",
                               b"\x00" * 3, b"\xff" * 40))
        return rng.choice((b"", rng.randbytes(rng.randrange(1, 40)),
                           b"\x00\x01\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x01\x00\x00\x00\x00"))


class FuzzCases:
    def __init__(self, seed: int, topics: list[str], topic_ids: list[bytes] = (), *,
                 api_keys: tuple[int, ...] | None = None) -> None:
        """`api_keys`: fuzz only these APIs (all of the table by default)."""
        self.seed = seed
        self.pools = _Pools(topics, list(topic_ids))
        self.versions = [(k, v) for k, v in all_versions() if api_keys is None or k in api_keys]

    def case(self, index: int) -> Case:
        rng = random.Random(f"{self.seed}:{index}")
        api_key, version = self.versions[rng.randrange(len(self.versions))]
        mutation = rng.choices(MUTATIONS, WEIGHTS)[0]
        correlation_id = rng.randrange(1, 2**31 - 1)
        header_version = apis.request_header_version(api_key, version)
        client_id = b"fuzz"
        head = struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id
        if header_version == 2:
            head += b"\x00"
        encoder = _Encoder(rng, self.pools, base=4 + len(head))
        encoder.entity(codec.request_class(api_key, version))
        valid = bytes(head + encoder.out)
        body, mutation = self.mutate(rng, mutation, bytearray(valid), encoder.spans)
        if api_key in _PARTITION_MAKERS and _new_partitions(body) > MAX_FUZZ_PARTITIONS:
            body, mutation = bytearray(valid), "valid"
        return Case(index, api_key, version, correlation_id, mutation,
                    struct.pack(">i", len(body)) + bytes(body))

    def mutate(self, rng: random.Random, mutation: str, body: bytearray,
               spans: list[Span]) -> tuple[bytearray, str]:
        """The mutated body and the mutation applied ("valid" when the request offers no target
        for the one drawn, e.g. no non-nullable field to null)."""
        spans = [Span(s.offset - 4, s.width, s.flexible, s.size_bits, s.nullable, s.name) for s in spans]
        if mutation == "bitflip":
            for _ in range(rng.randint(1, 4)):
                i = rng.randrange(len(body))
                body[i] ^= 1 << rng.randrange(8)
        elif mutation == "length":
            if not spans:
                return body, "valid"
            span = rng.choice(spans)
            n = rng.choice((-1, 0, 1, 2**31 - 1, 2**15 - 1, -2, rng.randrange(2**16), 2**32 + 5))
            body[span.offset:span.offset + span.width] = _encode_length(n, span)
        elif mutation == "null":
            forbidden = [s for s in spans if not s.nullable]
            if not forbidden:
                return body, "valid"
            span = rng.choice(forbidden)
            body[span.offset:span.offset + span.width] = _encode_length(-1, span)
        elif mutation == "truncate":
            del body[rng.randrange(len(body)):]
        elif mutation == "garbage":
            body += rng.randbytes(rng.randint(1, 64))
        elif mutation == "header":
            choice = rng.randrange(4)
            if choice == 0:
                struct.pack_into(">h", body, 0, rng.choice((-1, 999, 32767, 4, 5, 6)))
            elif choice == 1:
                struct.pack_into(">h", body, 2, rng.choice((-1, 100, 32767)))
            elif choice == 2:
                struct.pack_into(">h", body, 8, rng.choice((-2, 32767, 200)))  # client id length
            else:
                body = bytearray(rng.randbytes(rng.randrange(0, 64)))
        return body, mutation


_PARTITION_MAKERS = (apis.ApiKey.CREATE_TOPICS, apis.ApiKey.CREATE_PARTITIONS)
# Partition counts are a matter of capacity, not of parsing: a bit flip in a CreatePartitions
# count asks for thousands of partitions (each a directory, files, an fd; Kafka bounds one request
# at 10,000 and leaves the rest to ACLs and policies), and a 100,000-case run then measures the
# disk instead of the decoder. Mutations that would create more than this are sent unmutated.
MAX_FUZZ_PARTITIONS = 64


def _new_partitions(body: bytes | bytearray) -> int:
    """How many partitions a CreateTopics/CreatePartitions frame asks for (0 if it does not decode)."""
    from logbroker.protocol.codec import decode_request
    try:
        request = decode_request(memoryview(bytes(body)))
    except Exception:  # noqa: BLE001 - not decodable: the broker refuses it anyway
        return 0
    if request.api_key not in _PARTITION_MAKERS:  # (a bit flip may have changed the api key)
        return 0
    topics = request.body.topics or ()
    if request.api_key == apis.ApiKey.CREATE_PARTITIONS:
        return sum(max(t.count, 0) for t in topics)
    return sum(max(t.num_partitions, len(t.assignments or ())) for t in topics)


def _encode_length(n: int, span: Span) -> bytes:
    if span.flexible:
        return uvarint((n + 1) & (2**35 - 1)) if n >= -1 else uvarint(2**32 + n)
    bits = span.size_bits
    return struct.pack(">h" if bits == 16 else ">i", ((n + 2 ** (bits - 1)) % 2**bits) - 2 ** (bits - 1))


# --- sending a case and judging the answer ---------------------------------------------------

PROBE_CORRELATION_ID = 0x7FFF_FFF0
PROBE = (lambda body: struct.pack(">i", len(body)) + body)(
    struct.pack(">hhih", apis.ApiKey.API_VERSIONS, 0, PROBE_CORRELATION_ID, 5) + b"probe")


class FuzzFailure(AssertionError):
    """The broker answered something that is not a well-formed response."""


def send_case(sock, case: Case, timeout_s: float) -> str:  # noqa: ANN001
    """Send the case and an ApiVersions probe behind it; read until the probe's answer. Returns
    "answered" (a well-formed response, then the probe's), "no response" (only the probe's:
    acks=0), "closed" (the broker closed the connection) or "timeout"."""
    import socket

    sock.settimeout(timeout_s)
    try:
        sock.sendall(case.frame + PROBE)
    except OSError:
        return "closed"
    answered = False
    while True:
        try:
            frame = _read_frame(sock)
        except (ConnectionError, EOFError, OSError) as exc:
            if isinstance(exc, socket.timeout):
                return "timeout"
            return "closed"
        (correlation_id,) = struct.unpack_from(">i", frame)
        if correlation_id == PROBE_CORRELATION_ID:  # the case got no answer of its own (acks=0)
            _check_probe(frame)
            return "answered" if answered else "no response"
        if answered:
            raise FuzzFailure(f"a second response (correlation id {correlation_id}) to {case.describe()}")
        _check_response(case, frame)
        answered = True


def _read_frame(sock) -> bytes:  # noqa: ANN001
    head = _read_exactly(sock, 4)
    (size,) = struct.unpack(">i", head)
    if not 4 <= size <= 64 << 20:
        raise FuzzFailure(f"response frame size {size}")
    return _read_exactly(sock, size)


def _read_exactly(sock, n: int) -> bytes:  # noqa: ANN001
    chunks = []
    while n:
        chunk = sock.recv(n)
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _check_probe(frame: bytes) -> None:
    from kio.index import load_response_schema
    from kio.serial import entity_reader

    entity_reader(load_response_schema(apis.ApiKey.API_VERSIONS, 0))(memoryview(frame), 4)


def _check_response(case: Case, frame: bytes) -> None:
    """The first answer must be to the case's own header, decodable as that api and version."""
    from kio.index import load_response_schema

    api_key, version, correlation_id = struct.unpack_from(">hhi", case.frame, 4)
    (got,) = struct.unpack_from(">i", frame)
    if got != correlation_id:
        raise FuzzFailure(f"response correlation id {got}, sent {correlation_id}: {case.describe()}")
    if api_key == apis.ApiKey.API_VERSIONS and not apis.is_supported(api_key, version):
        version = 0  # UNSUPPORTED_VERSION with a v0 body
    if not apis.is_supported(api_key, version):
        raise FuzzFailure(f"a response to unsupported api {api_key} v{version}: {case.describe()}")
    header_size = 4 + (1 if apis.response_header_version(api_key, version) == 1 else 0)
    # Well-formed = the response schema's structure, every length and count, nullability, and
    # nothing left over — walked by the request guard, which reads no values (kio's reader also
    # refuses values Kafka itself sends, such as a -1 timestamp in DescribeTransactions).
    from logbroker.protocol.guard import BodyRejected, check_body
    try:
        end = check_body(load_response_schema(api_key, version), memoryview(frame), header_size)
    except BodyRejected as exc:
        raise FuzzFailure(f"ill-formed response ({exc}) to {case.describe()}") from None
    if end != len(frame):
        raise FuzzFailure(f"{len(frame) - end} bytes after the response to {case.describe()}")
