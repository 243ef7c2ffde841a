"""The pipeline's results, the plain Python recount they must equal, and the chart.

`recount` aggregates the generated events the way the Spark job does — 1-minute tumbling windows
by event time, per event type, the end-of-stream marker left out — with nothing but dicts, so it is
an independent check of the streaming job: every window of the input must come out of Spark
exactly once with the same numbers.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from logbroker.pipeline.events import END_OF_STREAM, ClickEvent, parse_iso_ms

# (window_start, event_type) → (events, revenue_cents)
WindowCounts = dict[tuple[datetime, str], tuple[int, int]]


def recount(events: Iterable[ClickEvent], *, window_s: int = 60) -> WindowCounts:
    counts: dict[tuple[datetime, str], list[int]] = defaultdict(lambda: [0, 0])
    for event in events:
        if event.event_type == END_OF_STREAM:
            continue
        moment = parse_iso_ms(event.event_time)
        epoch_s = int(moment.timestamp())
        start = datetime.fromtimestamp(epoch_s - epoch_s % window_s, tz=timezone.utc)
        cell = counts[(start, event.event_type)]
        cell[0] += 1
        if event.event_type == "purchase":
            cell[1] += event.price_cents
    return {key: (n, revenue) for key, (n, revenue) in counts.items()}


def _utc(value) -> datetime:
    if isinstance(value, str):
        return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(timezone.utc)
    if value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc)


def read_parquet_windows(windows_dir: Path) -> tuple[WindowCounts, int]:
    """The windows Spark wrote, and how many rows there were (duplicates would differ)."""
    import pyarrow.dataset as ds

    table = ds.dataset(str(windows_dir), format="parquet", partitioning="hive").to_table(
        columns=["window_start", "event_type", "events", "revenue_cents"])
    rows = table.to_pylist()
    return ({(_utc(r["window_start"]), r["event_type"]): (r["events"], r["revenue_cents"])
             for r in rows}, len(rows))


def parse_result_records(values: Iterable[bytes]) -> tuple[WindowCounts, int]:
    """The windows the job produced to the result topic (JSON values)."""
    found, n = {}, 0
    for value in values:
        row = json.loads(value)
        found[(_utc(row["window_start"]), row["event_type"])] = (row["events"],
                                                                 row["revenue_cents"])
        n += 1
    return found, n


@dataclass(frozen=True, kw_only=True)
class Check:
    """How a set of produced windows compares with the recount."""

    name: str
    rows: int
    missing: list[tuple[datetime, str]]
    unexpected: list[tuple[datetime, str]]
    different: list[tuple[datetime, str]]
    duplicates: int

    @property
    def ok(self) -> bool:
        return not (self.missing or self.unexpected or self.different or self.duplicates)


def compare(name: str, expected: WindowCounts, found: WindowCounts, rows: int) -> Check:
    return Check(name=name, rows=rows,
                 missing=sorted(set(expected) - set(found)),
                 unexpected=sorted(set(found) - set(expected)),
                 different=sorted(k for k in set(expected) & set(found)
                                  if expected[k] != found[k]),
                 duplicates=rows - len(found))


def save_chart(counts: WindowCounts, path: Path, *, title: str) -> Path:
    """Events per minute by type (stacked) and purchase revenue per minute, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    minutes = sorted({start for start, _ in counts})
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(11, 7), sharex=True,
                                      gridspec_kw={"height_ratios": [3, 2]})
    base = [0] * len(minutes)
    colors = {"view": "#4C72B0", "add_to_cart": "#DD8452", "purchase": "#55A868"}
    for event_type in ("view", "add_to_cart", "purchase"):
        heights = [counts.get((m, event_type), (0, 0))[0] for m in minutes]
        top.bar(minutes, heights, width=timedelta(seconds=50), bottom=base,
                label=event_type.replace("_", " "), color=colors[event_type], align="edge")
        base = [b + h for b, h in zip(base, heights)]
    top.set_ylabel("events per minute")
    top.set_title(title)
    top.legend(loc="upper left")
    revenue = [counts.get((m, "purchase"), (0, 0))[1] / 100 for m in minutes]
    bottom.plot(minutes, revenue, color=colors["purchase"], marker="o", markersize=3)
    bottom.fill_between(minutes, revenue, alpha=0.2, color=colors["purchase"])
    bottom.set_ylabel("revenue per minute ($)")
    bottom.set_xlabel("event time (UTC), 1-minute windows")
    fig.autofmt_xdate()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
