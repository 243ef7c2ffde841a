"""tests/coordinator: real brokers with fast group timings, real group consumers."""

from __future__ import annotations

import pytest

from logbroker.testing import BrokerProcess

# A new group's first rebalance waits 100 ms instead of 3 s; sessions may be as short as 1 s.
GROUP_OVERRIDES = {"group.initial.rebalance.delay.ms": "100", "group.min.session.timeout.ms": "1000"}


def pytest_collection_modifyitems(items) -> None:
    mark = pytest.mark.filterwarnings("ignore:.*is deprecated. Use files\\(\\) instead:DeprecationWarning")
    for item in items:
        if "tests/coordinator/" in str(item.fspath):
            item.add_marker(mark)


@pytest.fixture(scope="module")
def group_broker(tmp_path_factory):
    """One broker for the tests of a module (each uses its own topics and groups)."""
    process = BrokerProcess(tmp_path_factory.mktemp("group-broker"), overrides=GROUP_OVERRIDES)
    yield process.start()
    process.kill()


@pytest.fixture
def restartable_broker(tmp_path):
    process = BrokerProcess(tmp_path / "broker", overrides=GROUP_OVERRIDES)
    yield process.start()
    process.kill()
