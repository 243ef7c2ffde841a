"""log_limits: rate-limited lines and once-per-state-change lines."""

from __future__ import annotations

import logging

from logbroker.log_limits import RateLimitedLog, StateChangeLog


def test_rate_limited_log_lets_a_burst_through_then_counts_what_it_drops(caplog):
    now = [0.0]
    limited = RateLimitedLog(logging.getLogger("t.rate"), burst=3, interval_s=10, clock=lambda: now[0])
    with caplog.at_level(logging.INFO, "t.rate"):
        written = [limited.log(logging.ERROR, "k", "bad %d", i, exc=ValueError("x")) for i in range(10)]
        assert written == [True] * 3 + [False] * 7
        now[0] = 11.0
        assert limited.log(logging.ERROR, "k", "bad %d", 99)
    messages = [r.getMessage() for r in caplog.records]
    assert messages == ["bad 0", "bad 1", "bad 2", "bad 99 (7 similar lines suppressed)"]
    assert all(r.exc_info is None for r in caplog.records)  # tracebacks only at DEBUG


def test_rate_limited_log_keys_are_independent(caplog):
    limited = RateLimitedLog(logging.getLogger("t.keys"), burst=1, interval_s=60)
    with caplog.at_level(logging.INFO, "t.keys"):
        assert limited.log(logging.WARNING, "a", "one")
        assert not limited.log(logging.WARNING, "a", "two")
        assert limited.log(logging.WARNING, "b", "three")


def test_state_change_log_logs_a_failure_once_and_the_recovery_once(caplog):
    state = StateChangeLog(logging.getLogger("t.state"), "Periodic task checkpoint")
    with caplog.at_level(logging.INFO, "t.state"):
        for _ in range(5):
            state.failed(OSError(28, "No space left on device"))
        state.failed(OSError(5, "Input/output error"))
        for _ in range(3):
            state.succeeded()
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 3
    assert "No space left on device" in messages[0] and "Input/output error" in messages[1]
    assert messages[2] == "Periodic task checkpoint succeeded again"
