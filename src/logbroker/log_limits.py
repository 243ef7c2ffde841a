"""Log lines a client or a broken disk can trigger at will, kept from flooding the broker's log.

- `RateLimitedLog`: at most `burst` lines per `interval_s` for one key (say, "handler failed");
  the lines it drops are counted and reported in the next line it lets through. For errors a
  client can cause by what it sends (189 tracebacks from one fuzz run): one line each,
  the traceback only at DEBUG.
- `StateChangeLog`: for periodic work (checkpoints every 5 s, flushes): a failure is logged when it
  starts or changes, not on every tick, and the recovery is logged once.

A leaf module: logging and a monotonic clock, nothing else from logbroker. Thread-safe enough for
its use (a lost count under a race is harmless).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable


_MAX_KEYS = 1024


class RateLimitedLog:
    def __init__(self, logger: logging.Logger, *, burst: int = 5, interval_s: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.logger = logger
        self.burst = burst
        self.interval_s = interval_s
        self._clock = clock
        self._windows: dict[str, list] = {}  # key -> [window start, lines logged, lines dropped]

    def log(self, level: int, key: str, message: str, *args: object,
            exc: BaseException | None = None) -> bool:
        """Log `message % args` at `level` unless `key` has used up its burst in this window;
        with `exc`, its traceback goes to DEBUG. Returns whether the line was written."""
        now = self._clock()
        window = self._windows.get(key)
        if window is None or now - window[0] >= self.interval_s:
            dropped = window[2] if window is not None else 0
            if window is None and len(self._windows) >= _MAX_KEYS:  # keys may come from clients
                self._windows = {k: w for k, w in self._windows.items() if now - w[0] < self.interval_s}
                if len(self._windows) >= _MAX_KEYS:
                    self._windows.clear()
            window = self._windows[key] = [now, 0, dropped]
        if window[1] >= self.burst:
            window[2] += 1
            return False
        window[1] += 1
        if window[2]:
            message += " (%d similar lines suppressed)"
            args = (*args, window[2])
            window[2] = 0
        self.logger.log(level, message, *args)
        if exc is not None and self.logger.isEnabledFor(logging.DEBUG):
            self.logger.debug("Traceback of the error above", exc_info=exc)
        return True


class StateChangeLog:
    """Tracks one periodic task: `failed(exc)` logs only when the failure is new (a different
    type or message than the last one), `succeeded()` logs once after a failure."""

    def __init__(self, logger: logging.Logger, what: str) -> None:
        self.logger = logger
        self.what = what
        self._failure: str | None = None

    @property
    def failing(self) -> bool:
        return self._failure is not None

    def failed(self, exc: BaseException, level: int = logging.ERROR) -> bool:
        # A KafkaError (it has a code) says what happened in its message; others need their type.
        state = str(exc) if hasattr(exc, "code") and str(exc) else f"{type(exc).__name__}: {exc}"
        if state == self._failure:
            return False
        self._failure = state
        self.logger.log(level, "%s failed: %s (logged again only when this changes)", self.what, state)
        if self.logger.isEnabledFor(logging.DEBUG):
            self.logger.debug("Traceback of the error above", exc_info=exc)
        return True

    def succeeded(self) -> bool:
        if self._failure is None:
            return False
        self._failure = None
        self.logger.info("%s succeeded again", self.what)
        return True
