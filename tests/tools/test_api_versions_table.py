"""docs/reference/api-versions.md is what a running broker answers to ApiVersions, so the doc cannot drift
from the code: when a version range changes, regenerate it (the failure says how)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from logbroker.protocol.apis import api_versions_entries
from logbroker.tools.api_versions_table import fetch_api_versions, render

DOC = Path(__file__).parent.parent.parent / "docs" / "reference" / "api-versions.md"


def test_committed_doc_equals_the_brokers_api_versions_answer(shared_broker):
    answer = asyncio.run(fetch_api_versions(shared_broker.host, shared_broker.port))
    assert sorted(answer) == sorted(api_versions_entries())
    assert DOC.read_text() == render(answer), (
        "docs/reference/api-versions.md is stale: regenerate it with `python -m "
        "logbroker.tools.api_versions_table --bootstrap-server HOST:PORT --output docs/reference/api-versions.md`")


def test_render_names_apis_as_kafka_does():
    page = render([(2, 1, 10), (0, 3, 11), (9999, 0, 0)])
    assert page.splitlines()[-3:] == ["| 0 | Produce | 3 | 11 |", "| 2 | ListOffsets | 1 | 10 |",
                                      "| 9999 | Api9999 | 0 | 0 |"]
