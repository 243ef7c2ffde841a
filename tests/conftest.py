"""Fixtures shared by the whole suite: real brokers in subprocesses, from the plugin users get
(`logbroker.testing`, registered as the pytest11 entry point `logbroker`)."""

from __future__ import annotations

import uuid

import pytest


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
