"""`logbroker dev-cluster`: ZooKeeper and three brokers in one command (each in its rack),
stopped cleanly by SIGTERM."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time

from confluent_kafka.admin import AdminClient

from cluster_helpers import wait_for


def test_dev_cluster_serves_three_brokers_and_stops_cleanly_on_sigterm(zookeeper, tmp_path):
    # (`zookeeper` only to skip where java or the ZooKeeper jar is missing.)
    process = subprocess.Popen(
        [sys.executable, "-m", "logbroker.cli", "dev-cluster", "--brokers", "3", "--port", "0",
         "--dir", str(tmp_path / "dev"), "--racks", "a,b,c"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        bootstrap = None
        output = []
        deadline = time.monotonic() + 60
        while bootstrap is None and time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line:
                break
            output.append(line)
            match = re.match(r"bootstrap servers: (\S+)", line)
            if match:
                bootstrap = match.group(1)
        assert bootstrap is not None, "".join(output)
        assert len(bootstrap.split(",")) == 3

        admin = AdminClient({"bootstrap.servers": bootstrap})
        md = wait_for(lambda: (lambda m: m if len(m.brokers) == 3 else None)(admin.list_topics(timeout=10)))
        assert sorted(md.brokers) == [1, 2, 3]
        assert md.controller_id in (1, 2, 3)
        nodes = admin.describe_cluster(request_timeout=10).result(10).nodes
        assert sorted((n.id, n.rack) for n in nodes) == [(1, "a"), (2, "b"), (3, "c")]

        process.send_signal(signal.SIGTERM)
        rest, _ = process.communicate(timeout=60)
        assert process.returncode == 0, rest
        assert "stopped" in rest
        for broker_id in (1, 2, 3):
            log = (tmp_path / "dev" / f"broker-{broker_id}" / "broker.log").read_text()
            assert f"Broker {broker_id} shut down cleanly" in log
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
