"""The reference pipeline end to end, on a small feed: every window equals the Python recount."""

from __future__ import annotations

from datetime import timedelta

from rich.console import Console

from logbroker.pipeline.events import END_OF_STREAM, end_of_stream_marker, generate_events, \
    parse_iso_ms
from logbroker.pipeline.results import recount
from logbroker.pipeline.run import PipelineOptions, print_summary, run_pipeline


def test_feed_is_seeded_and_late_only_within_the_watermark_delay():
    events = generate_events(2000, seed=3)
    assert events == generate_events(2000, seed=3)
    assert events != generate_events(2000, seed=4)
    latest = None
    for event in events:
        moment = parse_iso_ms(event.event_time)
        if latest is not None:
            assert moment >= latest - timedelta(seconds=90)
        latest = max(latest or moment, moment)
    assert sorted(parse_iso_ms(e.event_time) for e in events) != \
        [parse_iso_ms(e.event_time) for e in events]  # really out of order


def test_recount_skips_the_marker_and_sums_purchases():
    events = generate_events(500, seed=1)
    marker = end_of_stream_marker(events, event_id=500, past_s=600)
    counts = recount([*events, marker])
    assert sum(n for n, _ in counts.values()) == 500
    assert all(event_type != END_OF_STREAM for _, event_type in counts)
    assert sum(r for (_, t), (_, r) in counts.items() if t != "purchase") == 0


def test_pipeline_results_equal_the_recount_and_a_second_run_works(spark, tmp_path):
    options = PipelineOptions(events=1500, seed=11, output_dir=tmp_path / "out",
                              max_offsets_per_trigger=1000)
    console = Console(record=True, width=120)
    for _ in range(2):
        result = run_pipeline(options, spark=spark, console=console)
        assert result.ok, result.checks
        assert result.found == result.expected
        assert result.input_rows == 1500 + 3
        assert result.micro_batches >= 3
        assert result.chart.exists() and result.chart.stat().st_size > 10_000
    print_summary(result, console)
    assert "✓ equal" in console.export_text()
