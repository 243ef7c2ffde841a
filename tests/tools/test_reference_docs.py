"""The generated reference pages (docs/reference/) are what the code gives, and the manual builds
as a site with no broken link: a config key, a CLI option or a metric that changes without its
page being regenerated fails here, with the command that fixes it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from logbroker.tools.reference_docs import metrics_page, pages

ROOT = Path(__file__).parent.parent.parent
FIX = "regenerate docs/reference/ with `make reference-docs`"


def test_every_generated_page_equals_what_the_code_gives(tmp_path):
    for relative, text in pages(tmp_path).items():
        assert (ROOT / "docs" / relative).read_text() == text, f"{relative} is stale: {FIX}"


def test_the_metrics_page_lists_each_family_once_with_its_labels():
    scrape = (
        "# HELP kafka_log_log_size Bytes on disk\n# TYPE kafka_log_log_size gauge\n"
        'kafka_log_log_size{topic="t",partition="0"} 10.0\n'
        "# HELP kafka_network_requestmetrics_totaltimems Milliseconds | per request\n"
        "# TYPE kafka_network_requestmetrics_totaltimems summary\n"
        'kafka_network_requestmetrics_totaltimems{request="Produce",quantile="0.99"} 1.0\n'
        'kafka_network_requestmetrics_totaltimems_count{request="Produce"} 3.0\n')
    rows = [line for line in metrics_page(scrape).splitlines() if line.startswith("| `")]
    assert rows == ["| `kafka_log_log_size` | gauge | partition, topic | Bytes on disk |",
                    "| `kafka_network_requestmetrics_totaltimems` | summary | request | "
                    "Milliseconds \\| per request |"]


def test_the_manual_builds_strictly():
    """mkdocs --strict: a link to a missing page or anchor, or a page left out of the nav, fails."""
    mkdocs = str(Path(sys.executable).parent / "mkdocs")
    result = subprocess.run([mkdocs, "build", "--strict", "--site-dir", str(ROOT / "build" / "site-check")],
                            cwd=ROOT, capture_output=True, text=True, timeout=300,
                            env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert result.returncode == 0, result.stdout + result.stderr
