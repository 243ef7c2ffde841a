"""ZooKeeperProcess: a real server that starts, serves, survives a restart, and stops cleanly."""

from __future__ import annotations

import pytest
from kazoo.client import KazooClient

from logbroker.zookeeper_process import ZooKeeperProcess, four_letter_word, unavailable_reason

pytestmark = pytest.mark.skipif(unavailable_reason() is not None,
                                reason=f"needs a real ZooKeeper: {unavailable_reason()}")


def test_restart_keeps_port_and_znodes_and_stop_is_clean(tmp_path):
    zk = ZooKeeperProcess(tmp_path).start()
    try:
        assert four_letter_word(zk.host, zk.port, "ruok") == "imok"
        client = KazooClient(hosts=zk.connect_string)
        client.start(timeout=10)
        client.create("/kept", b"value")
        client.stop()
        port = zk.port
        zk.kill()
        assert not zk.is_serving()
        zk.start()
        assert zk.port == port
        client = KazooClient(hosts=zk.connect_string)
        client.start(timeout=10)
        assert client.get("/kept")[0] == b"value"
        client.stop()
    finally:
        status = zk.stop()
    assert status is not None
    assert not zk.is_serving()
    assert "clientPortAddress=127.0.0.1" in (tmp_path / "zoo.cfg").read_text()
