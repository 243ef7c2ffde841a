"""Fixtures shared by the whole suite: real brokers in subprocesses, from the plugin users get
(`logbroker.testing`, registered as the pytest11 entry point `logbroker`)."""

from __future__ import annotations

import os
import re
import uuid

import pytest
from hypothesis import settings

from logbroker.testing import BrokerProcess

# CI runs each property test on a fixed set of examples (no flakes from a new random draw on a
# busy 2-core machine, no deadline errors); locally every run explores new examples.
settings.register_profile("ci", derandomize=True, deadline=None)
if os.environ.get("CI"):
    settings.load_profile("ci")

# `make test` runs the suite on three pytest-xdist workers (`-n 3 --dist loadfile
# --no-loadscope-reorder`). A module is one unit of work, so its module-scoped brokers start once,
# on one worker, and its tests keep their order. SHARED_UNITS binds modules that must not run
# beside each other: the two whose tests each run Spark drivers in their own JVMs (CPU-bound for
# minutes; side by side they starve each other past their timeouts). Units start longest first
# (LONGEST_FIRST, measured with --durations), then the rest in collection order, so no long unit is
# left to run alone at the end; a stale list costs only wall time.
SHARED_UNITS = {
    "tests/spark/test_exactly_once.py": "spark-drivers",
    "tests/spark/test_cluster.py": "spark-drivers",
}
LONGEST_FIRST = (
    "spark-drivers",
    "tests/broker/test_client_quotas_throttling.py",
    "tests/cluster/test_healing.py",
    "tests/cluster/test_durability.py",
    "tests/cluster/test_share_crash.py",
    "tests/spark/test_batch_read.py",
    "tests/spark/test_stream_read.py",
    "tests/cluster/test_cluster_groups.py",
    "tests/cluster/test_leader_election.py",
    "tests/spark/test_pipeline.py",
    "tests/cluster/test_replication.py",
    "tests/cluster/test_share_state_failover.py",
    "tests/spark/test_typed_writes.py",
    "tests/remote/test_tiered_faults.py",
    "tests/remote/test_tiered_failover.py",
    "tests/cluster/test_restart_metadata.py",
    "tests/broker/test_share_groups.py",
    "tests/broker/test_transactions.py",
    "tests/coordinator/test_consumer_protocol.py",
    "tests/coordinator/test_group_consumers.py",
)


def work_unit(nodeid: str) -> str:
    """The unit of work a test belongs to under pytest-xdist: its module, or its SHARED_UNITS name."""
    module = nodeid.split("::", 1)[0]
    return SHARED_UNITS.get(module, module)


# xdist's own `--dist loadgroup` marks do nothing under pytest 9.2 (it renames items through an
# attribute pytest no longer reads), hence a scheduler of our own: loadfile with SHARED_UNITS.
@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class WorkUnitScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    return WorkUnitScheduling(config, log)


def pytest_collection_modifyitems(config, items) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):  # the scheduler takes units in this order
        rank = {unit: i for i, unit in enumerate(LONGEST_FIRST)}
        items.sort(key=lambda item: rank.get(work_unit(item.nodeid), len(rank)))


# What no broker may log, whatever a test makes its clients do: an exception that escaped (a bug
# of ours: a group's last member leaving once logged one from a timer). Each broker subprocess a
# test starts is watched, and after every test the lines its brokers wrote during it are searched:
# the test that made one write such a line errors in its teardown, with the line.
ESCAPED = re.compile(r"Traceback \(most recent call last\)|Exception in callback|exception was never retrieved")
_watched: dict[BrokerProcess, int] = {}  # a started broker -> how much of its log was searched
_start = BrokerProcess.start


def _start_watched(self: BrokerProcess) -> BrokerProcess:
    started = _start(self)
    _watched.setdefault(self, self._log_offset)  # a restart goes on from where the search was
    return started


BrokerProcess.start = _start_watched


@pytest.fixture(autouse=True)
def no_escaped_exception_in_broker_logs():
    yield
    found = []
    for broker, searched in list(_watched.items()):
        try:
            with open(broker.log_path, "rb") as f:
                f.seek(searched)
                text = f.read()
        except FileNotFoundError:  # its directory is gone with the test's
            text = b""
        _watched[broker] = searched + len(text)
        lines = text.decode(errors="replace").splitlines()
        matched = {i for i, line in enumerate(lines) if ESCAPED.search(line)}
        found += [f"{broker.log_path}: {' | '.join(lines[max(i - 1, 0):i + 1])}"
                  for i in sorted(matched) if i - 1 not in matched]  # with the line before: its message
        if not broker.running:
            del _watched[broker]
    if found:
        pytest.fail("a broker logged an exception that escaped:\n" + "\n".join(found[:10]), pytrace=False)


@pytest.fixture
def broker_process(logbroker_process):
    """A fresh broker; the test may stop, kill and restart it."""
    return logbroker_process


@pytest.fixture
def broker(logbroker) -> str:
    """The bootstrap address of a fresh broker."""
    return logbroker


@pytest.fixture(scope="session")
def shared_broker(logbroker_session):
    """One broker for tests that only need topics of their own (see `topic`)."""
    return logbroker_session


@pytest.fixture
def topic() -> str:
    """A topic name no other test uses."""
    return f"t-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def small_filesystem(tmp_path):
    """A 16 MiB tmpfs mounted for the test (full-disk tests); skipped where mounting is not
    allowed (not root, no CAP_SYS_ADMIN in the container)."""
    import subprocess

    mount_point = tmp_path / "small-fs"
    mount_point.mkdir()
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount_point)],
                            capture_output=True, text=True)
    if result.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {result.stderr.strip() or result.returncode}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], capture_output=True)
