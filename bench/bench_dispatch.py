"""The broker's Python per request, without the event loop or the socket.

A Broker runs in this process; each request frame (the same frames as bench_request_cost.py) is
handed straight to its dispatcher, as `KafkaConnection.data_received` would, and the thread's CPU
time per call is measured. That is the request's own Python — decode, handler, log append with
its pwrite, encode — with nothing else on the machine in the number, so it is steady enough to
compare small changes on a busy machine, where bench_request_cost.py's end-to-end figures move by
±10%.

Two figures per request:
- warm: calls back to back, as under a pipelining client (caches hold the working set);
- cold: `--pollute MIB` of memory is written between calls, evicting the caches as the client and
  the kernel do between two requests of a client that sends one at a time (a producer with
  linger.ms=0 at a modest rate): the same Python then costs ~1.8x. This is why the paced
  confluent-kafka scenario costs more per request than the ping-pong rows.

Besides the fixed frames, a consumer caught up on 6 partitions (read_committed): a fetch that
finds one new record, and one that waits in the purgatory until an append answers it (the
append included). The garbage collector is frozen after start, as `logbroker serve` does, so a
full collection of the broker's objects does not land in a measured call.

`--steps` counts instead of timing: Python opcodes executed and calls made per request
(sys.settrace / sys.setprofile), the same on a busy machine as on a quiet one. `--functions N`
adds, for each request, the N functions that execute the most of those opcodes themselves (the
tree on PYTHONPATH only): where to look for a request's Python.

    PYTHONPATH=$PWD/src .venv/bin/python bench/bench_dispatch.py [--src A --src B] [--count 10000] [--steps]
    PYTHONPATH=$PWD/src .venv/bin/python bench/bench_dispatch.py --steps --functions 25
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


class _Connection:
    """What the dispatcher reads of a connection (a PLAINTEXT listener, no SASL gate)."""

    peer = "127.0.0.1:1"
    auth_gate = False
    sasl = None
    listener_name = "PLAINTEXT"

    def __init__(self, principal) -> None:  # noqa: ANN001
        self.principal = principal

    def mute_for(self, ms: int) -> None:
        pass


def _cases() -> list[tuple[str, bytes]]:
    sys.path.insert(0, HERE)
    import bench_request_cost as rc

    return [("produce 1 × 1 KiB, acks=1", rc.produce_frame(acks=1, records=1, value_bytes=1024)),
            ("produce 1 × 1 KiB, acks=all", rc.produce_frame(acks=-1, records=1, value_bytes=1024)),
            ("produce 10 × 100 B, acks=1", rc.produce_frame(acks=1, records=10, value_bytes=100)),
            ("produce 63 × 1 KiB, acks=1", rc.produce_frame(acks=1, records=63, value_bytes=1024)),
            ("fetch, a few records", rc.fetch_frame(offset=0, max_wait_ms=500, partition_max_bytes=4096))]


def _steps(call, n: int = 50,
           by_function: collections.Counter | None = None) -> tuple[float, float, float]:
    """(Python opcodes executed, Python calls, C calls) per `call()`: counted with sys.settrace
    and sys.setprofile, so the same on a busy machine as on a quiet one — the measure to compare
    small changes by while the clock is too noisy to. `by_function`, if given, also gets each
    code object's own opcodes per call, keyed by (qualified name, file)."""
    counts = [0, 0, 0]

    def trace(frame, event, arg):  # noqa: ANN001, ANN202
        frame.f_trace_opcodes, frame.f_trace_lines = True, False
        if event == "opcode":
            counts[0] += 1
            if by_function is not None:
                code = frame.f_code
                by_function[code.co_qualname, code.co_filename] += 1 / n
        return trace

    def profile(frame, event, arg):  # noqa: ANN001, ANN202
        if event == "call":
            counts[1] += 1
        elif event == "c_call":
            counts[2] += 1

    for _ in range(5):
        call()
    sys.settrace(trace)
    sys.setprofile(profile)
    try:
        for _ in range(n):
            call()
    finally:
        sys.settrace(None)
        sys.setprofile(None)
    return counts[0] / n, counts[1] / n, counts[2] / n


async def _measure(count: int, pollute_mib: int, repeat: int, steps: bool = False,
                   functions: dict[str, collections.Counter] | None = None,
                   ) -> dict[str, tuple[float, ...]]:
    sys.path.insert(0, HERE)
    import bench_request_cost as rc

    from logbroker.security.principal import ANONYMOUS
    from logbroker.server.broker import Broker
    from logbroker.server.config import KafkaConfig

    data = tempfile.mkdtemp(prefix="bench-dispatch-")
    try:
        config = KafkaConfig.from_props({"log.dirs": data, "listeners": "PLAINTEXT://127.0.0.1:0",
                                         "broker.id": 0, "log.segment.bytes": str(1 << 30)})
        broker = Broker(config)
        await broker.start()
        for topic in (rc.TOPIC, rc.FETCH_TOPIC):
            broker.create_topic(topic, num_partitions=1, replication_factor=1, configs={})
        await asyncio.sleep(0.2)
        handler, connection = broker.server.handler, _Connection(ANONYMOUS)
        saved, rc.TOPIC = rc.TOPIC, rc.FETCH_TOPIC  # ten small batches for the fetch case to read
        seed = rc.produce_frame(acks=1, records=1, value_bytes=100)
        rc.TOPIC = saved
        for _ in range(10):
            handler(memoryview(bytes(seed[4:])), connection)
        junk = bytearray(pollute_mib << 20)
        zeros = bytes(len(junk) // 64)
        gc.collect()
        gc.freeze()  # as `logbroker serve` does once started: no collection walks what start built
        results = {}
        if steps:
            for name, frame in _cases():
                body = bytes(frame[4:])
                by_function = None if functions is None else functions.setdefault(name, collections.Counter())
                results[name] = _steps(lambda: handler(memoryview(bytes(body)), connection),
                                       by_function=by_function)
            await broker.shutdown()
            return results
        for name, frame in _cases():
            body = bytes(frame[4:])
            n = count // 8 if "63" in name else count  # the big batches: a smaller log
            for _ in range(200):
                handler(memoryview(bytes(body)), connection)
            warm, cold = [], []
            for _ in range(repeat):
                frames = [memoryview(bytes(body)) for _ in range(n)]
                start = time.thread_time_ns()
                for f in frames:
                    handler(f, connection)
                warm.append((time.thread_time_ns() - start) / n / 1000)
                frames = [memoryview(bytes(body)) for _ in range(n // 4)]
                spent = 0
                for f in frames:
                    junk[::64] = zeros
                    start = time.thread_time_ns()
                    handler(f, connection)
                    spent += time.thread_time_ns() - start
                cold.append(spent / len(frames) / 1000)
            results[name] = (min(warm), statistics.median(cold))
        results.update(await _consumer_at_the_end(broker, handler, connection, count // 4, repeat, junk, zeros))
        await broker.shutdown()
        return results
    finally:
        shutil.rmtree(data, ignore_errors=True)


CONSUMED_TOPIC = "dispatch-6p"


async def _consumer_at_the_end(broker, handler, connection, n: int, repeat: int, junk, zeros) -> dict:
    """What a consumer caught up on 6 partitions costs (read_committed, as librdkafka's default):
    a fetch finding one new record (appended untimed before it), and a fetch that finds nothing,
    waits, and is answered when a record is appended (the append's own cost included). Each
    call's frame names the partitions' current ends, so it is built untimed before the call."""
    import datetime

    from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
    from kio.schema.types import TopicName
    from kio.static.primitive import i32, i64

    from logbroker.client import encode_request
    from logbroker.records.builder import build_batch
    from logbroker.types import TopicPartition

    broker.create_topic(CONSUMED_TOPIC, num_partitions=6, replication_factor=1, configs={})
    await asyncio.sleep(0.2)
    replicas = broker.replica_manager
    logs = [replicas.partitions[TopicPartition(CONSUMED_TOPIC, p)].log for p in range(6)]
    record = build_batch([(None, os.urandom(1024))])

    def append() -> None:
        replicas.append_records_now(timeout_ms=1000, required_acks=1,
                                    entries={TopicPartition(CONSUMED_TOPIC, 0): bytearray(record)})

    def fetch_at_the_ends() -> memoryview:
        body = FetchRequest(
            replica_id=i32(-1), max_wait=datetime.timedelta(milliseconds=500), min_bytes=i32(1),
            max_bytes=i32(1 << 20), isolation_level=1, session_id=i32(0), session_epoch=i32(-1),
            topics=(FetchTopic(topic=TopicName(CONSUMED_TOPIC), partitions=tuple(FetchPartition(
                partition=i32(p), current_leader_epoch=i32(-1), fetch_offset=i64(log.log_end_offset),
                last_fetched_epoch=i32(-1), log_start_offset=i64(-1), partition_max_bytes=i32(1 << 20))
                for p, log in enumerate(logs))),),
            forgotten_topics_data=(), rack_id="")
        return memoryview(bytes(encode_request(body, correlation_id=1, client_id="bench")[4:]))

    async def one_new_record(pollute: bool) -> int:
        frame = fetch_at_the_ends()
        logs[0].append_as_leader(record, leader_epoch=0)  # not through the replica manager: no wake-up
        logs[0].update_high_watermark(logs[0].log_end_offset)
        if pollute:
            junk[::64] = zeros
        start = time.thread_time_ns()
        handler(frame, connection)
        return time.thread_time_ns() - start

    async def waits_then_answered(pollute: bool) -> int:
        frame = fetch_at_the_ends()
        if pollute:
            junk[::64] = zeros
        start = time.thread_time_ns()
        answer = asyncio.ensure_future(handler(frame, connection))
        await asyncio.sleep(0)  # parked in the purgatory
        append()
        await answer
        return time.thread_time_ns() - start

    gc.collect()
    gc.freeze()
    results = {}
    for name, case in (("fetch 6 partitions, 1 new record (read_committed)", one_new_record),
                       ("fetch 6 partitions that waits, answered by an append", waits_then_answered)):
        for _ in range(100):
            await case(False)
        warm, cold = [], []
        for _ in range(repeat):
            warm.append(sum([await case(False) for _ in range(n)]) / n / 1000)
            cold.append(sum([await case(True) for _ in range(n // 4)]) / (n // 4) / 1000)
        results[name] = (min(warm), statistics.median(cold))
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--src", action="append", default=[], help="logbroker source tree (repeatable)")
    parser.add_argument("--count", type=int, default=10000, help="requests per warm run")
    parser.add_argument("--pollute", type=int, default=8, help="MiB written between cold calls")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--steps", action="store_true",
                        help="count Python opcodes and calls per request instead of timing (deterministic)")
    parser.add_argument("--functions", type=int, default=0, metavar="N",
                        help="with --steps: each request's N functions by own opcodes (PYTHONPATH's tree)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.functions and not (args.steps and not args.src):
        parser.error("--functions goes with --steps and no --src: it profiles the tree on PYTHONPATH")
    if args.child or not args.src:
        functions: dict[str, collections.Counter] | None = {} if args.functions else None
        results = asyncio.run(_measure(args.count, args.pollute, args.repeat, args.steps, functions))
        for name, values in results.items():
            print("\t".join([name, *(f"{v:.1f}" for v in values)]))
        for name, counter in (functions or {}).items():
            print(f"\n{name}: own opcodes per request, the top {args.functions}")
            for (function, filename), opcodes in counter.most_common(args.functions):
                print(f"{opcodes:8.1f}  {function}  ({filename.split('/src/')[-1]})")
        return 0
    rows: dict[str, list[str]] = {}
    for src in args.src:  # one process per tree, each importing its own logbroker
        out = subprocess.run([sys.executable, __file__, "--child", "--count", str(args.count),
                              "--pollute", str(args.pollute), "--repeat", str(args.repeat),
                              *(["--steps"] if args.steps else [])],
                             env={**os.environ, "PYTHONPATH": src}, capture_output=True, text=True, check=True)
        for line in out.stdout.splitlines():
            name, *values = line.split("\t")
            rows.setdefault(name, []).extend(values)
    print(f"- load average: {os.getloadavg()}")
    columns = ("opcodes", "Python calls", "C calls") if args.steps else ("warm µs", "cold µs")
    header = "| request | " + " | ".join(f"{c} ({s})" for s in args.src for c in columns) + " |"
    print(header)
    print("|---|" + "---:|" * (len(columns) * len(args.src)))
    for name, values in rows.items():
        print(f"| {name} | " + " | ".join(values) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
