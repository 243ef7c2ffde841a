"""KafkaJS 2 (Node.js) against the broker: it speaks only the older non-flexible protocol versions
and ignores our version minima (clients.md 5), so it checks the other end of every range."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

JS_DIR = Path(__file__).resolve().parent.parent / "js"

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or not (JS_DIR / "node_modules" / "kafkajs").is_dir(),
    reason="needs node and `npm install --prefix tests/js` (.ci/run does both)")


def test_kafkajs_produces_consumes_in_a_group_and_commits(shared_broker, topic):
    result = subprocess.run(["node", str(JS_DIR / "roundtrip.js"), shared_broker.bootstrap, topic, f"g-{topic}"],
                            capture_output=True, text=True, timeout=90)
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    records = seen["seen"]
    assert sorted(int(r["key"][1:]) for r in records) == list(range(30))
    assert all(r["value"] == f"v{r['key'][1:]}" and r["n"] == r["key"][1:] for r in records)
    for partition in range(3):
        offsets = [r["offset"] for r in records if r["partition"] == partition]
        assert offsets == list(range(len(offsets)))
    ends = {int(e["partition"]): int(e["high"]) for e in seen["ends"]}
    assert sum(ends.values()) == 30
    committed = {p["partition"]: int(p["offset"]) for p in seen["committed"][0]["partitions"]}
    assert committed == ends
