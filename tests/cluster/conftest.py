"""tests/cluster: a real ZooKeeper (Debian's package, in a child JVM) for cluster metadata tests.

`zookeeper` is one server for the whole session (it starts in about half a second); `zk_connect`
gives each test its own chroot on it, so tests never see each other's znodes.
"""

from __future__ import annotations

import uuid

import pytest
from kazoo.client import KazooClient

from logbroker.metadata.zookeeper_store import ensure_chroot


@pytest.fixture(scope="session")
def zookeeper(logbroker_zookeeper):
    """A running ZooKeeperProcess: the plugin's (logbroker.testing), shared with `logbroker_cluster`;
    skipped there if java or the jar is missing."""
    return logbroker_zookeeper


@pytest.fixture
def zk_connect(zookeeper) -> str:
    """A `zookeeper.connect` string with a fresh chroot."""
    return f"{zookeeper.connect_string}/t-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def zk_client(zk_connect):
    """A raw kazoo session in the test's chroot, to read and tamper with znodes directly."""
    ensure_chroot(zk_connect, timeout_s=10)
    client = KazooClient(hosts=zk_connect)
    client.start(timeout=10)
    yield client
    client.stop()
    client.close()
