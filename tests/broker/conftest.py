"""tests/broker: real brokers, real clients. Fixtures come from tests/conftest.py."""

from __future__ import annotations

import pytest

from clients import drop_admins


def pytest_collection_modifyitems(items) -> None:
    # kafka-python 3.0 loads its protocol schemas with a deprecated importlib.resources call.
    mark = pytest.mark.filterwarnings("ignore:.*is deprecated. Use files\\(\\) instead:DeprecationWarning")
    for item in items:
        if "tests/broker/" in str(item.fspath):
            item.add_marker(mark)


@pytest.fixture(scope="module", autouse=True)
def _drop_admin_clients():
    """Destroy the cached AdminClients after each module, before their brokers stop."""
    yield
    drop_admins()
