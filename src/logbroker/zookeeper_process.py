"""A real Apache ZooKeeper server in a child JVM, for cluster tests and `logbroker dev-cluster`.

    from logbroker.zookeeper_process import ZooKeeperProcess

    with ZooKeeperProcess(tmp_path / "zk") as zk:
        store = ZooKeeperMetadataStore(zk.connect_string, broker_id=1)

It runs Debian's `zookeeper` package (`/usr/share/java/zookeeper.jar`, whose manifest names the jars
it needs) with `QuorumPeerMain` on a `zoo.cfg` written into `base_dir`: standalone, loopback only,
a free client port, the data directory `base_dir/data`, no admin HTTP server, and the four-letter
words `ruok` and `srvr` allowed. The package's zkServer.sh ignores `--config`, hence the JVM is
started directly. `start()` returns once `srvr` says the server is serving (about 1-2 s).

`stop()` sends SIGTERM (ZooKeeper exits cleanly), `kill()` SIGKILL, `pause()`/`resume()`
SIGSTOP/SIGCONT (to expire sessions), and `start()` again reuses the same data directory and port,
so znodes survive a restart. The server's output goes to `base_dir/zookeeper.log`.

ZooKeeper cannot bind port 0 and report it, so the port is picked by binding a socket and closing
it; if the server loses that race it exits, and `start()` retries with another port.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

JAVA_LIB_DIR = Path("/usr/share/java")
ZOOKEEPER_JAR = JAVA_LIB_DIR / "zookeeper.jar"
# The manifest of Debian's zookeeper.jar lists every jar it needs except an slf4j binding.
SLF4J_BINDING = JAVA_LIB_DIR / "slf4j-simple.jar"
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"


class ZooKeeperUnavailable(RuntimeError):
    """Java or the ZooKeeper jar is missing; the message says which and how to install it."""


def unavailable_reason() -> str | None:
    """Why a ZooKeeper server cannot be started here, or None if it can."""
    if shutil.which("java") is None:
        return "java is not installed (apt-get install default-jre-headless zookeeper)"
    if not ZOOKEEPER_JAR.exists():
        return f"{ZOOKEEPER_JAR} is missing (apt-get install zookeeper)"
    return None


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def four_letter_word(host: str, port: int, word: str, *, timeout_s: float = 1.0) -> str:
    """Send one of ZooKeeper's four-letter commands and return its answer ('' if none)."""
    with socket.create_connection((host, port), timeout=timeout_s) as s:
        s.sendall(word.encode())
        chunks = []
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


class ZooKeeperProcess:
    def __init__(self, base_dir: Path, *, port: int = 0, host: str = "127.0.0.1",
                 tick_time_ms: int = 500, start_timeout_s: float = 30.0) -> None:
        self.base_dir = Path(base_dir)
        self.data_dir = self.base_dir / "data"
        self.config_path = self.base_dir / "zoo.cfg"
        self.log_path = self.base_dir / "zookeeper.log"
        self.host = host
        self.port = port
        self.tick_time_ms = tick_time_ms
        self.start_timeout_s = start_timeout_s
        self.process: subprocess.Popen | None = None
        self._log_offset = 0

    @property
    def connect_string(self) -> str:
        """`host:port`, as `zookeeper.connect` takes it (append `/chroot` to share one server)."""
        return f"{self.host}:{self.port}"

    def command(self) -> list[str]:
        classpath = os.pathsep.join([str(self.base_dir), str(ZOOKEEPER_JAR), str(SLF4J_BINDING)])
        return ["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                "-Dzookeeper.jmx.log4j.disable=true", "-Dzookeeper.admin.enableServer=false",
                "-cp", classpath, MAIN_CLASS, str(self.config_path)]

    def _write_config(self) -> None:
        # Session timeouts are bounded by 2 and 20 ticks by default; widen the range so tests can
        # ask for short sessions (1 s) and brokers for Kafka's 18 s default.
        self.config_path.write_text(
            f"tickTime={self.tick_time_ms}\n"
            f"dataDir={self.data_dir}\n"
            f"clientPort={self.port}\n"
            f"clientPortAddress={self.host}\n"
            f"minSessionTimeout={2 * self.tick_time_ms}\n"
            "maxSessionTimeout=60000\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=ruok,srvr\n"
            "autopurge.purgeInterval=0\n")

    def start(self) -> ZooKeeperProcess:
        """Start the server and wait until it serves requests. Raises ZooKeeperUnavailable when
        java or the jar is missing, RuntimeError (with the server's output) when it fails."""
        reason = unavailable_reason()
        if reason is not None:
            raise ZooKeeperUnavailable(reason)
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self.data_dir.mkdir(exist_ok=True)
        fixed_port = self.port != 0
        for _attempt in range(1 if fixed_port else 3):
            if not fixed_port:
                self.port = free_port(self.host)
            self._write_config()
            if self._spawn_and_wait():
                return self
        raise RuntimeError(f"ZooKeeper failed to start:\n{self.new_log_text()}")

    def _spawn_and_wait(self) -> bool:
        with open(self.log_path, "ab") as log:
            self._log_offset = log.tell()
            self.process = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, cwd=self.base_dir)
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            if self.is_serving():
                return True
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(
            f"ZooKeeper did not serve within {self.start_timeout_s} s:\n{self.new_log_text()}")

    def is_serving(self) -> bool:
        """True when `srvr` reports a mode (a server that is up but not yet serving says so)."""
        try:
            return "Mode:" in four_letter_word(self.host, self.port, "srvr")
        except OSError:
            return False

    def new_log_text(self) -> str:
        """What the server wrote since its latest start."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self._log_offset)
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def stop(self, timeout_s: float = 10.0) -> int | None:
        """Clean stop (SIGTERM, then SIGKILL after `timeout_s`). Returns the exit status."""
        if self.process is None or self.process.poll() is not None:
            return None if self.process is None else self.process.returncode
        self.resume()
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            return self.process.returncode

    def kill(self) -> None:
        """Crash the server (SIGKILL)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def pause(self) -> None:
        """Freeze the server (SIGSTOP): clients lose their connection, sessions expire later."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)

    def restart(self) -> ZooKeeperProcess:
        self.stop()
        return self.start()

    def __enter__(self) -> ZooKeeperProcess:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()
