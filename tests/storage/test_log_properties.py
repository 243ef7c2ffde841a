"""Property: whatever sequence of appends (leader and follower), rolls, flushes, reopenings
(clean and unclean), truncations and DeleteRecords a log goes through, it reads back exactly
the batches appended (less the truncated ones, from the log start on), and a read at any offset
returns the batch that holds it."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logbroker.clock import ManualClock
from logbroker.records.batch import read_header
from logbroker.records.builder import build_batch
from logbroker.records.record_batch import iter_batches
from logbroker.storage.log import Log
from logbroker.storage.log_config import LogConfig

NOW = 1_700_000_000_000
CONFIG = LogConfig.defaults().with_overrides({
    "segment.bytes": 800, "index.interval.bytes": 100, "segment.index.bytes": 240,
    "file.delete.delay.ms": 0})

append = st.tuples(st.just("append"), st.integers(1, 5), st.integers(0, 100), st.integers(0, 3))
follower = st.tuples(st.just("follower"), st.lists(st.integers(1, 4), min_size=1, max_size=4),
                     st.integers(0, 60))
ops = st.lists(st.one_of(
    append, append, append, follower,
    st.just(("roll",)), st.just(("flush",)),
    st.tuples(st.just("reopen"), st.booleans()),
    st.tuples(st.just("truncate"), st.floats(0, 1)),
    st.tuples(st.just("delete_records"), st.floats(0, 1)),
), max_size=30)


class Model:
    """The batches the log must hold, as stored (offsets and epochs patched)."""

    def __init__(self) -> None:
        self.batches: list[bytes] = []
        self.log_start = 0
        self.empty_end = 0  # the log end offset while no batch is held

    @property
    def next_offset(self) -> int:
        if not self.batches:
            return self.empty_end
        return read_header(self.batches[-1]).next_offset

    def truncate(self, offset: int, segment_bases: list[int]) -> None:
        """Kafka's rule: batches holding offsets >= `offset` go; the log then ends after the
        last batch kept, or at the base of the segment the offset falls in; below the first
        segment the log restarts empty at `offset`."""
        if segment_bases[0] > offset:
            self.batches, self.empty_end, self.log_start = [], offset, offset
            return
        floor_base = max(b for b in segment_bases if b <= offset)
        self.batches = [b for b in self.batches if read_header(b).last_offset < offset]
        if not self.batches:
            self.empty_end = floor_base
        self.log_start = min(self.log_start, self.next_offset)

    def visible(self) -> list[bytes]:
        return [b for b in self.batches if read_header(b).last_offset >= self.log_start]


def read_everything(log: Log) -> list[bytes]:
    out = []
    offset = log.log_start_offset
    while True:
        info = log.read(offset, max_bytes=1000)
        if info.region is None:
            return out
        data = os.pread(info.region.fd, info.region.size, info.region.position)
        last = None
        for position, header in iter_batches(data):
            out.append(data[position:position + header.size_in_bytes])
            last = header
        offset = last.next_offset


def check(log: Log, model: Model) -> None:
    assert log.log_end_offset == model.next_offset
    assert log.log_start_offset == model.log_start
    assert read_everything(log) == model.visible()
    for batch in model.visible():
        header = read_header(batch)
        for offset in {max(header.base_offset, model.log_start), header.last_offset}:
            info = log.read(offset, max_bytes=1)
            got = os.pread(info.region.fd, info.region.size, info.region.position)
            assert got == batch, f"lookup of offset {offset}"
    bases = [s.base_offset for s in log.segments]
    assert bases == sorted(bases) and len(set(bases)) == len(bases)
    assert log.log_start_offset <= log.high_watermark <= log.log_end_offset
    assert log.recovery_point <= log.log_end_offset


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_log_reads_back_what_was_appended(operations):
    directory = Path(tempfile.mkdtemp()) / "prop-0"
    clock = ManualClock(NOW)
    log = Log.open(directory, CONFIG, clock=clock)
    model = Model()
    try:
        for op in operations:
            clock.advance(1000)
            kind = op[0]
            if kind == "append":
                _, n, size, epoch = op
                buf = bytearray(build_batch([(b"k", b"x" * size)] * n, now_ms=clock.time_ms()))
                log.append_as_leader(buf, leader_epoch=epoch)
                model.batches.append(bytes(buf))
            elif kind == "follower":
                _, counts, size = op
                data = bytearray()
                offset = model.next_offset
                for n in counts:
                    data += build_batch([(b"f", b"y" * size)] * n, base_offset=offset,
                                        partition_leader_epoch=5, now_ms=clock.time_ms())
                    offset += n
                log.append_as_follower(data)
                model.batches.extend(bytes(b[1]) for b in _split(data))
            elif kind == "roll":
                log.roll()
            elif kind == "flush":
                log.flush()
            elif kind == "reopen":
                clean = op[1]
                recovery_point, log_start, hw = log.recovery_point, log.log_start_offset, log.high_watermark
                if clean:
                    log.flush()
                    log.close()
                    recovery_point = log.recovery_point
                else:
                    log.close_handles()  # a crash: nothing trimmed, nothing flushed
                log = Log.open(directory, CONFIG, clock=clock, recovery_point=recovery_point,
                               log_start_offset=log_start, high_watermark=hw, had_clean_shutdown=clean)
            elif kind == "truncate":
                target = int(op[1] * model.next_offset)
                bases = [seg.base_offset for seg in log.segments]
                log.truncate_to(target)
                if target < model.next_offset:
                    model.truncate(target, bases)
            elif kind == "delete_records":
                log.update_high_watermark(log.log_end_offset)
                target = model.log_start + int(op[1] * (model.next_offset - model.log_start))
                log.maybe_increment_log_start_offset(target)
                model.log_start = max(model.log_start, target)
            check(log, model)
    finally:
        log.close_handles()
        shutil.rmtree(directory.parent, ignore_errors=True)


def _split(data: bytearray):
    for position, header in iter_batches(data):
        yield header, data[position:position + header.size_in_bytes]
