"""A Spark standalone cluster and a Spark Connect server on loopback, from the pyspark install.

For tests, benchmarks and trying `--master spark://...` on one machine: pyspark's wheel ships
Spark's jars and scripts (SPARK_HOME is the package dir), including the standalone Master and
Worker and the Spark Connect server (`jars/spark-connect_*.jar`). Each runs in its own JVM:

    with StandaloneCluster(work_dir) as cluster:          # Master + one Worker
        SparkSession.builder.master(cluster.master_url)...
    with ConnectServer(work_dir, master=cluster.master_url) as server:
        SparkSession.builder.remote(server.url)...

Executors launched by the Worker inherit its environment: PYSPARK_PYTHON (this interpreter,
which has logbroker installed) and PYTHONPATH — as a real deployment ships the package to the
executors (docs/spark.md). Everything binds to 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def spark_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {**os.environ, "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": "127.0.0.1",
           "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
           "SPARK_NO_DAEMONIZE": "1"}
    env.update(extra or {})
    return env


def _wait(condition, *, timeout_s: float, what: str, process: subprocess.Popen,
          log: Path) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if process.poll() is not None:
            raise RuntimeError(f"{what}: process exited ({process.returncode}); "
                               f"{log.read_text()[-2000:]}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not ready within {timeout_s} s; see {log}")
        time.sleep(0.2)


def _stop(process: subprocess.Popen | None) -> None:
    if process is not None and process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


class StandaloneCluster:
    """A standalone Master and one Worker with `cores` cores and `memory` of executor memory."""

    def __init__(self, work_dir: Path, *, cores: int = 2, memory: str = "1g") -> None:
        self.work_dir = Path(work_dir)
        self.cores = cores
        self.memory = memory
        self.port = free_port()
        self.webui_port = free_port()
        self.master: subprocess.Popen | None = None
        self.worker: subprocess.Popen | None = None

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen:
        log = self.work_dir / f"{name}.log"
        return subprocess.Popen([str(spark_home() / "bin" / "spark-class"), *args],
                                env=spark_env(), stdout=log.open("w"), stderr=subprocess.STDOUT,
                                start_new_session=True)

    def alive_workers(self) -> int:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.webui_port}/json/",
                                        timeout=2) as answer:
                return int(json.load(answer).get("aliveworkers", 0))
        except (OSError, ValueError):
            return 0

    def start(self, timeout_s: float = 90.0) -> StandaloneCluster:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.master = self._spawn("master", [
            "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
            "--port", str(self.port), "--webui-port", str(self.webui_port)])
        self.worker = self._spawn("worker", [
            "org.apache.spark.deploy.worker.Worker", self.master_url, "--host", "127.0.0.1",
            "--cores", str(self.cores), "--memory", self.memory,
            "--webui-port", str(free_port()), "--work-dir", str(self.work_dir / "work")])
        _wait(lambda: self.alive_workers() >= 1, timeout_s=timeout_s,
              what="Spark standalone worker", process=self.worker,
              log=self.work_dir / "worker.log")
        return self

    def stop(self) -> None:
        _stop(self.worker)
        _stop(self.master)

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()


class ConnectServer:
    """Spark Connect's server (SparkConnectServer via spark-submit) on a free port."""

    def __init__(self, work_dir: Path, *, master: str = "local[2]",
                 conf: dict[str, str] | None = None) -> None:
        self.work_dir = Path(work_dir)
        self.master = master
        self.conf = conf or {}
        self.port = free_port()
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 120.0) -> ConnectServer:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        conf = {"spark.connect.grpc.binding.port": str(self.port),
                "spark.connect.grpc.binding.address": "127.0.0.1",
                "spark.ui.enabled": "false", **self.conf}
        args = [str(spark_home() / "bin" / "spark-submit"), "--master", self.master,
                "--class", "org.apache.spark.sql.connect.service.SparkConnectServer"]
        for key, value in conf.items():
            args += ["--conf", f"{key}={value}"]
        args.append("spark-internal")
        log = self.work_dir / "connect.log"
        self.process = subprocess.Popen(args, env=spark_env(), stdout=log.open("w"),
                                        stderr=subprocess.STDOUT, start_new_session=True)

        def listening() -> bool:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return True
            except OSError:
                return False

        _wait(listening, timeout_s=timeout_s, what="Spark Connect server",
              process=self.process, log=log)
        return self

    def stop(self) -> None:
        _stop(self.process)

    def __enter__(self) -> ConnectServer:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()
