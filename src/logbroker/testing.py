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
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

STARTED = re.compile(r"started in \d+ ms: listening on \w+://([^:,\s]+):(\d+)")
REGISTRY_SERVING = re.compile(r"Schema registry serving on (https?://[^,\s]+)")
# Broker configs that turn the schema registry on, on a port of its own choosing.
SCHEMA_REGISTRY_OVERRIDES = {"schema.registry.listeners": "http://127.0.0.1:0"}


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

    def schema_registry_url(self, timeout_s: float = 60.0) -> str:
        """The URL of the broker's schema registry (`schema.registry.listeners`), once it serves:
        it has read `_schemas` to its end (on a cluster, once that topic has a leader)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            match = REGISTRY_SERVING.search(self.new_log_text())
            if match:
                return match.group(1)
            if self.process is None or self.process.poll() is not None:
                raise RuntimeError(f"broker is not running:\n{self.new_log_text()}")
            time.sleep(0.02)
        raise RuntimeError(f"the schema registry did not serve within {timeout_s} s:\n{self.new_log_text()}")

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

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def pause(self) -> None:
        """SIGSTOP: the process freezes (no fetches, no ZooKeeper heartbeats) until `resume()`."""
        os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after `pause()`."""
        os.kill(self.process.pid, signal.SIGCONT)

    def restart(self) -> BrokerProcess:
        self.stop()
        return self.start()

    def __enter__(self) -> BrokerProcess:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        if self.process is not None and self.process.poll() is None:
            self.stop()


def rack_overrides(racks: str | None) -> dict[int, dict[str, str]]:
    """`a,b,c` → broker.rack a for broker 1, b for broker 2, …; an empty item leaves one unset."""
    if not racks:
        return {}
    return {broker_id: {"broker.rack": rack.strip()}
            for broker_id, rack in enumerate(racks.split(","), 1) if rack.strip()}


def wait_for(condition, timeout_s: float = 30.0, interval_s: float = 0.1, *, what: str = "condition"):
    """Poll `condition()` until it returns something truthy, and return that; AssertionError
    naming `what` after `timeout_s`. Tests wait on conditions, never on fixed sleeps."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout_s} s")
        time.sleep(interval_s)


class ClusterProcess:
    """A ZooKeeper-mode cluster for tests: brokers 1..N as `BrokerProcess`es sharing one
    `zookeeper.connect` (give each cluster its own chroot), plus a kazoo session on it to read the
    partition state znodes — the truth about leaders and ISRs, whichever broker's cache lags.

        cluster = ClusterProcess(tmp_path, zk_connect=f"{zk.connect_string}/t1").start()
        cluster.create_topic("t", partitions=1, replication_factor=3)
        cluster.kill(cluster.leader("t", 0)); cluster.wait_for_leader("t", 0, not_in={old})

    Broker i's data directory is `base_dir/broker-<i>/data`. `kill` (SIGKILL), `pause`/`resume`
    (SIGSTOP/SIGCONT), `stop` (SIGTERM), `start` (again, on the same data: after a kill it waits
    for the old ZooKeeper session to expire), `wipe` (delete the data directory of a stopped broker).
    """

    def __init__(self, base_dir: Path, *, zk_connect: str, brokers: int = 3,
                 overrides: dict[str, str] | None = None,
                 broker_overrides: dict[int, dict[str, str]] | None = None) -> None:
        """`overrides` apply to every broker, `broker_overrides[id]` to one."""
        self.base_dir = Path(base_dir)
        self.zk_connect = zk_connect
        self.brokers: dict[int, BrokerProcess] = {}
        for broker_id in range(1, brokers + 1):
            self.brokers[broker_id] = BrokerProcess(self.base_dir / f"broker-{broker_id}", overrides={
                **CLUSTER_TEST_OVERRIDES, "broker.id": str(broker_id), "zookeeper.connect": zk_connect,
                **(overrides or {}), **(broker_overrides or {}).get(broker_id, {})})
        self._zk = None

    def start(self) -> ClusterProcess:
        from kazoo.client import KazooClient

        from logbroker.metadata.zookeeper_store import ensure_chroot
        ensure_chroot(self.zk_connect, timeout_s=30)
        self._zk = KazooClient(hosts=self.zk_connect)
        self._zk.start(timeout=30)
        for broker in self.brokers.values():
            broker.start()
        wait_for(lambda: self.registered() >= set(self.brokers), what="every broker registered in ZooKeeper")
        return self

    def close(self) -> None:
        for broker in self.brokers.values():
            if broker.running:
                broker.resume()  # a paused broker cannot die of SIGKILL until continued
                broker.kill()
        if self._zk is not None:
            self._zk.stop()
            self._zk.close()

    def __enter__(self) -> ClusterProcess:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.close()

    @property
    def bootstrap(self) -> str:
        """The addresses of the brokers running now."""
        return ",".join(b.bootstrap for b in self.brokers.values() if b.running)

    def kill(self, broker_id: int) -> None:
        self.brokers[broker_id].kill()

    def stop(self, broker_id: int) -> None:
        self.brokers[broker_id].stop()

    def start_broker(self, broker_id: int) -> BrokerProcess:
        return self.brokers[broker_id].start()

    def pause(self, broker_id: int) -> None:
        self.brokers[broker_id].pause()

    def resume(self, broker_id: int) -> None:
        self.brokers[broker_id].resume()

    def wipe(self, broker_id: int) -> None:
        """Delete a stopped broker's whole data directory (meta.properties included)."""
        assert not self.brokers[broker_id].running, "stop or kill the broker before wiping its data"
        shutil.rmtree(self.brokers[broker_id].data_dir, ignore_errors=True)

    # -- reading the cluster's state from ZooKeeper -------------------------------------------
    def create_topic(self, name: str, *, partitions: int = 1, replication_factor: int = 3,
                     config: dict[str, str] | None = None, replica_assignment: list[list[int]] | None = None) -> None:
        """Create a topic through the Admin API and wait until every partition has a leader and
        a full ISR. `replica_assignment` (one list of broker ids per partition, preferred leader
        first) replaces `partitions` and `replication_factor`."""
        from confluent_kafka import KafkaError, KafkaException
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        sizing = ({"num_partitions": len(replica_assignment), "replica_assignment": replica_assignment}
                  if replica_assignment else {"num_partitions": partitions, "replication_factor": replication_factor})
        def created() -> bool:
            # A broker learns of the others through a ZooKeeper watch: just after start (or on a
            # loaded machine) it may not count them all yet, which Kafka answers the same way.
            try:
                admin.create_topics([NewTopic(name, config=config or {}, **sizing)])[name].result(30)
            except KafkaException as exc:
                if exc.args[0].code() == KafkaError.INVALID_REPLICATION_FACTOR:
                    return False
                raise
            return True
        wait_for(created, what=f"topic {name} created")
        for partition, replicas in enumerate(replica_assignment or [[0] * replication_factor] * partitions):
            self.wait_for_isr(name, partition, size=len(replicas))

    def partition_state(self, topic: str, partition: int):
        """The partition's state znode (`PartitionState`: leader, leader_epoch, isr), or None."""
        from kazoo.exceptions import NoNodeError

        from logbroker.metadata import zk_data
        from logbroker.types import TopicPartition
        try:
            data, _ = self._zk.get(zk_data.partition_state_path(TopicPartition(topic, partition)))
        except NoNodeError:
            return None
        return zk_data.decode_partition_state(data)

    def leader(self, topic: str, partition: int) -> int:
        state = self.partition_state(topic, partition)
        return -1 if state is None else state.leader

    def controller(self) -> int:
        """The broker id in /controller, or -1 while there is none."""
        from kazoo.exceptions import NoNodeError

        from logbroker.metadata import zk_data
        try:
            return zk_data.decode_controller(self._zk.get(zk_data.CONTROLLER)[0])
        except NoNodeError:
            return -1

    def registered(self) -> set[int]:
        """The broker ids registered now (their ephemeral /brokers/ids/<id>)."""
        from logbroker.metadata import zk_data
        return {int(c) for c in self._zk.get_children(zk_data.BROKER_IDS)}

    def wait_for_leader(self, topic: str, partition: int, *, not_in=(), timeout_s: float = 60.0) -> int:
        """Wait for a live leader other than the brokers in `not_in`; returns its id."""
        def elected():
            leader = self.leader(topic, partition)
            return leader if leader > 0 and leader not in not_in and self.brokers[leader].running else None
        return wait_for(elected, timeout_s=timeout_s, what=f"a new leader of {topic}-{partition}")

    def wait_for_isr(self, topic: str, partition: int, *, size: int | None = None, contains=(),
                     excludes=(), timeout_s: float = 60.0):
        """Wait until the ISR in ZooKeeper has `size` members (all replicas by default), with
        every broker of `contains` and none of `excludes`, and a leader; returns the state."""
        size = len(self.brokers) if size is None else size

        def reached():
            state = self.partition_state(topic, partition)
            ok = (state is not None and state.leader > 0 and len(state.isr) == size
                  and set(contains) <= set(state.isr) and not set(excludes) & set(state.isr))
            return state if ok else None
        return wait_for(reached, timeout_s=timeout_s,
                        what=f"ISR of {topic}-{partition} (size {size}, with {list(contains)}, without {list(excludes)})")


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
# A cluster in tests: a dead broker's session expires in 4 s, and __consumer_offsets needs one broker.
CLUSTER_TEST_OVERRIDES = {**TEST_OVERRIDES, "zookeeper.session.timeout.ms": "4000",
                          "offsets.topic.replication.factor": "1"}

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

    @pytest.fixture
    def logbroker_schema_registry(tmp_path_factory):
        """A fresh broker serving the schema registry too; `.schema_registry_url()` is its URL."""
        process = BrokerProcess(tmp_path_factory.mktemp("logbroker"),
                                overrides={**TEST_OVERRIDES, **SCHEMA_REGISTRY_OVERRIDES})
        process.start()
        process.schema_registry_url()
        yield process
        process.kill()

    @pytest.fixture(scope="session")
    def logbroker_session(tmp_path_factory):
        """One broker shared by a whole test session (give each test its own topics)."""
        process = BrokerProcess(tmp_path_factory.mktemp("logbroker-session"), overrides=TEST_OVERRIDES)
        yield process.start()
        process.kill()

    def pytest_configure(config) -> None:
        config.addinivalue_line("markers", "logbroker_cluster(brokers=3, racks=None, **overrides): the "
                                "size, the racks (`a,b,c`: broker.rack of brokers 1, 2, 3) and broker "
                                "config (Kafka's keys) of the `logbroker_cluster` fixture")

    @pytest.fixture(scope="session")
    def logbroker_zookeeper(tmp_path_factory):
        """One real ZooKeeper server (Debian's `zookeeper` package, in a JVM) for the session;
        the test is skipped when java or the jar is missing."""
        from logbroker.zookeeper_process import ZooKeeperProcess, unavailable_reason
        reason = unavailable_reason()
        if reason is not None:
            pytest.skip(f"a logbroker cluster needs ZooKeeper: {reason}")
        with ZooKeeperProcess(tmp_path_factory.mktemp("logbroker-zookeeper")) as zookeeper:
            yield zookeeper

    @pytest.fixture
    def logbroker_cluster(request, logbroker_zookeeper, tmp_path_factory):
        """A started `ClusterProcess` (3 brokers unless marked otherwise) in a fresh chroot of the
        session's ZooKeeper. Size and config come from the marker:

            @pytest.mark.logbroker_cluster(brokers=3, racks="a,b,c", **{"replica.lag.time.max.ms": "3000"})
        """
        import uuid
        marker = request.node.get_closest_marker("logbroker_cluster")
        kwargs = dict(marker.kwargs) if marker else {}
        brokers = int(kwargs.pop("brokers", 3))
        racks = kwargs.pop("racks", None)
        cluster = ClusterProcess(tmp_path_factory.mktemp("logbroker-cluster"), brokers=brokers,
                                 zk_connect=f"{logbroker_zookeeper.connect_string}/c-{uuid.uuid4().hex[:12]}",
                                 overrides={k: str(v) for k, v in kwargs.items()},
                                 broker_overrides=rack_overrides(racks))
        yield cluster.start()
        cluster.close()
