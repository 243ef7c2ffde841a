"""The broker's CPU per small request: Produce of 1-10 records, Fetch of a few records
or one that waits, measured as the broker process's utime+stime divided by the requests answered.

The load comes from raw sockets in separate client processes (`multiprocessing`), each holding
one connection with a fixed window of requests in flight: window 1 is ping-pong (each request
has a wake-up of its own, as at a low rate with linger.ms=0), a larger window is a pipelining
client. The request frames are encoded once (kio, `logbroker.client.encode_request`) and sent
again and again, so a client costs a few µs per request and the broker is the one measured;
only the broker's CPU is counted.

`--src DIR` (repeatable) runs the same cases against brokers importing logbroker from each
source tree, alternating, so a before/after comparison shares the machine's noise.
`--profile` adds a breakdown (where each request's CPU goes, by stage) from one more broker per
case, run under cProfile with a CPU clock.

`--librdkafka` adds the scenario as a user runs it (confluent-kafka, 1 KiB records, 6
partitions, linger.ms=0, paced at `--rates`; `--producers 1,6` shares each rate among that many
producers, each a process and a connection of its own: many applications at a modest rate each);
`--consumer` the same at acks=1 with a consumer
reading as the records come (long polls of 6 partitions); `--floor` the producer's load against a
broker that answers those Produce requests from their header alone (CANNED_BROKER, one per
`--src`): the part of a request's CPU that is the event loop, the socket, framing and the response
write rather than its own work; `--echo` the same load against a minimal uvloop server that
answers each Produce with a canned frame (ECHO_SERVER): the floor of any Python server on this
machine; `--awake` each paced row again with the machine's vCPUs kept from halting between requests
(KeepAwake: a `nice -n 19` shell loop per CPU, which takes the CPU only while nothing else wants
it): the difference is what the VM's idle halts and wake-ups cost each request, not the broker's
work. All columns of the paced table run interleaved, run by run. `--layers` times each layer of
the paced Produce's way through the broker in situ (LAYERED_BROKER: a thread-CPU clock around
a read (buffer_updated), the frame decoder, the dispatcher, decode, handler, append, encode, the write).

    PYTHONPATH=$PWD/src .venv/bin/python bench/bench_request_cost.py [--quick] [--profile] [--paced-only]
        [--src /work/main/src --src $PWD/src]
        [--librdkafka [--rates 1000,2500,8000] [--producers 1,6] [--consumer] [--floor] [--echo] [--awake]]
        [--layers]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import multiprocessing
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_broker import proc_cpu_s  # noqa: E402
from common import machine_info, median, say, table  # noqa: E402

from logbroker.testing import BrokerProcess  # noqa: E402

_SIZE = struct.Struct(">i")
TOPIC = "small"
FETCH_TOPIC = "small-fetch"
FETCH_TOPIC_RECORDS = 10  # 100 B batches written to it at start: its log end offset
PACED_TOPIC = "paced-6p"


# --- request frames ---------------------------------------------------------------------------

def produce_frame(*, acks: int, records: int, value_bytes: int) -> bytes:
    import datetime

    from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
    from kio.schema.types import TopicName
    from kio.static.primitive import i16, i32

    from logbroker.client import encode_request
    from logbroker.records.builder import build_batch

    batch = build_batch([(None, os.urandom(value_bytes))] * records)
    body = ProduceRequest(transactional_id=None, acks=i16(acks), timeout=datetime.timedelta(seconds=30),
                          topic_data=(TopicProduceData(name=TopicName(TOPIC), partition_data=(
                              PartitionProduceData(index=i32(0), records=batch),)),))
    return encode_request(body, correlation_id=1, client_id="bench")


def fetch_frame(*, offset: int, max_wait_ms: int, partition_max_bytes: int) -> bytes:
    import datetime

    from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
    from kio.schema.types import TopicName
    from kio.static.primitive import i32, i64

    from logbroker.client import encode_request

    body = FetchRequest(
        replica_id=-1, max_wait=datetime.timedelta(milliseconds=max_wait_ms), min_bytes=i32(1),
        max_bytes=i32(1 << 20), isolation_level=0, session_id=i32(0), session_epoch=i32(-1),
        topics=(FetchTopic(topic=TopicName(FETCH_TOPIC), partitions=(FetchPartition(
            partition=i32(0), current_leader_epoch=i32(-1), fetch_offset=i64(offset), last_fetched_epoch=i32(-1),
            log_start_offset=i64(-1), partition_max_bytes=i32(partition_max_bytes)),)),),
        forgotten_topics_data=(), rack_id="")
    return encode_request(body, correlation_id=1, client_id="bench")


# --- the load generator -----------------------------------------------------------------------

def client(host: str, port: int, frame: bytes, window: int, stop_at: float, counts, index: int) -> None:
    """One connection: keep `window` copies of `frame` in flight until `stop_at`; count answers."""
    sock = socket.create_connection((host, port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.sendall(frame * window)
    buf = bytearray()
    answered = 0
    in_flight = window
    while in_flight:
        data = sock.recv(1 << 20)
        if not data:
            raise RuntimeError("the broker closed the connection")
        buf += data
        pos, done = 0, 0
        while len(buf) - pos >= 4:
            (size,) = _SIZE.unpack_from(buf, pos)
            if len(buf) - pos - 4 < size:
                break
            pos += 4 + size
            done += 1
        del buf[:pos]
        answered += done
        in_flight -= done
        if done and time.monotonic() < stop_at:
            sock.sendall(frame * done)
            in_flight += done
    counts[index] = answered
    sock.close()


def run_load(bootstrap: tuple[str, int], frame: bytes, *, clients: int, window: int, seconds: float,
             pid: int) -> dict:
    counts = multiprocessing.Array("q", clients)
    ctx = multiprocessing.get_context("fork")
    warm_until = time.monotonic() + 0.3
    procs = [ctx.Process(target=client, args=(*bootstrap, frame, window, warm_until + seconds, counts, i))
             for i in range(clients)]
    for p in procs:
        p.start()
    time.sleep(max(0.0, warm_until - time.monotonic()))
    # Counting: broker CPU over the whole load (warm-up included) against every answer.
    for p in procs:
        p.join(60)
    return {"requests": sum(counts)}


def measure(bootstrap, frame, *, clients: int, window: int, seconds: float, pid: int,
            profile: Path | None = None) -> dict:
    if profile is not None:
        os.kill(pid, signal.SIGUSR1)
    cpu0, t0 = proc_cpu_s(pid), time.perf_counter()
    load = run_load(bootstrap, frame, clients=clients, window=window, seconds=seconds, pid=pid)
    cpu, wall = proc_cpu_s(pid) - cpu0, time.perf_counter() - t0
    if profile is not None:
        os.kill(pid, signal.SIGUSR2)
        deadline = time.monotonic() + 10
        while not profile.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)  # let the dump finish
    n = load["requests"]
    return {"requests": n, "broker_cpu_s": cpu, "wall_s": wall, "req_s": n / wall,
            "us_per_request": cpu / max(1, n) * 1e6, "broker_cpu_pct": 100 * cpu / wall}


# --- the breakdown ----------------------------------------------------------------------------

# The broker under cProfile with a CPU-time clock (time.thread_time_ns): time spent waiting for a
# core is not counted, which a sampling profiler cannot tell apart on a loaded machine (py-spy
# counts a runnable-but-waiting thread as busy, and put half the samples in epoll). Each
# function's own time goes to a stage by its file and name; the first rule that matches wins.
# cProfile's per-call overhead inflates Python code ~6x but not the syscalls, so the syscalls
# (SYSCALLS) are counted as measured and the rest is scaled to what is left of the unprofiled
# µs per request.
PROFILED_BROKER = """
import cProfile, runpy, signal, sys, time
profile, out = cProfile.Profile(time.thread_time_ns, 1e-9), sys.argv[1]
sys.argv = ["logbroker"] + sys.argv[2:]

def start(*_):
    profile.enable()

def stop(*_):
    profile.disable()
    profile.dump_stats(out)

signal.signal(signal.SIGUSR1, start)
signal.signal(signal.SIGUSR2, stop)
runpy.run_module("logbroker.cli", run_name="__main__")
"""

# The floor of the paced scenario: the same broker, but a Produce for PACED_TOPIC is answered from
# its header and partition alone (decoded, encoded, nothing appended, no handler): what the event
# loop, the socket, framing and the response write cost per request without the request's own work.
CANNED_BROKER = """
import runpy, sys
sys.argv = ["logbroker"] + sys.argv[2:]
from logbroker.protocol import codec
from logbroker.protocol.responses.produce import ProducePartitionResult, encode_produce_response
from logbroker.server import dispatch

real = dispatch.Dispatcher.__call__

def canned(self, frame, connection):
    if frame[0] != 0 or frame[1] != 0:  # not a Produce
        return real(self, frame, connection)
    request = codec.decode_request(frame)
    topics = request.body.topic_data
    if topics[0].name != %r:
        return real(self, frame, connection)
    return [encode_produce_response(request.api_version, request.correlation_id, [
        (t.name, [ProducePartitionResult(p.index, 0, 0, -1, 0) for p in t.partition_data]) for t in topics])]

dispatch.Dispatcher.__call__ = canned
runpy.run_module("logbroker.cli", run_name="__main__")
""" % PACED_TOPIC

# The paced scenario's CPU by layer, in situ: the broker with a thread-CPU clock around each layer
# of a Produce's way (LAYERS: module, class or None, function), counting from SIGUSR1 and writing
# {label: [ns, calls]} to the path in argv[1] on SIGUSR2. Layers nest, so each figure includes the
# ones below it; each wrapper adds about one µs (two clock reads, which on this VM are syscalls),
# reported as the cost of a wrapped no-op (os.getpid).
LAYERS = [  # (module, class or None, function, label)
    # all of a read: buffer_updated since the connection is a BufferedProtocol, data_received before
    ("logbroker.server.network", "KafkaConnection", "buffer_updated", "a read (all of it)"),
    ("logbroker.server.network", "KafkaConnection", "data_received", "a read (all of it)"),
    ("logbroker.protocol.framing", "FrameDecoder", "feed", "FrameDecoder.feed"),
    ("logbroker.server.dispatch", "Dispatcher", "__call__", "Dispatcher.__call__"),
    # the dispatcher calls decode_request_fields; trees before it, decode_request (one slot)
    ("logbroker.protocol.codec", None, "decode_request_fields", "decode"),
    ("logbroker.protocol.codec", None, "decode_request", "decode"),
    ("logbroker.server.apis.produce", None, "handle", "produce handler"),
    ("logbroker.replication.replica_manager", "ReplicaManager", "append_records_now",
     "ReplicaManager.append_records_now"),
    ("logbroker.replication.partition", "Partition", "append_records_to_leader", "Partition.append_records_to_leader"),
    ("logbroker.storage.log", "Log", "append_as_leader", "Log.append_as_leader (storage)"),
    ("logbroker.server.apis.produce", None, "encode_produce_response", "encode"),
    ("logbroker.server.network", "KafkaConnection", "_write_now", "_write_now (the send)"),
]
LAYERED_BROKER = """
import importlib, json, os, runpy, signal, sys, time
out = sys.argv[1]
sys.argv = ["logbroker"] + sys.argv[2:]
clock, spent = time.thread_time_ns, {}

def wrap(module, owner, name, label):
    holder = importlib.import_module(module)
    holder = getattr(holder, owner) if owner else holder
    real = getattr(holder, name, None)
    if real is None:  # a tree without this function (an older main)
        return
    slot = spent.setdefault(label, [0, 0])
    def timed(*args, **kwargs):
        t0 = clock()
        try:
            return real(*args, **kwargs)
        finally:
            slot[0] += clock() - t0
            slot[1] += 1
    setattr(holder, name, timed)
    if module == "logbroker.server.apis.produce" and name == "handle":
        importlib.import_module("logbroker.server.apis").REGISTRY[0] = timed

def reset(*_):
    for slot in spent.values():
        slot[0] = slot[1] = 0

def dump(*_):
    for _ in range(1000):
        os.getpid()
    with open(out + ".tmp", "w") as f:
        json.dump(spent, f)
    os.rename(out + ".tmp", out)

wrap("os", None, "getpid", "(a wrapped no-op)")
for module, owner, name, label in %r:
    wrap(module, owner, name, label)
signal.signal(signal.SIGUSR1, reset)
signal.signal(signal.SIGUSR2, dump)
runpy.run_module("logbroker.cli", run_name="__main__")
""" % (LAYERS,)


def layers_paced(broker: BrokerProcess, out: Path, *, rate: int, seconds: float) -> dict[str, float]:
    """µs of thread CPU per Produce request in each of LAYERS, in a LAYERED_BROKER under the
    paced load (acks=1), with the process's µs per request as "(process)"."""
    import json

    librdkafka_paced(broker, acks=1, rate=rate, seconds=0.5)  # warm, and the producer connected
    os.kill(broker.process.pid, signal.SIGUSR1)
    r = librdkafka_paced(broker, acks=1, rate=rate, seconds=seconds)
    out.unlink(missing_ok=True)
    os.kill(broker.process.pid, signal.SIGUSR2)
    deadline = time.monotonic() + 10
    while not out.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    n = max(1, r["requests"])
    layers = {label: (ns / max(1, calls) if label.startswith("(") else ns / n) / 1000
              for label, (ns, calls) in json.loads(out.read_text()).items()}
    return {"(process)": r["us_per_request"], **layers}


# The echo floor: not the broker at all, a minimal uvloop server in the same shape as the broker's
# socket side (one Protocol per connection, frames cut from each read, one writelines per read)
# that answers each Produce with a canned response carrying the request's correlation id and
# partition. What a paced request costs a Python process on this machine with no work per request:
# the wake-up, the syscalls, the loop's iteration and a few Python steps. ApiVersions (listing
# only the three APIs it answers) and Metadata (this server as broker 0, the paced topic) are
# canned too, encoded in the bench process (`echo_answers`), so the echo imports nothing of ours.
ECHO_SERVER = """
import pickle, socket, sys, uvloop, asyncio
answers = pickle.load(open(sys.argv[1], "rb"))  # (api key, version, partition or -1) -> frame
port, ready_file = int(sys.argv[2]), sys.argv[3]

class Echo(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport = transport
        self.partial = b""
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data):
        if self.partial:
            data = self.partial + data
        pos, end, out = 0, len(data), []
        while end - pos >= 4:
            size = int.from_bytes(data[pos:pos + 4], "big")
            if end - pos - 4 < size:
                break
            key, version = data[pos + 5], data[pos + 7]  # api key and version < 256: low bytes
            answer = answers[(key, version, partition(data, pos, version) if key == 0 else -1)]
            out += (answer[:4], data[pos + 8:pos + 12], answer[8:])
            pos += 4 + size
        self.partial = data[pos:]
        if out:
            self.transport.writelines(out)

def partition(data, pos, version):
    # The partition of a Produce of one topic and one partition (what this load sends).
    pos += 14 + int.from_bytes(data[pos + 12:pos + 14], "big")  # size, header, client id
    if version >= 9:  # tagged fields, transactional id (null), acks, timeout, 1 topic, its name, 1 partition
        pos += 1 + 1 + 6 + 1
        pos += data[pos] + 1  # the name's length + 1, then the name, and the partition count
    else:
        pos += 2 + 6 + 4
        pos += 2 + int.from_bytes(data[pos:pos + 2], "big") + 4
    return int.from_bytes(data[pos:pos + 4], "big")

async def main():
    await asyncio.get_running_loop().create_server(Echo, "127.0.0.1", port)
    open(ready_file, "w").close()
    await asyncio.Event().wait()

uvloop.run(main())
"""


def echo_answers(port: int) -> dict:
    """The echo server's canned frames (correlation id 0, patched per request): ApiVersions at every
    version listing ApiVersions, Metadata and Produce at the broker's versions; Metadata with this
    server as the only broker and PACED_TOPIC's 6 partitions on it; Produce for each partition."""
    import dataclasses

    from logbroker.protocol import apis, codec
    from logbroker.protocol.apis import ApiKey, api_spec
    from logbroker.protocol.responses.metadata import (MetadataBroker, MetadataPartition, MetadataTopic,
                                                       encode_metadata_response)
    from logbroker.protocol.responses.produce import ProducePartitionResult, encode_produce_response

    def versions(key):
        spec = api_spec(key)
        return range(spec.min_version, spec.max_version + 1)

    answers = {}
    entries = [(k, api_spec(k).min_version, api_spec(k).max_version)
               for k in (ApiKey.PRODUCE, ApiKey.METADATA, ApiKey.API_VERSIONS)]
    for v in versions(ApiKey.API_VERSIONS):
        _response_cls, entry_cls = apis._api_versions_classes(v)
        body = dataclasses.replace(apis.api_versions_body(v), api_keys=tuple(
            entry_cls(api_key=k, min_version=lo, max_version=hi) for k, lo, hi in entries))
        answers[(ApiKey.API_VERSIONS, v, -1)] = codec.encode_response(ApiKey.API_VERSIONS, v, 0, body)
    partitions = [MetadataPartition(0, p, 0, 0, (0,), (0,)) for p in range(6)]
    for v in versions(ApiKey.METADATA):
        answers[(ApiKey.METADATA, v, -1)] = encode_metadata_response(
            v, 0, brokers=[MetadataBroker(0, "127.0.0.1", port)], topics=[MetadataTopic(0, PACED_TOPIC, partitions)],
            cluster_id="echo", controller_id=0)
    for v in versions(ApiKey.PRODUCE):
        for p in range(6):
            answers[(ApiKey.PRODUCE, v, p)] = encode_produce_response(
                v, 0, [(PACED_TOPIC, [ProducePartitionResult(p, 0, 0, -1, 0)])])
    return answers


class EchoProcess:
    """ECHO_SERVER in a subprocess, with what librdkafka_paced needs of a BrokerProcess."""

    def __init__(self, root: Path, src: str | None) -> None:
        import pickle
        import subprocess

        root.mkdir(parents=True, exist_ok=True)
        ready_file = root / "listening"
        # The Metadata answer names the server's own port, known once it listens: take a free
        # port first, build the answers for it, then let the server bind it.
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()
        (root / "answers").write_bytes(pickle.dumps({(int(k), v, p): a for (k, v, p), a in echo_answers(port).items()}))
        env = dict(os.environ)
        if src:
            env["PYTHONPATH"] = src.partition("::")[0]
        self.process = subprocess.Popen([sys.executable, "-c", ECHO_SERVER, str(root / "answers"), str(port),
                                         str(ready_file)], env=env)
        deadline = time.monotonic() + 30
        while not ready_file.exists():
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError("the echo server did not start")
            time.sleep(0.05)
        self.bootstrap = f"127.0.0.1:{port}"

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


STAGES = [
    ("read + frame", ("recv", "_read_ready", "buffer_updated", "get_buffer", "data_received", "framing.py")),
    ("write", ("'send'", "sendfile", "writelines", "_write_now", "_write_loop", "_send", "_write_bytes",
               "transports.py", "selector_events.py:")),
    ("decode", ("decode_request", "guard.py", "headers.py", "codec.py", "wire.py", "kio", "_kio_native")),
    ("validate", ("log_validator.py", "batch.py", "crc32c", "records/")),
    ("append", ("pwrite", "file_records.py", "log_segment.py", "index.py", "producer_state", "storage/")),
    ("read (log)", ("fetch_messages", "_read_partition")),
    ("delayed op / purgatory", ("purgatory.py", "group_commit.py")),
    ("replica manager / partition", ("replica_manager.py", "partition.py", "types.py", "<string>", "clock.py")),
    ("encode", ("protocol/responses/", "encode")),
    ("respond", ("_respond",)),
    ("handler + dispatch", ("server/apis/", "dispatch.py", "metrics.py", "authorization.py", "inspect.py")),
    ("event loop", ("asyncio", "selectors.py", "epoll", "events.py", "base_events.py", "_asyncio")),
]


SYSCALLS = {"send", "recv", "recv_into", "sendfile", "pwritev", "pwrite", "write", "poll", "fsync", "fdatasync",
            "pread", "sendmsg"}
_BUILTIN = re.compile(r"method '?([\w.]+)'?")


def breakdown(stats_path: Path, requests: int, unprofiled_us: float) -> dict[str, float]:
    """µs of CPU per request by stage, from a cProfile dump (own time of each function): the
    syscalls as measured, the Python scaled to the rest of `unprofiled_us`."""
    import pstats

    python: collections.Counter = collections.Counter()
    syscalls: collections.Counter = collections.Counter()
    for (file, line, func), (_cc, _nc, own_s, _cum, _callers) in pstats.Stats(str(stats_path)).stats.items():
        builtin = _BUILTIN.search(func) if file == "~" else None
        name = builtin.group(1).rsplit(".", 1)[-1] if builtin else func
        where = f"{file}:{line}({func}) '{name}'"
        stage = next((stage for stage, needles in STAGES if any(n in where for n in needles)), "other")
        is_syscall = builtin is not None and name in SYSCALLS
        (syscalls if is_syscall else python)[stage] += own_s / requests * 1e6
    scale = max(0.0, unprofiled_us - sum(syscalls.values())) / max(1e-9, sum(python.values()))
    stages = {stage: us * scale for stage, us in python.items()}
    for stage, us in syscalls.items():
        stages[stage] = stages.get(stage, 0.0) + us
    stages["(of which syscalls)"] = sum(syscalls.values())
    return stages


# --- the run ----------------------------------------------------------------------------------

CASES = [
    # name, frame maker, clients, window
    ("produce 1 × 1 KiB, acks=1", lambda: produce_frame(acks=1, records=1, value_bytes=1024)),
    ("produce 1 × 1 KiB, acks=all", lambda: produce_frame(acks=-1, records=1, value_bytes=1024)),
    ("produce 10 × 100 B, acks=1", lambda: produce_frame(acks=1, records=10, value_bytes=100)),
    ("produce 10 × 100 B, acks=all", lambda: produce_frame(acks=-1, records=10, value_bytes=100)),
    ("fetch: a few records", lambda: fetch_frame(offset=0, max_wait_ms=500, partition_max_bytes=4096)),
    # At the log end offset: nothing to read, so it waits its 1 ms in the purgatory (an offset
    # past the end would be answered at once, OFFSET_OUT_OF_RANGE).
    ("fetch: waits 1 ms at the end", lambda: fetch_frame(offset=FETCH_TOPIC_RECORDS, max_wait_ms=1,
                                                         partition_max_bytes=4096)),
]
LOADS = [("ping-pong: 4 connections × 1", 4, 1), ("pipelined: 2 connections × 16", 2, 16)]


def paced_consumer(ready, bootstrap: str, start, stop, out) -> None:
    """A confluent-kafka consumer at the end of the paced topic's 6 partitions, long-polling with
    librdkafka's defaults (read_committed, fetch.wait.max.ms 500, fetch.min.bytes 1): puts the
    requests it sent and the records it got between `start` and `stop` on `out`."""
    from bench_ceilings import QUIET, RequestCounter
    from confluent_kafka import OFFSET_END, Consumer, TopicPartition

    requests = RequestCounter()
    consumer = Consumer({**QUIET, "bootstrap.servers": bootstrap, "group.id": "paced", "enable.auto.commit": False,
                         **requests.config()})
    consumer.assign([TopicPartition(PACED_TOPIC, p, OFFSET_END) for p in range(6)])
    consumer.poll(0.5)
    ready.set()
    start.wait()
    tx0, records = requests.read(consumer), 0
    while not stop.is_set():
        message = consumer.poll(0.1)
        records += message is not None and message.error() is None
    out.put((requests.read(consumer) - tx0, records))
    consumer.close()


def send_paced(producer, rate: float, count: int, first_partition: int = 0) -> None:
    """`count` 1 KiB records at `rate` a second, each to the next of the 6 partitions."""
    value = os.urandom(1024)
    started = time.perf_counter()
    for i in range(count):
        producer.produce(PACED_TOPIC, value, partition=(first_partition + i) % 6)
        producer.poll(0)
        while time.perf_counter() < started + (i + 1) / rate:
            time.sleep(0.0002)
    producer.flush(30)


def warm_producer(bootstrap: str, acks: int):
    """A confluent-kafka producer for the paced load (linger.ms=0), connected and past its first
    delivery; returns it, its failed deliveries and its request counter."""
    from bench_ceilings import RequestCounter, make_producer

    requests = RequestCounter()
    producer, errors = make_producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0,
                                      **requests.config()})
    producer.produce(PACED_TOPIC, b"warm-up")
    producer.flush(30)
    return producer, errors, requests


def paced_producer(ready, bootstrap: str, acks: int, rate: float, count: int, first_partition: int,
                   start, out) -> None:
    """One of several producers (`--producers`), in a process of its own: `send_paced` from
    `start`; puts its Produce requests and failed deliveries on `out`."""
    producer, errors, requests = warm_producer(bootstrap, acks)
    ready.set()
    start.wait()
    tx0 = requests.read(producer)
    send_paced(producer, rate, count, first_partition)
    out.put((requests.read(producer) - tx0, len(errors)))


def spawn_ready(context, target, args: tuple, what: str):
    """Start `target(ready, *args)` in a process and wait for it to set `ready`."""
    ready = context.Event()
    process = context.Process(target=target, args=(ready, *args))
    process.start()
    if not ready.wait(60):
        raise RuntimeError(f"{what} did not start")
    return process


class KeepAwake:
    """A busy shell loop at nice 19 on every CPU while the block runs, so that no vCPU halts
    between two requests. On this VM (Firecracker, the guest's halt polling off) an idle vCPU
    exits to the host at once, and the request that wakes it finds the broker's code and data
    out of the caches; a loop of the lowest weight gives the CPU up to anything that wants it and
    shares no code with the broker (the shell, not Python). Only the broker's own CPU is measured,
    so what changes between the two rows is the cost of the halts, charged to the broker."""

    def __enter__(self) -> "KeepAwake":
        self.loops = [subprocess.Popen(["nice", "-n", "19", "sh", "-c", "while :; do :; done"])
                      for _ in range(os.cpu_count() or 1)]
        return self

    def __exit__(self, *exc) -> None:  # noqa: ANN002
        for loop in self.loops:
            loop.kill()
            loop.wait()


def librdkafka_paced(broker: BrokerProcess, *, acks: int, rate: int, seconds: float,
                     consumer: bool = False, producers: int = 1) -> dict:
    """The scenario as a user runs it: confluent-kafka sending 1 KiB records at `rate` a
    second over 6 partitions with linger.ms=0 (each record in a request of its own, mostly).
    Broker CPU per Produce request, the requests counted from librdkafka's statistics. With
    `producers` > 1 the rate is shared by that many producers, each in a process and on a
    connection of its own (many applications, each at a modest rate). With `consumer`, a consumer
    reads them as they come (paced_consumer, another process) and the CPU is per request of
    either client."""
    context = multiprocessing.get_context("spawn")
    start, stop, out = context.Event(), context.Event(), context.Queue()
    if consumer:
        reader = spawn_ready(context, paced_consumer, (broker.bootstrap, start, stop, out), "the paced consumer")
    count = int(rate * seconds)
    others = [spawn_ready(context, paced_producer, (broker.bootstrap, acks, rate / producers, count // producers,
                                                    k, start, out), "a paced producer")
              for k in range(1, producers)]
    producer, errors, requests = warm_producer(broker.bootstrap, acks)
    tx0 = requests.read(producer)
    start.set()
    cpu0, started = proc_cpu_s(broker.process.pid), time.perf_counter()
    send_paced(producer, rate / producers, count - (producers - 1) * (count // producers))
    n, failed = requests.read(producer) - tx0, len(errors)
    for process in others:
        sent, lost = out.get(timeout=60)
        n, failed = n + sent, failed + lost
        process.join(60)
    cpu, wall = proc_cpu_s(broker.process.pid) - cpu0, time.perf_counter() - started
    fetches = consumed = 0
    if consumer:
        stop.set()
        fetches, consumed = out.get(timeout=60)
        reader.join(60)
    if failed:
        raise RuntimeError(f"{failed} failed deliveries" + (f", first: {errors[0]}" if errors else ""))
    return {"requests": n + fetches, "records": count, "us_per_request": cpu / max(1, n + fetches) * 1e6,
            "broker_cpu_pct": 100 * cpu / wall, "fetches": fetches, "consumed": consumed}


def start_broker(root: Path, src: str | None, profiled: Path | None = None, *,
                 canned: bool = False, layered: Path | None = None) -> BrokerProcess:
    src, _, env = (src or "").partition("::")  # PATH::KEY=VALUE,… sets the broker's environment too
    if src:
        os.environ["PYTHONPATH"] = src
    saved = dict(os.environ)
    os.environ.update(item.split("=", 1) for item in env.split(",") if item)
    broker = BrokerProcess(root, overrides={"num.partitions": "1", "log.segment.bytes": str(1 << 30)})
    if profiled is not None or canned or layered is not None:
        command = broker.command()
        assert command[1:4] == ["-m", "logbroker.cli", "serve"], command
        script = CANNED_BROKER if canned else LAYERED_BROKER if layered else PROFILED_BROKER
        broker.command = lambda: [command[0], "-c", script, str(layered or profiled), *command[3:]]
    broker.start()
    os.environ.clear()
    os.environ.update(saved)
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 0})
    for f in admin.create_topics([NewTopic(TOPIC, 1, 1), NewTopic(FETCH_TOPIC, 1, 1),
                                   NewTopic(PACED_TOPIC, 6, 1)]).values():
        f.result(30)
    # A few records to fetch: ten 100 B batches at the start of the fetch topic.
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "log_level": 0})
    for _ in range(FETCH_TOPIC_RECORDS):
        producer.produce(FETCH_TOPIC, os.urandom(100), partition=0)
        producer.flush(10)
    return broker


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="1 s per measurement instead of 3")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="breakdown by stage (cProfile, one extra broker per case)")
    parser.add_argument("--src", action="append", default=[], help="logbroker source tree, optionally PATH::KEY=VALUE,… for the broker's environment (repeatable)")
    parser.add_argument("--cases", default="", help="substring filter on case names")
    parser.add_argument("--librdkafka", action="store_true",
                        help="also the user scenario: confluent-kafka at 2,500 records/s, linger.ms=0")
    parser.add_argument("--rates", default="2500",
                        help="with --librdkafka: the paced rates, records/s, comma-separated (e.g. 1000,2500,8000)")
    parser.add_argument("--consumer", action="store_true",
                        help="with --librdkafka: also each rate at acks=1 with a consumer reading the records as they "
                             "come (µs per request of either client)")
    parser.add_argument("--producers", default="1",
                        help="with --librdkafka: how many producers share each rate, each in a process of its own, "
                             "comma-separated for several cases (e.g. 1,6)")
    parser.add_argument("--floor", action="store_true",
                        help="with --librdkafka: the same paced load against a broker that answers those Produce "
                             "requests without appending (the event loop, socket and framing alone)")
    parser.add_argument("--echo", action="store_true",
                        help="with --librdkafka: the same paced load against a minimal uvloop server answering each "
                             "Produce with a canned response (ECHO_SERVER): the floor of any Python server here")
    parser.add_argument("--awake", action="store_true",
                        help="with --librdkafka: each paced row again with the vCPUs kept from halting (KeepAwake)")
    parser.add_argument("--layers", action="store_true",
                        help="the paced Produce's CPU by layer, in situ (LAYERED_BROKER), at the first of --rates")
    parser.add_argument("--paced-only", action="store_true", help="skip the raw-socket cases")
    parser.add_argument("--keep", help="work in this directory and keep it (the profiles: profiled-N/stats)")
    args = parser.parse_args(argv)
    seconds = 1.0 if args.quick else 3.0
    srcs = args.src or [None]
    cases = [] if args.paced_only else [(n, f) for n, f in CASES if args.cases in n]
    with tempfile.TemporaryDirectory(prefix="bench-request-cost-") as tmp:
        root = Path(args.keep or tmp)
        say("## Request cost")
        for line in machine_info(root).lines():
            say(line)
        say(f"- load average: {os.getloadavg()}")
        brokers = {src: start_broker(root / f"b{i}", src) for i, src in enumerate(srcs)}
        results: dict = collections.defaultdict(list)
        frames = {name: make() for name, make in cases}
        for _ in range(args.repeat):
            for name, _make in cases:
                for load, clients, window in LOADS:
                    for src, broker in brokers.items():
                        r = measure((broker.host, broker.port), frames[name], clients=clients, window=window,
                                    seconds=seconds, pid=broker.process.pid)
                        results[(name, load, src)].append(r)
        rows = []
        for name, _ in cases:
            for load, _c, _w in LOADS:
                row = [name, load]
                for src in srcs:
                    runs = results[(name, load, src)]
                    us = median([r["us_per_request"] for r in runs])
                    row += [f"{us:.0f}", " / ".join(f"{r['us_per_request']:.0f}" for r in runs),
                            f"{median([r['req_s'] for r in runs]):,.0f}"]
                rows.append(row)
        headers = ["request", "load"]
        for src in srcs:
            tag = f" ({src})" if src else ""
            headers += [f"broker µs/request{tag}", "each run", "requests/s"]
        if cases:
            say(table(headers, rows))
        if args.librdkafka:
            rates = [int(r) for r in args.rates.split(",")]
            # Labelled columns, interleaved run by run: each tree's broker, then its canned-answer
            # broker (--floor), then the echo server (--echo).
            paced_brokers = {(src or "broker"): broker for src, broker in brokers.items()}
            floors = {}
            if args.floor:
                for i, src in enumerate(srcs):
                    floors[f"canned answer{f' ({src})' if src else ''}"] = start_broker(root / f"canned{i}", src,
                                                                                     canned=True)
            if args.echo:
                floors["echo"] = EchoProcess(root / "echo", srcs[-1])
            paced_brokers.update(floors)
            loads = [(acks, False) for acks in (1, -1)] + ([(1, True)] if args.consumer else [])
            producer_counts = [int(n) for n in args.producers.split(",")]
            paced: dict = collections.defaultdict(list)
            cells = [(rate, producers, acks, with_consumer, awake) for rate in rates for producers in producer_counts
                     for acks, with_consumer in loads for awake in ((False, True) if args.awake else (False,))]
            for _ in range(args.repeat):
                for cell in cells:
                    rate, producers, acks, with_consumer, awake = cell
                    with KeepAwake() if awake else contextlib.nullcontext():
                        for label, broker in paced_brokers.items():
                            if with_consumer and label in floors:
                                continue  # they answer Produce only
                            paced[(cell, label)].append(librdkafka_paced(
                                broker, acks=acks, rate=rate, seconds=seconds + 1, consumer=with_consumer,
                                producers=producers))
            rows = []
            for cell in cells:
                rate, producers, acks, with_consumer, awake = cell
                who = "confluent-kafka" if producers == 1 else f"{producers} confluent-kafka producers"
                row = [f"{who}, 1 KiB at {rate:,}/s, 6 partitions, linger.ms=0, "
                       f"acks={'all' if acks < 0 else 1}" + (", and a consumer" if with_consumer else "")
                       + (", vCPUs kept awake" if awake else "")]
                for label in paced_brokers:
                    runs = paced[(cell, label)]
                    if not runs:
                        row += [""] * (5 if args.consumer else 4)
                        continue
                    row += [f"{median([r['us_per_request'] for r in runs]):.0f}",
                            " / ".join(f"{r['us_per_request']:.0f}" for r in runs),
                            f"{median([r['records'] / max(1, r['requests'] - r['fetches']) for r in runs]):.2f}"]
                    if args.consumer:
                        row.append(f"{median([r['fetches'] for r in runs]) / (seconds + 1):,.0f}"
                                   if with_consumer else "")
                    row.append(f"{median([r['broker_cpu_pct'] for r in runs]):.0f}%")
                rows.append(row)
            headers = ["load"]
            for label in paced_brokers:
                headers += [f"µs/request ({label})", "each run", "records/produce"]
                headers += ["fetches/s", "CPU"] if args.consumer else ["CPU"]
            say(table(headers, rows))
            for floor in floors.values():
                floor.stop()
        if args.layers:
            say("\n### The paced Produce by layer: µs of thread CPU per request, in situ (acks=1; each "
                "layer includes those below it)")
            rate = int(args.rates.split(",")[0])
            layered = {src: start_broker(root / f"layered{i}", src, layered=root / f"layers{i}.json")
                       for i, src in enumerate(srcs)}
            by_layer: dict = collections.defaultdict(list)
            for _ in range(args.repeat):
                for i, (src, broker) in enumerate(layered.items()):
                    for label, us in layers_paced(broker, root / f"layers{i}.json", rate=rate,
                                                  seconds=seconds + 2).items():
                        by_layer[(label, src)].append(us)
            labels = list(dict.fromkeys(label for label, _ in by_layer))
            say(table(["layer"] + [f"µs ({src or 'broker'})" for src in srcs],
                      [[label] + [" / ".join(f"{us:.1f}" for us in by_layer[(label, src)]) for src in srcs]
                       for label in labels]))
            for broker in layered.values():
                broker.stop()
        say(f"- load average after: {os.getloadavg()}")
        if args.profile:
            say("\n### Breakdown: µs of broker CPU per request by stage (cProfile, CPU clock; ping-pong)")
            header = None
            prow = []
            load, clients, window = LOADS[0]
            for name, _ in cases:
                base = root / f"profiled-{len(prow)}"
                broker = start_broker(base, srcs[-1], profiled=base / "stats")
                r = measure((broker.host, broker.port), frames[name], clients=clients, window=window,
                            seconds=seconds, pid=broker.process.pid, profile=base / "stats")
                broker.stop()
                plain = median([x["us_per_request"] for x in results[(name, load, srcs[-1])]])
                stages = breakdown(base / "stats", r["requests"], plain)
                header = header or [s for s, _ in STAGES] + ["other", "(of which syscalls)"]
                prow.append([name, f"{plain:.0f}", f"{r['us_per_request']:.0f}"]
                            + [f"{stages.get(s, 0.0):.1f}" for s in header])
            say(table(["request", "µs (unprofiled)", "µs under cProfile"] + header, prow))
        for broker in brokers.values():
            broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
