"""Real brokers for tests: a subprocess on a free port with its own data directory.

    from logbroker.testing import BrokerProcess

    with BrokerProcess(tmp_path) as broker:
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})

The broker binds port 0 and reports the port it got in its startup line, so there is no race
for a "free" port. `stop()` sends SIGTERM (clean shutdown), `kill()` SIGKILL (crash), and
`start()` again reuses the same data directory, for restart and recovery tests.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

STARTED = re.compile(r"started in \d+ ms: listening on \w+://([^:,\s]+):(\d+)")


class BrokerProcess:
    def __init__(self, base_dir: Path, *, overrides: dict[str, str] | None = None,
                 config_file: Path | None = None, args: tuple[str, ...] = (),
                 start_timeout_s: float = 30.0) -> None:
        self.base_dir = Path(base_dir)
        self.data_dir = self.base_dir / "data"
        self.log_path = self.base_dir / "broker.log"
        self.overrides = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(self.data_dir),
                          **(overrides or {})}
        self.config_file = config_file
        self.args = tuple(args)
        self.start_timeout_s = start_timeout_s
        self.process: subprocess.Popen | None = None
        self.host = "127.0.0.1"
        self.port = 0
        self._log_offset = 0

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def command(self) -> list[str]:
        args = [sys.executable, "-m", "logbroker.cli", "serve"]
        if self.config_file is not None:
            args += ["--config", str(self.config_file)]
        for key, value in self.overrides.items():
            args += ["--override", f"{key}={value}"]
        return args + list(self.args)

    def start(self) -> BrokerProcess:
        self.base_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        self._log_offset = log.tell()
        self.process = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL)
        log.close()
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            match = STARTED.search(self.new_log_text())
            if match:
                self.host, self.port = match.group(1), int(match.group(2))
                return self
            if self.process.poll() is not None:
                raise RuntimeError(f"broker exited with {self.process.returncode}:\n{self.new_log_text()}")
            time.sleep(0.02)
        self.kill()
        raise RuntimeError(f"broker did not start within {self.start_timeout_s} s:\n{self.new_log_text()}")

    def new_log_text(self) -> str:
        """What the broker logged since its latest start."""
        with open(self.log_path, "rb") as f:
            f.seek(self._log_offset)
            return f.read().decode(errors="replace")

    def stop(self, timeout_s: float = 30.0) -> int:
        """SIGTERM and wait: a clean shutdown. Returns the exit code."""
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else 0
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            raise RuntimeError(f"broker did not stop within {timeout_s} s:\n{self.new_log_text()}") from None

    def kill(self) -> None:
        """SIGKILL: a crash, nothing flushed beyond the page cache."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def restart(self) -> BrokerProcess:
        self.stop()
        return self.start()

    def __enter__(self) -> BrokerProcess:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        if self.process is not None and self.process.poll() is None:
            self.stop()


# -- the pytest plugin (entry point `pytest11: logbroker`) --------------------------------------
# Installed with logbroker, so any project's tests can ask for a real broker by fixture name:
#
#     def test_roundtrip(logbroker):
#         producer = confluent_kafka.Producer({"bootstrap.servers": logbroker})

try:
    import pytest
except ImportError:  # pytest is not a dependency of the broker itself
    pytest = None

# What Testcontainers' Kafka module sets too: a group's first join is not held back 3 s.
TEST_OVERRIDES = {"group.initial.rebalance.delay.ms": "0"}

if pytest is not None:

    @pytest.fixture
    def logbroker_process(tmp_path_factory):
        """A fresh broker in its own data directory; the test may stop, kill and restart it."""
        process = BrokerProcess(tmp_path_factory.mktemp("logbroker"), overrides=TEST_OVERRIDES)
        yield process.start()
        process.kill()

    @pytest.fixture
    def logbroker(logbroker_process) -> str:
        """The bootstrap address (`host:port`) of a fresh broker."""
        return logbroker_process.bootstrap

    @pytest.fixture(scope="session")
    def logbroker_session(tmp_path_factory):
        """One broker shared by a whole test session (give each test its own topics)."""
        process = BrokerProcess(tmp_path_factory.mktemp("logbroker-session"), overrides=TEST_OVERRIDES)
        yield process.start()
        process.kill()
