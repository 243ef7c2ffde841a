"""What holds up a broker's event loop, and for how long: a `logbroker serve` started through this
module records, until it exits, into a JSON file:

- **loop lag**: a timer every 1 ms on the event loop; each tick that comes more than `--lag-ms`
  (2 ms) late is a *stall*, with what the loop thread did meanwhile, from the kernel's
  /proc/thread-self/schedstat and its CPU clock: **on CPU** (it ran: Python or a syscall's kernel
  work on the loop), **waiting for a CPU** (runnable, on the run queue: the machine was busy), and
  **off CPU** (the rest: blocked in a syscall, a page fault's I/O, the GIL held by a worker
  thread, or sleeping in epoll — the 1 ms between ticks is idle sleep by design);
- **timed calls**: each call into the broker from the loop that took ≥ 1 ms (a read's requests:
  `KafkaConnection.buffer_updated`, `data_received` in trees before it; a background job's end: `ReplicaManager._background_flushed`),
  every roll and its parts (`Log._roll`, `LogSegment.on_become_inactive`, the new segment's files,
  the producer snapshot), the worker-thread jobs (the rolled segment's flush, the writeback step,
  the periodic retention/flush/checkpoint rounds) with their thread;
- **garbage collections** (gc.callbacks): each one's generation and duration;
- with `--stacks`, the loop thread's Python stack whenever a tick is 3 ms overdue (a watchdog
  thread; it gets the GIL only when the loop releases it or after the 5 ms switch interval, so
  short stalls in pure Python are missed — the stacks say *where* long ones are).

Times are CLOCK_MONOTONIC seconds (time.perf_counter), comparable with the client's in another
process. `--canned TOPIC` answers Produce requests for TOPIC from their header alone (nothing
appended, as bench_request_cost.py's CANNED_BROKER): the loop, socket and framing at the same rate,
without storage — the floor of a produce's latency on this machine.

    python bench/loop_stalls.py OUT.json [--canned TOPIC] [--stacks] -- serve --override ...

bench_roll_latency.py's `--stalls` runs its brokers this way and summarises the file per case.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import functools
import gc
import json
import os
import runpy
import sys
import threading
import time

clock = time.perf_counter
TICK_S = 0.001
SLOW_CALL_S = 0.001


class Recorder:
    def __init__(self, out: str, lag_ms: float, stacks: bool) -> None:
        self.out, self.lag_s, self.want_stacks = out, lag_ms / 1000, stacks
        self.stalls: list[tuple] = []  # (start, interval, lag, on_cpu, waiting_for_cpu)
        self.calls: list[tuple] = []  # (name, start, wall, cpu, thread name)
        self.gcs: list[tuple] = []  # (generation, start, wall)
        self.stacks: list[tuple] = []  # (time, overdue, [frames])
        self.lag_hist: dict[int, int] = {}  # lag rounded down to ms -> ticks
        self.counts: dict[str, int] = {}
        self._gc_start = 0.0
        self._heartbeat = clock()
        self._loop_ident = 0

    # --- loop lag --------------------------------------------------------------------------
    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop_ident = threading.get_ident()
        self._schedstat = os.open("/proc/thread-self/schedstat", os.O_RDONLY)  # this thread's
        self._last = (clock(), *self._sched())
        loop.call_later(TICK_S, self._tick, loop, clock() + TICK_S)
        if self.want_stacks:
            threading.Thread(target=self._watch, name="stall-watchdog", daemon=True).start()

    def _sched(self) -> tuple[int, int]:
        on_cpu, waiting, _ = os.pread(self._schedstat, 100, 0).split()
        return int(on_cpu), int(waiting)

    def _tick(self, loop, due: float) -> None:
        now = clock()
        self._heartbeat = now
        lag = now - due
        bucket = int(lag * 1000)
        self.lag_hist[bucket] = self.lag_hist.get(bucket, 0) + 1
        on_cpu, waiting = self._sched()
        if lag > self.lag_s:
            t0, c0, w0 = self._last
            self.stalls.append((t0, now - t0, lag, (on_cpu - c0) / 1e9, (waiting - w0) / 1e9))
        self._last = (now, on_cpu, waiting)
        loop.call_later(TICK_S, self._tick, loop, clock() + TICK_S)

    def _watch(self) -> None:
        seen = 0.0
        while True:
            time.sleep(0.001)
            beat = self._heartbeat
            overdue = clock() - beat - TICK_S
            if overdue > 0.003 and beat != seen:
                seen = beat
                frame = sys._current_frames().get(self._loop_ident)
                frames = []
                while frame is not None and len(frames) < 14:
                    code = frame.f_code
                    frames.append(f"{code.co_filename.rsplit('/', 2)[-1]}:{code.co_name}:{frame.f_lineno}")
                    frame = frame.f_back
                self.stacks.append((clock(), overdue, frames))

    # --- timed calls -----------------------------------------------------------------------
    def wrap(self, owner, name: str, label: str, *, always: bool = False) -> None:
        fn = getattr(owner, name)
        record, counts = self.calls.append, self.counts
        counts[label] = 0

        @functools.wraps(fn)
        def timed(*args, **kwargs):
            t0, c0 = clock(), time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                wall = clock() - t0
                counts[label] += 1
                if always or wall >= SLOW_CALL_S:
                    record((label, t0, wall, time.thread_time() - c0, threading.current_thread().name))
        setattr(owner, name, timed)

    # --- gc ----------------------------------------------------------------------------------
    def on_gc(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._gc_start = clock()
        else:
            self.gcs.append((info["generation"], self._gc_start, clock() - self._gc_start))

    def dump(self) -> None:
        with open(self.out, "w") as f:
            json.dump({"stalls": self.stalls, "calls": self.calls, "gcs": self.gcs, "stacks": self.stacks,
                       "lag_hist": self.lag_hist, "counts": self.counts, "tick_s": TICK_S,
                       "gc_threshold": gc.get_threshold(), "gc_frozen": gc.get_freeze_count()}, f)


def install(recorder: Recorder, canned_topic: str | None) -> None:
    from logbroker.cli import run_broker
    from logbroker.replication.replica_manager import ReplicaManager
    from logbroker.server.network import KafkaConnection
    from logbroker.storage import log_segment, producer_state
    from logbroker.storage.abstract_index import AbstractIndex
    from logbroker.storage.file_records import FileRecords
    from logbroker.storage.local_log import LocalLog
    from logbroker.storage.log import Log
    from logbroker.storage.log_manager import LogManager

    wrap = recorder.wrap
    # a read's requests: buffer_updated since the connection is a BufferedProtocol, data_received before
    wrap(KafkaConnection, "buffer_updated" if hasattr(KafkaConnection, "buffer_updated") else "data_received",
         "a read")
    wrap(ReplicaManager, "_background_flushed", "background job done (loop)")
    wrap(Log, "append_as_leader", "append")
    wrap(AbstractIndex, "ensure_room_for_entry", "index reservation")
    wrap(Log, "_roll", "roll", always=True)
    wrap(LocalLog, "roll", "roll: segments", always=True)
    wrap(log_segment.LogSegment, "on_become_inactive", "roll: old segment trimmed", always=True)
    wrap(LocalLog, "add_segment", "roll: segment added", always=True)
    wrap(AbstractIndex, "trim_to_valid_size", "index trim", always=True)
    wrap(FileRecords, "trim", "log trim", always=True)
    wrap(producer_state.ProducerStateManager, "take_snapshot", "producer snapshot", always=True)
    wrap(Log, "flush_if_needed", "flush (worker)", always=True)
    wrap(Log, "start_writeback", "writeback step (worker)", always=True)
    for name in ("cleanup_logs", "flush_dirty_logs", "checkpoint_recovery_points", "checkpoint_log_start_offsets",
                 "checkpoint_high_watermarks"):
        wrap(LogManager, name, f"periodic: {name}", always=True)
    import logbroker.storage.local_log as local_log_module

    local_log_module.open_segment = _timed_function(recorder, local_log_module.open_segment, "roll: new segment opened")
    gc.callbacks.append(recorder.on_gc)

    real_run = run_broker._run

    async def _run(config, started):
        recorder.start(asyncio.get_running_loop())
        return await real_run(config, started)

    run_broker._run = _run
    if canned_topic is not None:
        canned_produce(canned_topic)
    atexit.register(recorder.dump)


def _timed_function(recorder: Recorder, fn, label: str):
    holder = type("holder", (), {"fn": staticmethod(fn)})
    recorder.wrap(holder, "fn", label, always=True)
    return holder.fn


def canned_produce(topic: str) -> None:
    """Answer every Produce for `topic` from its header alone: nothing decoded past the topic
    names, nothing appended."""
    from logbroker.protocol import codec
    from logbroker.protocol.responses.produce import ProducePartitionResult, encode_produce_response
    from logbroker.server import dispatch

    real = dispatch.Dispatcher.__call__

    def canned(self, frame, connection):
        if frame[0] != 0 or frame[1] != 0:  # api key 0: Produce
            return real(self, frame, connection)
        request = codec.decode_request(frame)
        topics = request.body.topic_data
        if topics[0].name != topic:
            return real(self, frame, connection)
        return [encode_produce_response(request.api_version, request.correlation_id, [
            (t.name, [ProducePartitionResult(p.index, 0, 0, -1, 0) for p in t.partition_data]) for t in topics])]

    dispatch.Dispatcher.__call__ = canned


def main() -> None:
    argv = sys.argv[1:]
    split = argv.index("--")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--canned", default=None, metavar="TOPIC")
    parser.add_argument("--stacks", action="store_true")
    parser.add_argument("--lag-ms", type=float, default=2.0)
    args = parser.parse_args(argv[:split])
    install(Recorder(args.out, args.lag_ms, args.stacks), args.canned)
    sys.argv = ["logbroker", *argv[split + 1:]]
    runpy.run_module("logbroker.cli", run_name="__main__")


if __name__ == "__main__":
    main()


# --- reading a recording ----------------------------------------------------------------------

def summarize(path: str, start: float, rolls_at: list[float], worst: list[tuple[float, float]], *,
              window: tuple[float, float], near_s: float = 0.8) -> dict:
    """What a recording says about the `window` (seconds after `start`, the client's perf_counter
    origin): the stalls (> the lag threshold) split into on CPU / waiting for a CPU / off CPU,
    those within `near_s` after a roll apart; the loop's slow calls and collections by kind; and,
    for each of the client's `worst` latencies ((delivered at, latency) in s), the stall time
    inside it."""
    with open(path) as f:
        rec = json.load(f)
    tick = rec["tick_s"]
    lo, hi = window
    stalls = [(t - start, interval, lag, cpu, wait, max(0.0, interval - tick - cpu - wait))
              for t, interval, lag, cpu, wait in rec["stalls"] if lo <= t - start <= hi]
    rec["calls"] = [c for c in rec["calls"] if lo <= c[1] - start <= hi]
    rec["gcs"] = [g for g in rec["gcs"] if lo <= g[1] - start <= hi]
    rec["stacks"] = [s for s in rec["stacks"] if lo <= s[0] - start <= hi]

    def near(t: float) -> bool:
        return any(r - 0.05 <= t <= r + near_s for r in rolls_at)

    def split(rows):
        return {"n": len(rows), "ms": round(1000 * sum(r[1] - tick for r in rows), 1),
                "on_cpu_ms": round(1000 * sum(r[3] for r in rows), 1),
                "waiting_ms": round(1000 * sum(r[4] for r in rows), 1),
                "off_cpu_ms": round(1000 * sum(r[5] for r in rows), 1),
                "max_ms": round(1000 * max((r[1] - tick for r in rows), default=0.0), 1)}

    calls = [(label, t - start, wall, cpu, thread) for label, t, wall, cpu, thread in rec["calls"]]
    on_loop: dict[str, list] = {}
    for label, t, wall, cpu, thread in calls:
        key = label if thread == "MainThread" else f"{label} [{thread.split('_')[0]}]"
        on_loop.setdefault(key, []).append((wall, cpu))
    gcs: dict[int, list] = {}
    for gen, t, wall in rec["gcs"]:
        gcs.setdefault(gen, []).append(wall)

    def overlapping(t0: float, t1: float) -> list[str]:
        what = [f"{label} {wall * 1000:.1f}" for label, t, wall, _, thread in calls
                if t < t1 and t + wall > t0 and wall >= 0.0005]
        what += [f"gc{gen} {wall * 1000:.1f}" for gen, t, wall in rec["gcs"]
                 if t - start < t1 and t - start + wall > t0 and wall >= 0.0005]
        return what

    top = sorted(stalls, key=lambda s: -s[1])[:8]
    return {
        "stalls_near_roll": split([s for s in stalls if near(s[0])]),
        "stalls_elsewhere": split([s for s in stalls if not near(s[0])]),
        "top_stalls": [(round(t, 3), round(1000 * (i - tick), 1), round(1000 * c, 1), round(1000 * w, 1),
                        round(1000 * o, 1), overlapping(t, t + i)) for t, i, _, c, w, o in top],
        "slow_calls": {k: (len(v), round(1000 * max(w for w, _ in v), 1), round(1000 * max(c for _, c in v), 1),
                           sum(1 for w, _ in v if w >= 0.002)) for k, v in sorted(on_loop.items())},
        "call_counts": rec["counts"],
        "gc": {gen: (len(v), round(1000 * sum(v), 1), round(1000 * max(v), 2)) for gen, v in sorted(gcs.items())},
        "worst_latencies": [(round(t, 3), round(lat * 1000, 1),
                             round(1000 * sum(max(0.0, min(s[0] + s[1], t) - max(s[0], t - lat)) for s in stalls), 1))
                            for t, lat in worst],
        "lag_hist": rec["lag_hist"],
        "stacks": [(round(t - start, 3), round(o * 1000, 1), frames[:8]) for t, o, frames in rec["stacks"]][:20],
    }
