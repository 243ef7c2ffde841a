"""Time, injected: storage and replication never read the wall clock directly.

`SystemClock` is the real one; `ManualClock` moves only when a test advances it, so tests of
retention, segment rolling and ISR expiry never sleep.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def time_ms(self) -> int:
        """Wall-clock milliseconds since the epoch (record timestamps, segment.ms, retention.ms)."""

    def monotonic_ms(self) -> int:
        """Milliseconds from an arbitrary start that never goes back (timeouts, lag)."""


class SystemClock:
    def time_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000


class ManualClock:
    """A clock that stands still until `advance` is called. Both readings move together."""

    def __init__(self, time_ms: int = 1_700_000_000_000) -> None:
        self._time_ms = time_ms
        self._monotonic_ms = 0

    def time_ms(self) -> int:
        return self._time_ms

    def monotonic_ms(self) -> int:
        return self._monotonic_ms

    def advance(self, ms: int) -> None:
        self._time_ms += ms
        self._monotonic_ms += ms
