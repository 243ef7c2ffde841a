"""The perf tools' arithmetic and report lines, Kafka's formats, without a broker."""

from __future__ import annotations

import re

import click
from click.testing import CliRunner

from logbroker.cli.common import VariadicOptionCommand
from logbroker.cli.perf import ProducerStats, Throttler, totals_line


def test_final_line_has_kafkas_format_and_percentiles():
    stats = ProducerStats(num_records=1000, start_ms=0.0)
    for i in range(1000):
        stats.record(latency_ms=i % 100 + 1, size=100, now_ms=1.0)
    line = stats.total_line(now_ms=2000.0)
    assert line == ("1000 records sent, 500.000000 records/sec (0.05 MB/sec), 50.50 ms avg "
                    "latency, 100.00 ms max latency, 51 ms 50th, 96 ms 95th, 100 ms 99th, "
                    "100 ms 99.9th.")


def test_window_line_every_reporting_interval():
    stats = ProducerStats(num_records=10, start_ms=0.0, reporting_interval_ms=5000)
    assert stats.record(latency_ms=4, size=1024 * 1024, now_ms=1000.0) is None
    line = stats.record(latency_ms=8, size=1024 * 1024, now_ms=5000.0)
    assert line == ("2 records sent, 0.4 records/sec (0.40 MB/sec), 6.0 ms avg latency, "
                    "8.0 ms max latency.")
    assert stats.window_count == 0 and stats.count == 2


def test_latency_samples_are_bounded():
    stats = ProducerStats(num_records=2_000_000, start_ms=0.0)
    assert stats.sampling == 4


def test_throttler_spaces_sends():
    throttler = Throttler(per_second=100, start_s=10.0)
    assert throttler.delay_s(sent=50, now_s=10.0) == 0.5
    assert throttler.delay_s(sent=50, now_s=11.0) == 0.0
    assert Throttler(per_second=-1, start_s=0.0).delay_s(sent=10**9, now_s=0.0) == 0.0


def test_consumer_totals_line_has_kafkas_columns():
    line = totals_line(start_ms=0.0, end_ms=2000.0, records=1000, size=2 * 1024 * 1024,
                       join_ms=500.0)
    fields = line.split(", ")
    assert len(fields) == 10
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}", fields[0])
    assert fields[2:] == ["2.0000", "1.0000", "1000", "500.0000", "500", "1500", "1.3333",
                          "666.6667"]


def test_variadic_option_takes_every_value_up_to_the_next_option():
    @click.command(cls=VariadicOptionCommand, variadic=["--props"])
    @click.option("--props", multiple=True)
    @click.option("--n", type=int)
    def command(props, n):
        click.echo(f"{list(props)} {n}")

    result = CliRunner().invoke(command, ["--props", "a=1", "b=2", "--n", "-1", "--props", "c=3"])
    assert result.output == "['a=1', 'b=2', 'c=3'] -1\n"
