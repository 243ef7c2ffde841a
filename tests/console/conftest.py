"""tests/console: the web console (`logbroker console`) against a real broker, over HTTP and in
a real browser. The helpers are in console_helpers.py."""

from __future__ import annotations

import uuid

import pytest
from console_helpers import seed

from logbroker.testing import TEST_OVERRIDES, BrokerProcess


@pytest.fixture(scope="module")
def seeded_broker(tmp_path_factory):
    """A broker of this module's own, with the seeded topic and group: (bootstrap, topic, group)."""
    process = BrokerProcess(tmp_path_factory.mktemp("console-broker"), overrides=TEST_OVERRIDES)
    process.start()
    topic, group = f"orders-{uuid.uuid4().hex[:6]}", f"billing-{uuid.uuid4().hex[:6]}"
    seed(process.bootstrap, topic, group)
    yield process.bootstrap, topic, group
    process.kill()
