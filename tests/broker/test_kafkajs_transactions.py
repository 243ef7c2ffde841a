"""A KafkaJS 2 transactional producer (tests/js/transactions.js): commit with offsets, abort."""

from __future__ import annotations

import json
import subprocess

from clients import create_topic
from test_kafkajs import JS_DIR, pytestmark  # noqa: F401 - the same skip condition
from transactional_clients import read_all


def test_kafkajs_transaction_commits_offsets_and_aborts(logbroker):
    create_topic(logbroker, "txn-kafkajs", 1)
    result = subprocess.run(["node", str(JS_DIR / "transactions.js"), logbroker, "txn-kafkajs", "g-txn-kafkajs"],
                            capture_output=True, text=True, timeout=90)
    assert result.returncode == 0, result.stderr
    offsets = json.loads(result.stdout.strip().splitlines()[-1])["offsets"]
    assert [(p["partition"], p["offset"]) for p in offsets[0]["partitions"]] == [(0, "7")]
    values = [v for _, _, v in read_all(logbroker, "txn-kafkajs", isolation="read_committed", expect=1)]
    assert values == [b"committed"]
