"""Fixtures shared by the whole suite: real brokers in subprocesses, from the plugin users get
(`logbroker.testing`, registered as the pytest11 entry point `logbroker`)."""

from __future__ import annotations

import os
import uuid

import pytest
from hypothesis import settings

# CI runs each property test on a fixed set of examples (no flakes from a new random draw on a
# busy 2-core machine, no deadline errors); locally every run explores new examples.
settings.register_profile("ci", derandomize=True, deadline=None)
if os.environ.get("CI"):
    settings.load_profile("ci")


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
