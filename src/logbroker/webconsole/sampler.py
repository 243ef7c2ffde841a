"""Throughput and lag over time, sampled in one background thread.

Kafka has no "messages per second" request; a console derives it from end offsets: every
`interval_s` the sampler asks for the end offset of every partition (one ListOffsets round) and
keeps each topic's sum. Rates are differences between samples, so the first number appears one
interval after start. Lag is sampled the same way, but only for the groups someone looked at in
the last WATCH_S seconds, since describing every group every few seconds would cost a cluster
with many groups more than the page is worth.

The samples are kept in bounded deques (`history` samples), read by the web handlers under
`_lock`; `interval_s` and `history` bound the memory to O(topics × history).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass

log = logging.getLogger("logbroker.webconsole")

WATCH_S = 600.0


@dataclass(frozen=True, slots=True)
class Sample:
    at_s: float  # epoch seconds
    end_offsets: dict[str, int]  # topic → sum of its partitions' end offsets


class Sampler:
    def __init__(self, cluster, *, interval_s: float = 5.0, history: int = 120) -> None:
        self.cluster = cluster
        self.interval_s = interval_s
        self._samples: deque[Sample] = deque(maxlen=history)
        self._lag: dict[str, deque[tuple[float, int]]] = {}
        self._watched: dict[str, float] = {}  # group → when it was last viewed (monotonic)
        self._history = history
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="console-sampler", daemon=True)
        self.last_error: str | None = None

    def start(self) -> Sampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self.interval_s + 15)

    def _run(self) -> None:
        self.cluster.warm_up()
        while not self._stop.is_set():
            try:
                self.sample_once()
                self.last_error = None
            except Exception as e:  # noqa: BLE001 — keep sampling; the page shows the error
                self.last_error = str(e)
                log.debug("sampling failed: %s", e)
            self._stop.wait(self.interval_s)

    def sample_once(self) -> None:
        metadata = self.cluster.metadata()
        partitions = [(t, p) for t, meta in metadata.topics.items() for p in meta.partitions]
        ends = self._ends(partitions)
        sums: dict[str, int] = {}
        for (topic, _), offset in ends.items():
            sums[topic] = sums.get(topic, 0) + offset
        now = time.time()
        with self._lock:
            self._samples.append(Sample(now, sums))
            cutoff = time.monotonic() - WATCH_S
            watched = [g for g, at in self._watched.items() if at >= cutoff]
        for group_id in watched:
            group = self.cluster.group(group_id)
            if group is None:
                continue
            with self._lock:
                series = self._lag.setdefault(group_id, deque(maxlen=self._history))
                series.append((now, group.total_lag))

    def _ends(self, partitions):
        from confluent_kafka.admin import OffsetSpec
        return self.cluster.list_offsets(partitions, OffsetSpec.latest())

    def watch_group(self, group_id: str, total_lag: int | None = None) -> None:
        """Start (or keep) sampling this group's lag; `total_lag`, when the caller just
        computed it, is recorded at once so the chart has a first point."""
        with self._lock:
            self._watched[group_id] = time.monotonic()
            if total_lag is not None:
                series = self._lag.setdefault(group_id, deque(maxlen=self._history))
                series.append((time.time(), total_lag))

    def lag_series(self, group_id: str) -> list[tuple[float, int]]:
        with self._lock:
            return list(self._lag.get(group_id, ()))

    def topic_rates(self) -> dict[str, float]:
        """Each topic's records per second between the last two samples."""
        with self._lock:
            if len(self._samples) < 2:
                return {}
            before, after = self._samples[-2], self._samples[-1]
        elapsed = max(after.at_s - before.at_s, 1e-3)
        return {t: max(0, after.end_offsets[t] - before.end_offsets.get(t, after.end_offsets[t]))
                / elapsed for t in after.end_offsets}

    def rate_series(self, topic: str | None = None) -> list[tuple[float, float]]:
        """(time, records/s) between consecutive samples, for one topic or all topics."""
        with self._lock:
            samples = list(self._samples)
        series = []
        for before, after in zip(samples, samples[1:]):
            elapsed = max(after.at_s - before.at_s, 1e-3)
            if topic is None:
                delta = sum(max(0, end - before.end_offsets.get(t, end))
                            for t, end in after.end_offsets.items())
            else:
                end = after.end_offsets.get(topic)
                delta = 0 if end is None else max(0, end - before.end_offsets.get(topic, end))
            series.append((after.at_s, delta / elapsed))
        return series
