"""What a serving broker imports (start time and idle memory): `logbroker serve` does
not load click, and a broker that has seen no KIP-848 consumer group, no share group, no SASL
inter-broker connection and no metrics port does not load their modules. Each of these is
imported on first use instead; the tests of those features show that the first use works."""

from __future__ import annotations

import sys

from logbroker.testing import BrokerProcess

# Run as `python -c SCRIPT serve …`: the `logbroker` entry point, which writes the names of the
# modules loaded to stdout when the broker exits.
SCRIPT = """
import atexit, sys
atexit.register(lambda: print("\\n".join(sorted(sys.modules)), flush=True))
from logbroker.cli.entry import main
main()
"""

NOT_IMPORTED = (
    "click",
    "logbroker.coordinator.consumer_group",
    "logbroker.coordinator.consumer_group_manager",
    "logbroker.coordinator.record_schema",
    "re2",
    "logbroker.coordinator.share_group",
    "logbroker.coordinator.share_coordinator",
    "logbroker.coordinator.share_partition_manager",
    "logbroker.coordinator.share_persister",
    "kio.schema.sasl_handshake.v1.request",
    "kio.schema.sasl_authenticate.v2.request",
    "logbroker.server.apis.share_fetch",
    "logbroker.server.apis.consumer_group_heartbeat",
    "prometheus_client",
    "kazoo",
    "starlette",
    "jinja2",
    "shutil",  # and through it bz2 and lzma: only deleting a partition directory needs it
    "tempfile",
)


class ImportListingBroker(BrokerProcess):
    def command(self) -> list[str]:
        return [sys.executable, "-c", SCRIPT, *super().command()[3:]]


def test_a_fresh_broker_loads_only_what_serving_needs(tmp_path):
    broker = ImportListingBroker(tmp_path)
    with broker:
        pass
    loaded = set(broker.new_log_text().splitlines())
    assert "logbroker.server.broker" in loaded  # the listing is there
    assert sorted(loaded & set(NOT_IMPORTED)) == []
