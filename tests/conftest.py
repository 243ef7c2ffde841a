"""Fixtures shared by the whole suite: real brokers in subprocesses."""

from __future__ import annotations

import uuid

import pytest

from logbroker.testing import BrokerProcess


@pytest.fixture
def broker_process(tmp_path):
    """A fresh broker; the test may stop, kill and restart it."""
    process = BrokerProcess(tmp_path / "broker")
    yield process.start()
    process.kill()


@pytest.fixture
def broker(broker_process) -> str:
    """The bootstrap address of a fresh broker."""
    return broker_process.bootstrap


@pytest.fixture(scope="session")
def shared_broker(tmp_path_factory):
    """One broker for tests that only need topics of their own (see `topic`)."""
    process = BrokerProcess(tmp_path_factory.mktemp("shared-broker"))
    yield process.start()
    process.kill()


@pytest.fixture
def topic() -> str:
    """A topic name no other test uses."""
    return f"t-{uuid.uuid4().hex[:12]}"
